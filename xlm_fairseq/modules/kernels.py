"""Training kernels. On CPU: dropout from a quarter of the random numbers, and attention with dropout that
recomputes its weights in the backward pass; each equals torch's plain version in distribution (its
test says so: ``tests/models/test_model.py``), and GPUs keep torch's fused kernels. On every device: the
criterion's summed cross-entropy, with one vocabulary-sized buffer beside the logits where torch's has three."""

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

# attention weights of at most this many elements (B x H x qlen x klen; 4 MiB in fp32) are kept for the
# backward pass; larger ones are recomputed there
KEEP_WEIGHTS_UP_TO = 2**20


def keep_mask(shape, p: float, generator: Optional[torch.Generator] = None):
    """Dropout's keep-mask from 16-bit random integers (four per 64-bit draw), and the scale of what
    is kept. torch's CPU dropout draws one float per element with ``bernoulli_`` (a large share of an XLM
    training step on CPU, bench/README.md); this draws a quarter as many random numbers. The probability is rounded
    to a multiple of 1/65536 (0.1 -> 0.1000061) and the scale is 1 / (1 - that), so every kept value
    keeps its expectation."""
    dropped = round(p * 65536)
    n = math.prod(shape)
    bits = torch.empty((n + 3) // 4, dtype=torch.int64).random_(-(2**63), None, generator=generator)
    return (bits.view(torch.int16)[:n] >= dropped - 32768).view(shape), 65536.0 / (65536 - dropped)


class CPUDropout(torch.autograd.Function):
    """Dropout with the mask of :func:`keep_mask`."""

    @staticmethod
    def forward(ctx, x: Tensor, p: float) -> Tensor:
        keep, ctx.scale = keep_mask(x.shape, p)
        ctx.save_for_backward(keep)
        return x.mul(keep).mul_(ctx.scale)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None


class CPUAttentionWithDropout(torch.autograd.Function):
    """dropout(softmax(q k^T + mask)) v for CPU training, keeping only q, k, v and a seed for the
    backward pass, which rebuilds the B x H x qlen x klen weights (FlashAttention's recomputation).

    torch's CPU kernels drop attention weights in the unfused maths with ``bernoulli_`` masks and keep
    the weights, their dropped copy and the mask for every layer: slower than this forward and backward,
    and more peak memory (bench/README.md, "Attention recomputation"). Small weights (at most
    ``KEEP_WEIGHTS_UP_TO`` elements: the recipes' translation batches) are kept instead, which saves the
    backward pass a second softmax and mask. ``q`` comes scaled."""

    @staticmethod
    def _weights(q, k, allowed, p, seed):
        scores = torch.matmul(q, k.transpose(2, 3))
        if allowed is not None:
            scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        probs = F.softmax(scores, dim=-1)
        keep, scale = keep_mask(probs.shape, p, torch.Generator().manual_seed(seed))
        return probs, keep, scale

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, allowed: Optional[Tensor], p: float) -> Tensor:
        seed = int(torch.randint(0, 2**62, (1,)))  # from the default generator: fairseq's --seed holds
        probs, keep, scale = CPUAttentionWithDropout._weights(q, k, allowed, p, seed)
        ctx.p, ctx.seed, ctx.scale = p, seed, scale
        ctx.kept = probs.numel() <= KEEP_WEIGHTS_UP_TO
        if ctx.kept:
            dropped = probs * keep * scale
            ctx.save_for_backward(q, k, v, probs, keep)
            return torch.matmul(dropped, v)
        ctx.save_for_backward(q, k, v, allowed)
        return torch.matmul(probs.mul_(keep).mul_(scale), v)

    @staticmethod
    def backward(ctx, grad: Tensor):
        if ctx.kept:
            q, k, v, probs, keep = ctx.saved_tensors
            scale = ctx.scale
        else:
            q, k, v, allowed = ctx.saved_tensors
            probs, keep, scale = CPUAttentionWithDropout._weights(q, k, allowed, ctx.p, ctx.seed)
        grad_v = torch.matmul(probs.mul(keep).mul_(scale).transpose(2, 3), grad)
        grad_probs = torch.matmul(grad, v.transpose(2, 3)).mul_(keep).mul_(scale)
        # recomputed weights are this call's own and may be overwritten; kept ones are the saved tensor
        multiply = probs.mul if ctx.kept else probs.mul_
        grad_scores = multiply(grad_probs.sub_((grad_probs * probs).sum(-1, keepdim=True)))
        return torch.matmul(grad_scores, k), torch.matmul(grad_scores.transpose(2, 3), q), grad_v, None, None


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """``F.dropout``; on CPU tensors the cheaper mask of :class:`CPUDropout` (GPUs keep torch's
    fused kernel, and a compiled stack the compiler's own, which it fuses with its neighbours)."""
    if not training or p == 0:
        return x
    if x.device.type != "cpu" or p >= 1 or torch.compiler.is_compiling():
        return F.dropout(x, p=p, training=True)
    return CPUDropout.apply(x, p)


class SummedCrossEntropy(torch.autograd.Function):
    """``F.cross_entropy(logits, target, ignore_index=pad, reduction="sum")`` whose backward pass turns the
    saved log-probabilities into the logits' gradient in place (softmax - one-hot). torch's version
    allocates two more vocabulary-sized buffers there (the NLL's gradient and log-softmax's), of a new
    size at every batch, which is what grew the CPU heap of a translation run (glibc keeps the holes;
    bench/README.md).

    Also returns how many non-pad targets score the row's maximum (the accuracy metric; a tie at the top
    counts as correct): a row's ``amax`` costs a fraction of ``argmax`` on CPU (bench/README.md)."""

    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, pad: int):
        lprobs = torch.log_softmax(logits, dim=-1)
        real = target.ne(pad)
        ctx.save_for_backward(lprobs, target, real)
        picked = lprobs.gather(1, target[:, None]).squeeze(1)
        correct = (picked >= lprobs.amax(-1)).logical_and_(real).sum()
        ctx.mark_non_differentiable(correct)
        return picked.masked_fill_(~real, 0).sum().neg(), correct

    @staticmethod
    def backward(ctx, grad: Tensor, _grad_correct):
        lprobs, target, real = ctx.saved_tensors
        probs = lprobs.exp_()  # the buffer is this function's own, and used once
        probs.scatter_add_(1, target[:, None], probs.new_full((target.numel(), 1), -1.0))
        return probs.mul_(real[:, None] * grad), None, None
