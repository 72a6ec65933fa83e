from fairseq.tasks import TASK_DATACLASS_REGISTRY, TASK_REGISTRY, register_task


def register_task_replacing(name, dataclass):
    """``register_task`` that replaces an existing task of the same name.

    fairseq ships a legacy MLM-only ``cross_lingual_lm``; fairseq main silently keeps the first
    registration and 0.12.2 raises, so ours must remove it from the task registry, the dataclass
    registry and hydra's ConfigStore (``register_task`` re-stores the node under the same name).
    """

    def wrap(cls):
        # not logged: fairseq's import sets DEBUG logging (wav2vec2_classification), and every command
        # of ours would start with the line
        TASK_REGISTRY.pop(name, None)
        TASK_DATACLASS_REGISTRY.pop(name, None)
        registered = register_task(name, dataclass=dataclass)(cls)
        assert TASK_REGISTRY[name] is cls, f"could not register task {name}"
        return registered

    return wrap
