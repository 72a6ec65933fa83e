"""xlm_fairseq/patches/cpu_clip_norm.py: --cpu --clip-norm on a machine with a GPU takes the norm on
the CPU."""

import pytest
import torch


def test_cpu_run_clips_on_a_machine_with_a_gpu(monkeypatch):
    """fairseq's clip_grad_norm_ put the norm on the GPU whenever one was visible, and a --cpu run with
    --clip-norm stopped at its first update there (seen on an H100). With a GPU made visible to it
    (here: torch.cuda.is_available patched), fairseq's function still reaches for the device; the
    plugin's clips the CPU gradients as a machine without a GPU does."""
    from fairseq import utils

    import xlm_fairseq  # noqa: F401  (installs the patches)
    from xlm_fairseq.patches import cpu_clip_norm

    def params():
        torch.manual_seed(0)
        ps = [torch.nn.Parameter(torch.randn(4, 3)), torch.nn.Parameter(torch.randn(5))]
        for p in ps:
            p.grad = torch.randn_like(p) * 10
        return ps

    expected = params()
    expected_norm = utils.clip_grad_norm_(expected, 5.0)  # no GPU visible: fairseq's CPU arithmetic
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises((RuntimeError, AssertionError, AttributeError)):
        cpu_clip_norm._original_clip_grad_norm_(params(), 5.0)  # asks torch for a CUDA device
    clipped = params()
    assert utils.clip_grad_norm_ is cpu_clip_norm.clip_grad_norm_
    norm = utils.clip_grad_norm_(clipped, 5.0)
    assert norm.device.type == "cpu" and torch.equal(norm, expected_norm) and norm > 5
    for p, q in zip(clipped, expected):
        assert torch.equal(p.grad, q.grad)
    total = torch.norm(torch.stack([p.grad.norm() for p in clipped]))
    assert abs(total.item() - 5.0) < 1e-4
