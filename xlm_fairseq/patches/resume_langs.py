"""fairseq-train's resume checks the language list the checkpoint was trained with.

fairseq 0.12's ``Trainer.load_checkpoint`` loads the model's state dict and never calls the task's
``load_state_dict`` with the checkpoint's ``task_state``, where the language list is kept; language ids
are positions in it, so resuming with ``--langs`` in another order would train every language with
another's embedding. Every checkpoint fairseq reads (``checkpoint_utils.load_checkpoint_to_cpu``) now
hands the list to the model with its weights (:func:`xlm_fairseq.checkpoints.hand_langs_to_model`).
"""

from fairseq import checkpoint_utils

from xlm_fairseq.checkpoints import hand_langs_to_model


def install() -> None:
    read = checkpoint_utils.load_checkpoint_to_cpu
    if getattr(read, "hands_langs", False):
        return

    def load_checkpoint_to_cpu(path, *args, **kwargs):
        return hand_langs_to_model(read(path, *args, **kwargs), str(path))

    load_checkpoint_to_cpu.hands_langs = True
    checkpoint_utils.load_checkpoint_to_cpu = load_checkpoint_to_cpu
