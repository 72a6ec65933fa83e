"""Gradient clipping of a ``--cpu`` run on a machine that has a GPU.

fairseq 0.12's ``utils.clip_grad_norm_`` (without NVIDIA's apex) moves every parameter's gradient
norm to ``torch.cuda.current_device()`` whenever CUDA is available, wherever the gradients are; the
clip coefficient then lives on the GPU and torch >= 2.x refuses to multiply CPU gradients by it
("scalar tensor is expected to be on cpu but is on cuda:0"). So ``fairseq-train --cpu --clip-norm 5``
(the recipes' setting, XLM's clip) stopped at its first update on any GPU machine; seen on an H100.

For CPU gradients under a visible GPU, the norm is now taken where the gradients are -- fairseq's own
CPU arithmetic, so the numbers are those of a machine without a GPU. Everything else (CUDA and XLA
gradients, mixture-of-experts gradients) goes to fairseq's function unchanged.
"""

import torch
from fairseq import utils

_original_clip_grad_norm_ = utils.clip_grad_norm_


@torch.no_grad()
def clip_grad_norm_(params, max_norm, aggregate_norm_fn=None) -> torch.Tensor:
    params = [params] if isinstance(params, torch.Tensor) else list(params)
    grads = [p.grad.detach() for p in params if p is not None and getattr(p, "grad", None) is not None]
    if (
        len(grads) < 2
        or not torch.cuda.is_available()
        or any(g.device.type != "cpu" for g in grads)
        or any(hasattr(p, "expert") for p in params)
    ):
        return _original_clip_grad_norm_(params, max_norm, aggregate_norm_fn)
    total_norm = torch.norm(torch.stack([torch.norm(g, p=2, dtype=torch.float32) for g in grads]))
    if aggregate_norm_fn is not None:
        total_norm = aggregate_norm_fn(total_norm)
    if max_norm > 0:
        clip_coef = (float(max_norm) / (total_norm + 1e-6)).clamp_(max=1)
        torch._foreach_mul_(grads, clip_coef)
    return total_norm


def install() -> None:
    """fairseq's optimizers call ``utils.clip_grad_norm_`` through the module."""
    utils.clip_grad_norm_ = clip_grad_norm_
