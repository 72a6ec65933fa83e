"""fairseq's checkpoint reader, with one line for a file it cannot read.

fairseq 0.12's ``checkpoint_utils.load_checkpoint_to_cpu`` (fairseq-train's resume, fairseq-generate,
fairseq-interactive, ``hub_utils``) lets torch's exception through: a truncated or corrupt file, or
a pickle the allowlist refuses, was a traceback. It is now one ``error:`` line naming the file.
fairseq-train's resume (``checkpoint_utils.load_checkpoint``, which only fairseq-train calls) adds
how to resume from another checkpoint when ``checkpoint_last.pt`` is the unreadable one.
"""

import os

from fairseq import checkpoint_utils

from xlm_fairseq.checkpoints import unreadable
from xlm_fairseq.errors import XLMUserError

_original_read = checkpoint_utils.load_checkpoint_to_cpu
_original_resume = checkpoint_utils.load_checkpoint


class UnreadableCheckpoint(XLMUserError):
    def __init__(self, path, message: str):
        super().__init__(message)
        self.path = str(path)


def load_checkpoint_to_cpu(path, *args, **kwargs):
    try:
        return _original_read(path, *args, **kwargs)
    except Exception as e:
        error = unreadable(path, e)
        if error is None:
            raise
        raise UnreadableCheckpoint(path, str(error)) from None


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
