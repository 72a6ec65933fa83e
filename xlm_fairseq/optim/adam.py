"""``--optimizer xlm_adam``: fairseq's Adam (``--optimizer adam``: AdamW's decoupled weight decay, fairseq's
eps placement, its checkpoint layout) with the update in torch's fused kernel, one pass per tensor.

fairseq 0.12's ``Adam.step`` (what ``--optimizer adam`` runs without NVIDIA's apex) loops over the
parameters in Python with about ten elementwise passes each; at the recipes' size that is 54 small tensors,
and ``--step-per-objective`` steps once per objective. torch's fused AdamW kernel does the same arithmetic
in one threaded pass per tensor. The two put eps in different places: fairseq adds it to sqrt(v) before
v's bias correction, torch after it, so torch is given eps / sqrt(1 - beta2^t), which is fairseq's update
exactly in real arithmetic (within float rounding here). The state keeps fairseq's layout (``step`` an
int, ``exp_avg``, ``exp_avg_sq``). AMSGrad, half-precision, sparse, mixed-device or non-CPU/CUDA (XLA)
tensors take fairseq's loop.

The optimizer also opts in to ``--bf16``'s fp32 master weights in one flat tensor
(``flat_bf16_master``, read by ``xlm_fairseq.patches.bf16_flat_master``); ``--optimizer adam`` keeps
fairseq's per-tensor layout.
"""

import math
from dataclasses import dataclass

import torch
from fairseq.optim import register_optimizer
from fairseq.optim.adam import Adam, FairseqAdam, FairseqAdamConfig


def fusable(optimizer: torch.optim.Optimizer) -> bool:
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


class FusedStepAdam(Adam):
    """fairseq's ``Adam`` whose step runs torch's fused kernel where the tensors allow it."""

    @torch.no_grad()
    def step(self, closure=None):
        if not fusable(self):
            return super().step(closure)
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


@dataclass
class XLMAdamConfig(FairseqAdamConfig):
    pass


@register_optimizer("xlm_adam", dataclass=XLMAdamConfig)
class XLMAdam(FairseqAdam):
    """fairseq's ``adam`` (same options) stepping in torch's fused kernel."""

    flat_bf16_master = True

    def __init__(self, cfg, params):
        params = list(params)
        super().__init__(cfg, params)
        if type(self._optimizer) is Adam:  # not apex's FusedAdam, which fairseq picks under CUDA when installed
            self._optimizer = FusedStepAdam(params, **self.optimizer_config)
