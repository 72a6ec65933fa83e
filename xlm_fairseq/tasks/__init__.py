import logging

from fairseq.tasks import TASK_DATACLASS_REGISTRY, TASK_REGISTRY, register_task

logger = logging.getLogger(__name__)


def register_task_replacing(name, dataclass):
    """``register_task`` that replaces an existing task of the same name.

    fairseq ships a legacy MLM-only ``cross_lingual_lm``; fairseq main silently keeps the first
    registration and 0.12.2 raises, so ours must remove it from the task registry, the dataclass
    registry and hydra's ConfigStore (``register_task`` re-stores the node under the same name).
    """

    def wrap(cls):
        previous = TASK_REGISTRY.pop(name, None)
        TASK_DATACLASS_REGISTRY.pop(name, None)
        if previous is not None and previous is not cls:
            logger.info(
                f"xlm_fairseq: task '{name}' now is {cls.__module__}.{cls.__name__} "
                f"(was {previous.__module__}.{previous.__name__})"
            )
        registered = register_task(name, dataclass=dataclass)(cls)
        assert TASK_REGISTRY[name] is cls, f"could not register task {name}"
        return registered

    return wrap
