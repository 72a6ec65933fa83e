"""fairseq's Adam in torch's fused kernel where the tensors allow it: the same update, one pass per tensor.

fairseq 0.12's ``Adam.step`` (``fairseq.optim.adam``, what ``--optimizer adam`` runs without NVIDIA's
apex) loops over the parameters in Python with about ten elementwise passes each; at the recipes' size
that is 54 small tensors, and ``--step-per-objective`` steps once per objective. torch's fused AdamW
kernel does the same arithmetic in one threaded pass per tensor. The two put eps in different places:
fairseq adds it to sqrt(v) before v's bias correction, torch after it, so torch is given
eps / sqrt(1 - beta2^t), which is fairseq's update exactly in real arithmetic (within float rounding
here). Weight decay is fairseq's decoupled one, which is AdamW's. The optimizer state keeps fairseq's
layout (``step`` an int, ``exp_avg``, ``exp_avg_sq``), so checkpoints read and resume either way.
AMSGrad, half-precision, sparse, mixed-device or non-CPU/CUDA (XLA) tensors go to fairseq's loop unchanged.
"""

import math

import torch
from fairseq.optim import adam

# fairseq's own step, also when this module is imported a second time (then the class holds a fused one)
_original_step = getattr(adam.Adam.step, "fairseq_step", adam.Adam.step)


def fusable(optimizer) -> bool:
    for group in optimizer.param_groups:
        if group.get("amsgrad", False):
            return False
        for p in group["params"]:
            grad = p.grad
            if grad is not None and (
                p.dtype != torch.float32
                or grad.dtype != torch.float32
                or grad.is_sparse
                or grad.device != p.device
                or p.device.type not in ("cpu", "cuda")  # the kernel's devices (not XLA's)
            ):
                return False
    return True


@torch.no_grad()
def step(self, closure=None):
    if not fusable(self):
        return _original_step(self, closure)
    loss = closure() if closure is not None else None
    for group in self.param_groups:
        beta1, beta2 = group["betas"]
        # one kernel call per (device, step): parameters skipped by some update are at other steps
        buckets = {}
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if not state:
                state.update(step=0, exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
            for key in ("exp_avg", "exp_avg_sq"):  # as fairseq's .to(p): a state loaded onto another device
                if state[key].device != p.device or state[key].dtype != p.dtype:
                    state[key] = state[key].to(p)
            buckets.setdefault((p.device, state["step"]), []).append(p)
        for (device, done), params in buckets.items():
            t = done + 1
            states = [self.state[p] for p in params]
            torch._fused_adamw_(
                params,
                [p.grad for p in params],
                [s["exp_avg"] for s in states],
                [s["exp_avg_sq"] for s in states],
                [],
                [torch.tensor(float(t), device=device)] * len(params),
                lr=group["lr"],
                beta1=beta1,
                beta2=beta2,
                weight_decay=group["weight_decay"],
                eps=group["eps"] / math.sqrt(1 - beta2**t),
                amsgrad=False,
                maximize=False,
            )
            for s in states:
                s["step"] = t
    return loss


step.fairseq_step = _original_step


def install() -> None:
    """``FairseqAdam`` builds ``fairseq.optim.adam.Adam`` (unless apex's FusedAdam is there, under CUDA)."""
    adam.Adam.step = step
