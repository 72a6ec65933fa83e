from .classification import XLMSentenceClassificationCriterion  # noqa: F401
from .cross_entropy import XLMCrossEntropyCriterion  # noqa: F401


def build_task_criterion(task, cfg):
    """Build ``task.criterion_name``; refuse an explicit, different ``--criterion``."""
    from fairseq.criterions import CRITERION_REGISTRY

    from xlm_fairseq.errors import XLMUserError

    name = getattr(cfg, "_name", None)
    if name not in (None, "cross_entropy", task.criterion_name):  # cross_entropy is fairseq's default
        raise XLMUserError(
            f"--criterion {name} cannot train --task {task.cfg._name}; leave --criterion out "
            f"(the task uses {task.criterion_name})"
        )
    return CRITERION_REGISTRY[task.criterion_name](task)
