"""Number formats: ``--bf16`` without a TPU, TF32 matmuls under CUDA, and a hint to use bf16 on CPUs that
multiply it in hardware (``xlm_fairseq.hardware``).

fairseq 0.12 has no hook between parsing and device set-up; both are applied in its
``distributed_utils.call_main``, which fairseq-train / -interactive / -validate / -eval-lm go through.

fairseq's option parser turns ``--bf16`` into ``--tpu`` (TPUs were the only bf16 hardware when it
was written): ``fairseq-train --bf16`` on a GPU or CPU then asks torch_xla for a device and fails.
Where torch_xla is not installed there is no TPU to mean, so the implied ``--tpu`` is taken back
before fairseq sets up devices and workers; with torch_xla installed fairseq's behaviour stays.
"""

import importlib.util
import logging

import torch
from fairseq.distributed import utils as distributed_utils

from xlm_fairseq import hardware

logger = logging.getLogger(__name__)

_original_call_main = distributed_utils.call_main
XLM_TASKS = ("cross_lingual_lm", "translation_lm", "xlm_classification")  # the tasks with --no-tf32


def has_torch_xla() -> bool:
    return importlib.util.find_spec("torch_xla") is not None


def bf16_without_tpu(cfg) -> None:
    """``--bf16`` on a GPU or CPU: undo the ``--tpu`` that fairseq's parser implied, in ``common`` and in the
    copy its command line leaves in ``distributed_training`` (there an interpolation of ``common.tpu`` only in
    a config built from dataclasses): that copy wraps the model for several processes in fairseq's TPU
    data-parallel wrapper, which imports torch_xla."""
    common = cfg.common
    if getattr(common, "bf16", False) and getattr(common, "tpu", False) and not has_torch_xla():
        common.tpu = False
        distributed = getattr(cfg, "distributed_training", None)
        if distributed is not None and getattr(distributed, "tpu", False):
            distributed.tpu = False
        logger.info("--bf16 without torch_xla: bfloat16 on %s, not a TPU", "CPU" if common.cpu else "the GPU")


def hint_cpu_bf16(cfg) -> None:
    """Say so when pretraining (``cross_lingual_lm``) runs in fp32 on a CPU that multiplies bf16 in hardware,
    as fairseq's trainer does for --fp16 on GPUs that would gain from it."""
    common = cfg.common
    precise = not (common.bf16 or common.fp16 or common.memory_efficient_fp16 or common.amp)
    on_cpu = common.cpu or not torch.cuda.is_available()
    if on_cpu and precise and str(getattr(cfg.task, "_name", "")) == "cross_lingual_lm":
        instructions = hardware.cpu_bf16_hardware()
        if instructions:
            hint = f"this CPU multiplies bf16 in hardware ({instructions}): --bf16 pretrains faster (bench/README.md)"
            logger.info(hint)


def call_main(cfg, main, **kwargs):
    bf16_without_tpu(cfg)
    task = getattr(cfg, "task", None)
    if task is not None and str(getattr(task, "_name", "")) in XLM_TASKS:
        set_tf32(not getattr(task, "no_tf32", False))
        hint_cpu_bf16(cfg)
    return _original_call_main(cfg, main, **kwargs)


def install() -> None:
    """fairseq-train / -interactive / -validate / -eval-lm reach their main through ``call_main``."""
    distributed_utils.call_main = call_main


def set_tf32(enabled: bool) -> None:
    """TF32 tensor cores for fp32 matmuls and convolutions under CUDA (Ampere and later: several
    times faster than full fp32, at ~10 bits of mantissa in the products); no effect on CPU."""
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
