"""fairseq's checkpoint reader, with one line for a file it cannot read, and the language list handed
to the model.

fairseq 0.12's ``checkpoint_utils.load_checkpoint_to_cpu`` (fairseq-train's resume, fairseq-generate,
fairseq-interactive, ``hub_utils``) lets torch's exception through: a truncated or corrupt file, or
a pickle the allowlist refuses, was a traceback. It is now one ``error:`` line naming the file.

fairseq 0.12's ``Trainer.load_checkpoint`` loads the model's state dict and never calls the task's
``load_state_dict`` with the checkpoint's ``task_state``, where the language list is kept; language ids
are positions in it, so resuming with ``--langs`` in another order would train every language with
another's embedding. Every checkpoint read here hands the list to the model with its weights
(:func:`xlm_fairseq.checkpoints.hand_langs_to_model`), and the model checks it.
fairseq-train's resume (``checkpoint_utils.load_checkpoint``, which only fairseq-train calls) adds
how to resume from another checkpoint when ``checkpoint_last.pt`` is the unreadable one.
"""

import os

from fairseq import checkpoint_utils

from xlm_fairseq.checkpoints import hand_langs_to_model, unreadable
from xlm_fairseq.errors import XLMUserError

_original_read = checkpoint_utils.load_checkpoint_to_cpu
_original_resume = checkpoint_utils.load_checkpoint


class UnreadableCheckpoint(XLMUserError):
    def __init__(self, path, message: str):
        super().__init__(message)
        self.path = str(path)


def load_checkpoint_to_cpu(path, *args, **kwargs):
    try:
        state = _original_read(path, *args, **kwargs)
    except Exception as e:
        error = unreadable(path, e)
        if error is None:
            raise
        raise UnreadableCheckpoint(path, str(error)) from None
    return hand_langs_to_model(state, str(path))


def load_checkpoint(cfg, trainer, **kwargs):
    try:
        return _original_resume(cfg, trainer, **kwargs)
    except UnreadableCheckpoint as e:
        if not os.path.basename(e.path).startswith("checkpoint_last"):
            raise
        raise XLMUserError(
            f"{e}; to resume from another checkpoint of that directory, give it as --restore-file "
            "(this file is left as it is)"
        ) from None


def install() -> None:
    checkpoint_utils.load_checkpoint_to_cpu = load_checkpoint_to_cpu
    checkpoint_utils.load_checkpoint = load_checkpoint
