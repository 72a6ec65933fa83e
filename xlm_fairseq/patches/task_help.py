"""``fairseq-train --task cross_lingual_lm --help`` lists the task's options.

fairseq adds a task's options to its parser only after a first parse, and ``--help`` exits during
that first parse, so help shows generic options alone. For this plugin's tasks, add the task's (and
the chosen architecture's) options before help is printed. Nothing changes without -h/--help.

Patch of fairseq 0.12's ``options.parse_args_and_arch`` (no hook to add a task's options to --help).
"""

import sys

from fairseq import options

_original = options.parse_args_and_arch


def parse_args_and_arch(parser, input_args=None, parse_known=False, suppress_defaults=False, modify_parser=None):
    argv = sys.argv[1:] if input_args is None else input_args
    if "-h" in argv or "--help" in argv:
        from fairseq.models import ARCH_MODEL_REGISTRY
        from fairseq.tasks import TASK_REGISTRY

        known, _ = parser.parse_known_args([a for a in argv if a not in ("-h", "--help")])
        task = TASK_REGISTRY.get(getattr(known, "task", None))
        if task is not None and task.__module__.startswith("xlm_fairseq."):
            task.add_args(parser)
            model = ARCH_MODEL_REGISTRY.get(getattr(known, "arch", None))
            if model is not None and model.__module__.startswith("xlm_fairseq."):
                model.add_args(parser.add_argument_group("Model-specific configuration"))
    return _original(parser, input_args, parse_known, suppress_defaults, modify_parser)


def install():
    options.parse_args_and_arch = parse_args_and_arch
