"""A training stack compiled by ``torch.compile`` (``--compile``), which says in the log what compiling
cost. The plain version it must equal is the eager stack itself (``XLMTransformer._stack``); the
test that says so trains twice, eager and compiled, and compares the losses
(``tests/modules/test_compile.py``)."""

import logging

import torch

logger = logging.getLogger(__name__)

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")


def compiled_graphs() -> int:
    """Graphs dynamo has compiled in this process, every stack's."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def compile_seconds() -> float:
    """Seconds spent compiling in this process so far, backward graphs included."""
    from torch._dynamo.utils import calculate_time_spent

    return float(calculate_time_spent().get("total_wall_time", 0.0))


class CompiledStack:
    """``fn`` compiled with dynamo's automatic dynamic shapes: the first batch shape compiles a static
    graph, a new shape one whose changed sizes are symbolic (the length, later the batch rows too), so
    that varied batches (translation, TLM pairs) cost two or three compiles, not one per shape. Each
    compile is logged with the shape that caused it and the seconds spent compiling so far."""

    def __init__(self, fn, name: str, mode: str = "default"):
        self.name = name
        self.fn = torch.compile(fn, mode=None if mode == "default" else mode, dynamic=None)

    def __call__(self, tokens, *args):
        before = compiled_graphs()
        out = self.fn(tokens, *args)
        if compiled_graphs() != before:
            logger.info(
                f"torch.compile: {self.name} stack compiled for a {tuple(tokens.shape)} batch "
                f"({compiled_graphs()} graphs in this process, {compile_seconds():.1f} s of compiling so far)"
            )
        return out
