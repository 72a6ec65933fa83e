"""``--bf16`` off a TPU keeps its fp32 master weights in one flat tensor, as ``--fp16`` does, for the
optimizers that ask for it (``flat_bf16_master``: the plugin's ``--optimizer xlm_adam``); fairseq's own
optimizers keep fairseq's layout.

fairseq 0.12's ``FP16Optimizer.build_optimizer`` turns flattening off for every ``--bf16`` run ("mixed
precision is faster on TPUs without flat grads"), so on a CPU or GPU each update runs Adam, clipping and
zeroing once per parameter tensor: 54 tensors at the recipes' size, about a dozen operations each. One
flat tensor runs each operation once (bench/README.md measures it); the update is the same elementwise
arithmetic. fairseq's own flat path asks
``torch.cuda`` for the device, so it is built here for whatever one device the parameters are on.
``--fp16-no-flatten-grads`` keeps fairseq's per-tensor layout. fairseq builds the wrapper in its trainer
with no hook for its layout, hence the patch.

Runs of such an optimizer resume across the change: an optimizer state saved per tensor (before this patch, or with
``--fp16-no-flatten-grads``) is joined when a flat run loads it, and a flat state split the other way.
"""

import torch
from fairseq import optim
from fairseq.optim.fp16_optimizer import FP16Optimizer

_original_build_optimizer = FP16Optimizer.build_optimizer.__func__
_original_load_state_dict = FP16Optimizer.load_state_dict


def asks_flat(optimizer_cfg) -> bool:
    """Whether ``--optimizer``'s class opts in to flat bf16 master weights."""
    return getattr(optim.OPTIMIZER_REGISTRY.get(getattr(optimizer_cfg, "_name", None)), "flat_bf16_master", False)


def flattens(cfg, params) -> bool:
    common = cfg.common
    return (
        asks_flat(cfg.optimizer)
        and getattr(common, "bf16", False)
        and not getattr(common, "tpu", False)
        and not getattr(common, "fp16_no_flatten_grads", False)
        and len({p.device for p in params}) == 1
    )


def build_optimizer(cls, cfg, params, **kwargs):
    params = list(params)
    if not flattens(cfg, params):
        return _original_build_optimizer(cls, cfg, params, **kwargs)
    flat = torch.nn.Parameter(torch.cat([p.data.reshape(-1).float() for p in params]))
    flat.grad = torch.zeros_like(flat.data)
    fp32_optimizer = optim.build_optimizer(cfg.optimizer, [flat])
    if not fp32_optimizer.supports_flat_params:
        return _original_build_optimizer(cls, cfg, params, **kwargs)
    return cls(cfg, params, fp32_optimizer, {params[0].device.index: flat}, **kwargs)


def joined(state_dict, shapes):
    """A per-tensor optimizer state (one group) as the flat tensor's: each per-element buffer concatenated."""
    (group,) = state_dict["param_groups"]
    states = [state_dict["state"].get(i) for i in group["params"]]
    merged = {}
    if all(states):
        for key, value in states[0].items():
            per_element = torch.is_tensor(value) and value.shape == shapes[0]
            merged[key] = torch.cat([s[key].reshape(-1) for s in states]) if per_element else value
    return {**state_dict, "state": {0: merged} if merged else {}, "param_groups": [{**group, "params": [0]}]}


def split(state_dict, shapes):
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


def load_state_dict(self, state_dict, optimizer_overrides=None):
    groups = state_dict.get("param_groups", [])
    if len(groups) == 1 and getattr(self.fp32_optimizer, "flat_bf16_master", False):
        saved = len(groups[0]["params"])
        shapes = [p.shape for p in self.fp16_params if p.requires_grad]
        if self.has_flat_params and saved == len(shapes) > 1:
            state_dict = joined(state_dict, shapes)
        elif not self.has_flat_params and saved == 1 < len(shapes) == len(self.fp32_params):
            state_dict = split(state_dict, shapes)
    return _original_load_state_dict(self, state_dict, optimizer_overrides)


def install() -> None:
    """The trainer builds ``--bf16``'s optimizer through ``FP16Optimizer.build_optimizer``."""
    FP16Optimizer.build_optimizer = classmethod(build_optimizer)
    FP16Optimizer.load_state_dict = load_state_dict
