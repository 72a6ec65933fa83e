"""xlm_fairseq/patches/precision.py: TF32 under CUDA unless --no-tf32, and fp32 pretraining on a CPU
that multiplies bf16 in hardware says that --bf16 is faster."""

import pytest
import torch
from conftest import setup_task


def test_bf16_without_torch_xla_means_no_tpu_anywhere_in_the_config(data_bin):
    """fairseq's parser makes --bf16 imply --tpu, and its command line copies that into the distributed
    options, where it would wrap the model of several processes in the TPU wrapper (which imports torch_xla):
    both are taken back."""
    from fairseq.distributed import utils as distributed_utils

    from xlm_fairseq.patches.precision import has_torch_xla

    if has_torch_xla():
        pytest.fail("torch_xla is installed here: --bf16 keeps fairseq's --tpu, nothing to test")
    _, cfg = setup_task(data_bin, "cross_lingual_lm", "--langs", "en,de", "--bf16", "--cpu")
    assert cfg.common.tpu and cfg.distributed_training.tpu  # what fairseq's parser made of --bf16
    seen = []
    distributed_utils.call_main(cfg, lambda cfg: seen.append((cfg.common.tpu, cfg.distributed_training.tpu)))
    assert seen == [(False, False)]


def test_tf32_unless_asked_not_to(data_bin):
    """fairseq's commands (through call_main) run the XLM tasks with TF32 unless --no-tf32; setting up
    a task alone (a hub, a test) leaves torch's setting as it is."""
    from fairseq.distributed import utils as distributed_utils

    def tf32():
        return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32

    seen = []
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        for extra in ((), ("--no-tf32",)):
            _, cfg = setup_task(data_bin, "cross_lingual_lm", "--langs", "en,de", *extra)
            seen.append(tf32())
            distributed_utils.call_main(cfg, lambda cfg: seen.append(tf32()))
        assert seen == [(False, False), (True, True), (True, True), (False, False)]
    finally:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False


@pytest.mark.parametrize("hardware", ["AMX", "AVX-512 BF16", ""])
def test_fp32_pretraining_on_a_cpu_that_multiplies_bf16_names_bf16(hardware, monkeypatch, caplog):
    """Where the CPU multiplies bf16 in hardware (AMX or AVX-512 BF16), fp32 pretraining on it says that
    --bf16 is faster (once, at start-up); not in bf16, not for translation, not on other CPUs."""
    from types import SimpleNamespace

    from xlm_fairseq.patches import precision

    monkeypatch.setattr("xlm_fairseq.hardware.cpu_bf16_hardware", lambda: hardware)

    def cfg(task, bf16=False):
        common = SimpleNamespace(cpu=True, bf16=bf16, fp16=False, memory_efficient_fp16=False, amp=False)
        return SimpleNamespace(common=common, task=SimpleNamespace(_name=task))

    caplog.set_level("INFO", logger=precision.__name__)
    for args in (("cross_lingual_lm",), ("cross_lingual_lm", True), ("translation_lm",)):
        precision.hint_cpu_bf16(cfg(*args))
    hints = [r.getMessage() for r in caplog.records if "bf16 in hardware" in r.getMessage()]
    expected = f"this CPU multiplies bf16 in hardware ({hardware}): --bf16 pretrains faster (bench/README.md)"
    assert hints == ([expected] if hardware else [])
