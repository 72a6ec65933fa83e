"""fairseq's legacy MLM-only ``cross_lingual_lm`` task gives way to the plugin's task of that name.

fairseq 0.12.2 raises on a second registration of a task name and fairseq main silently keeps the first,
and neither offers a hook to replace one; so fairseq's registration is removed from the task registry,
the dataclass registry and hydra's ConfigStore node (``register_task`` stores the plugin's under the same
name), before the plugin's tasks register. Only fairseq's own class is removed: installing again leaves
the plugin's task in place.
"""

import fairseq.tasks  # noqa: F401  (registers fairseq's tasks, the legacy one among them)
from fairseq.tasks import TASK_DATACLASS_REGISTRY, TASK_REGISTRY

NAME = "cross_lingual_lm"


def install() -> None:
    # not logged: fairseq's import sets DEBUG logging (wav2vec2_classification), and every command of ours
    # would start with the line
    task = TASK_REGISTRY.get(NAME)
    if task is not None and task.__module__.startswith("fairseq."):
        TASK_REGISTRY.pop(NAME)
        TASK_DATACLASS_REGISTRY.pop(NAME, None)
