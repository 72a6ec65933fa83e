"""``--optimizer xlm_adam``: fairseq's Adam (``--optimizer adam``: AdamW's decoupled weight decay, fairseq's
eps placement, its checkpoint layout) with the update in torch's fused kernel, one pass per tensor.

fairseq 0.12's ``Adam.step`` (what ``--optimizer adam`` runs without NVIDIA's apex) loops over the
parameters in Python with about ten elementwise passes each, over dozens of small tensors at the recipes'
size, and ``--step-per-objective`` steps once per objective. torch's fused AdamW kernel does the same arithmetic
in one threaded pass per tensor. The two put eps in different places: fairseq adds it to sqrt(v) before
v's bias correction, torch after it, so torch is given eps / sqrt(1 - beta2^t), which is fairseq's update
exactly in real arithmetic (within float rounding here). The state keeps fairseq's layout (``step`` an
int, ``exp_avg``, ``exp_avg_sq``). AMSGrad, half-precision, sparse, mixed-device or non-CPU/CUDA (XLA)
tensors take fairseq's loop.

Under ``--bf16`` off a TPU it also keeps the fp32 master weights in one flat tensor, as fairseq's ``--fp16``
does (:class:`FlatMaster`). fairseq 0.12 builds ``--bf16``'s master weights one tensor per parameter (its
``FP16Optimizer.build_optimizer``: "mixed precision is faster on TPUs without flat grads"), so on a CPU or
GPU each update runs Adam and clipping once per parameter tensor, about a dozen operations on each.
``--optimizer adam`` and ``--fp16-no-flatten-grads`` keep fairseq's layout.
"""

import math
from dataclasses import dataclass
from typing import List, Optional

import torch
from fairseq.optim import register_optimizer
from fairseq.optim.adam import Adam, FairseqAdam, FairseqAdamConfig
from omegaconf import II


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


class FlatMaster:
    """The fp32 master weights ``FP16Optimizer`` hands the optimizer under ``--bf16``, re-pointed into one flat
    tensor: each master weight and its gradient become views of the flat one, which the optimizer steps and
    clips in one operation each. ``FP16Optimizer`` goes on copying gradients into the views and weights out
    of them; where it gives a weight that no update reached a new zero gradient, :meth:`gather` puts the
    view back. The update is the same elementwise arithmetic, and the optimizer's state is one flat tensor's,
    as fairseq's ``--fp16`` saves it."""

    def __init__(self, params: List[torch.nn.Parameter]):
        self.params = params
        self.flat = torch.nn.Parameter(torch.cat([p.data.reshape(-1) for p in params]))
        self.flat.grad = torch.zeros_like(self.flat.data)
        self.grads = []
        offset = 0
        for p in params:
            n = p.numel()
            p.data = self.flat.data[offset : offset + n].view_as(p)
            p.grad = self.flat.grad[offset : offset + n].view_as(p)
            self.grads.append(p.grad)
            offset += n

    @staticmethod
    def applies(cfg, params) -> bool:
        """``--bf16`` off a TPU (its master weights on one CPU or GPU), flattening not turned off. The config's
        ``tpu`` is no guide: fairseq's parser set it from ``--bf16`` before the plugin took it back."""
        return (
            _option(cfg, "bf16")
            and not _option(cfg, "fp16_no_flatten_grads")
            and len(params) > 1
            and all(p.dtype == torch.float32 for p in params)
            and len({p.device for p in params}) == 1
            and params[0].device.type in ("cpu", "cuda")
        )

    def gather(self) -> None:
        for p, view in zip(self.params, self.grads):
            grad = p.grad
            if grad is not None and grad.data_ptr() == view.data_ptr():
                continue
            if grad is None:
                view.zero_()
            else:
                view.copy_(grad)
            p.grad = view


def _option(cfg, name: str) -> bool:
    """A ``common`` option the config interpolates (``${common.bf16}``); False where it cannot be resolved."""
    try:
        return bool(getattr(cfg, name, False))
    except Exception:  # an interpolation without its root (an optimizer built outside fairseq's config)
        return False


def joined(state_dict: dict, shapes) -> dict:
    """A per-tensor optimizer state (one group) as the flat tensor's: each per-element buffer concatenated."""
    (group,) = state_dict["param_groups"]
    states = [state_dict["state"].get(i) for i in group["params"]]
    merged = {}
    if all(states):
        for key, value in states[0].items():
            per_element = torch.is_tensor(value) and value.shape == shapes[0]
            merged[key] = torch.cat([s[key].reshape(-1) for s in states]) if per_element else value
    return {**state_dict, "state": {0: merged} if merged else {}, "param_groups": [{**group, "params": [0]}]}


def split(state_dict: dict, shapes) -> dict:
    """The flat tensor's optimizer state as one state per parameter tensor of ``shapes``."""
    (group,) = state_dict["param_groups"]
    state = state_dict["state"].get(group["params"][0], {})
    total = sum(s.numel() for s in shapes)
    states, offset = {}, 0
    for i, shape in enumerate(shapes):
        states[i] = {
            key: value[offset : offset + shape.numel()].view(shape).clone()
            if torch.is_tensor(value) and value.numel() == total and value.dim() == 1
            else value
            for key, value in state.items()
        }
        offset += shape.numel()
    return {**state_dict, "state": states if state else {}, "param_groups": [{**group, "params": list(states)}]}


@dataclass
class XLMAdamConfig(FairseqAdamConfig):
    bf16: bool = II("common.bf16")
    fp16_no_flatten_grads: bool = II("common.fp16_no_flatten_grads")


@register_optimizer("xlm_adam", dataclass=XLMAdamConfig)
class XLMAdam(FairseqAdam):
    """fairseq's ``adam`` (same options) stepping in torch's fused kernel, its ``--bf16`` master weights flat."""

    def __init__(self, cfg, params):
        params = list(params)
        self.flat_master: Optional[FlatMaster] = FlatMaster(params) if FlatMaster.applies(cfg, params) else None
        self.shapes = [p.shape for p in params]
        stepped = [self.flat_master.flat] if self.flat_master else params
        super().__init__(cfg, stepped)
        if type(self._optimizer) is Adam:  # not apex's FusedAdam, which fairseq picks under CUDA when installed
            self._optimizer = FusedStepAdam(stepped, **self.optimizer_config)

    def _gather(self) -> None:
        if self.flat_master is not None:
            self.flat_master.gather()

    def multiply_grads(self, c):
        self._gather()
        super().multiply_grads(c)

    def clip_grad_norm(self, max_norm, aggregate_norm_fn=None):
        self._gather()
        return super().clip_grad_norm(max_norm, aggregate_norm_fn)

    def step(self, closure=None, scale=1.0, groups=None):
        self._gather()
        super().step(closure, scale, groups)

    def load_state_dict(self, state_dict, optimizer_overrides=None):
        """A state saved in the other layout (flat or per tensor) is joined or split to this one's."""
        groups = state_dict.get("param_groups", [])
        if len(groups) == 1 and len(self.shapes) > 1:
            saved = len(groups[0]["params"])
            if self.flat_master is not None and saved == len(self.shapes):
                state_dict = joined(state_dict, self.shapes)
            elif self.flat_master is None and saved == 1:
                state_dict = split(state_dict, self.shapes)
        super().load_state_dict(state_dict, optimizer_overrides)
