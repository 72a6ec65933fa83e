"""Reading checkpoints: torch's ``weights_only`` loader with an allowlist of the classes fairseq and XLM
checkpoints pickle, and one line naming the file for one that cannot be read.

fairseq checkpoints pickle ``argparse.Namespace`` and omegaconf containers; original XLM ``.pth``
files pickle numpy scalars/arrays in ``params``. Each class is allowlisted by name: a pickle that
asks for anything else (``os.system``, ``subprocess.Popen``, ...) is still refused by torch.
``xlm_fairseq.patches.safe_load`` gives fairseq's own commands the same allowlist.
"""

import argparse
import collections
import pickle
import typing
from typing import List, Mapping, Optional

import numpy as np
import torch

from preprocess.langs import parse_langs
from xlm_fairseq.errors import XLMUserError


def _numpy_globals():
    found = [np.dtype, np.ndarray]
    for module_name in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            module = __import__(module_name, fromlist=["scalar", "_reconstruct"])
        except ImportError:
            continue
        found += [module.scalar, module._reconstruct]
        break
    # pickles name dtype classes such as numpy.dtypes.Float64DType
    found += sorted({type(np.dtype(t)) for t in np.sctypeDict.values()}, key=lambda c: c.__name__)
    found += sorted(set(np.sctypeDict.values()), key=lambda c: c.__name__)
    return found


def _omegaconf_globals():
    import omegaconf
    from omegaconf import nodes
    from omegaconf.base import ContainerMetadata, Metadata

    node_classes = [
        getattr(nodes, name) for name in dir(nodes) if name.endswith("Node") and isinstance(getattr(nodes, name), type)
    ]
    return [omegaconf.DictConfig, omegaconf.ListConfig, ContainerMetadata, Metadata, *node_classes]


def allowed_globals():
    """Every class a fairseq / XLM checkpoint may name, besides torch's own defaults; and the placeholder of
    a tensor in the checkpoint state that fairseq-train's rank 0 sends the other ranks when several resume."""
    from fairseq.distributed.utils import _TensorPlaceholder

    return [
        _TensorPlaceholder,
        argparse.Namespace,
        collections.OrderedDict,
        collections.defaultdict,
        typing.Any,
        dict,
        list,
        set,
        tuple,
        int,
        float,
        bool,
        str,
        *_omegaconf_globals(),
        *_numpy_globals(),
    ]


def unreadable(path, error: Exception):
    """The one-line error for a checkpoint torch could not load, or None when ``error`` is not about
    the file (a refused pickle, a missing file, a truncated or corrupt one)."""
    e = str(error)
    if "weights_only" in e or "Unsupported global" in e or "Weights only load failed" in e:
        first = [line for line in e.splitlines() if "Unsupported" in line or "GLOBAL" in line]
        return XLMUserError(
            f"{path}: refused to load, it asks to run code that is not allowlisted "
            f"({(first[0].strip() if first else type(error).__name__)})"
        )
    if isinstance(error, FileNotFoundError):
        return XLMUserError(f"{path}: no such checkpoint")
    if isinstance(error, (RuntimeError, EOFError, ValueError, OSError, pickle.UnpicklingError)):  # torch's reader
        first_sentence = (e.strip().splitlines() or [""])[0].split(". ")[0][:160]
        reason = f"{type(error).__name__}: {first_sentence}"
        return XLMUserError(f"{path}: not a readable checkpoint, truncated or corrupt ({reason})")
    return None


def load(path, map_location="cpu"):
    """``torch.load`` under the allowlist, whatever the caller's torch defaults; a refused pickle, or
    a file torch cannot read (truncated by a killed copy, say), becomes a one-line error naming it."""
    try:
        with torch.serialization.safe_globals(allowed_globals()):
            return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # torch raises UnpicklingError wrapped in various ways
        error = unreadable(path, e)
        if error is None:
            raise
        raise error from None


def carried_langs(task_state: Optional[Mapping], config=None, name: str = "the checkpoint") -> List[str]:
    """A model's language list (language ids are positions in it), read in one order by every reader:
    what its checkpoint's ``task_state`` carries, else the ``langs`` of ``config`` (the checkpoint's task
    config, a dict, or a model config object: what checkpoints written before ``task_state`` carried
    the list hold); [] when neither names one."""
    if task_state and task_state.get("langs"):
        return list(task_state["langs"])
    value = config.get("langs") if isinstance(config, Mapping) else getattr(config, "langs", None)
    return parse_langs(str(value or ""), f"{name}: its --langs")


def hand_langs_to_model(state: dict, name: str = "the checkpoint") -> dict:
    """A checkpoint fairseq has read, with its language list (the one store: ``task_state["langs"]``,
    filled from the config of a checkpoint written before it was) also handed to the model with its
    weights, as the state dict's ``_extra_state``. fairseq-train's resume gives the model its state dict
    and never gives the task its ``task_state``; this way the model checks the order it was built in
    against the checkpoint's on every data-parallel rank (the state is read, then broadcast).

    Only this plugin's checkpoints, known by the text pipeline their ``task_state`` carries: fairseq's
    own tasks have ``langs`` options too (mBART's), and their models are left as fairseq reads them."""
    task_state = state.get("task_state") or {}
    if "text_pipeline" not in task_state and "langs" not in task_state:
        return state
    cfg = state.get("cfg") or {}
    langs = carried_langs(task_state, cfg.get("task") or cfg.get("model"), name)
    if langs:
        state["task_state"] = dict(task_state, langs=langs)
        if isinstance(state.get("model"), dict):
            state["model"]["_extra_state"] = langs
    return state


def write_ema(src, dst) -> None:
    """``dst``: the checkpoint ``src`` with the moving average of its weights that ``fairseq-train --store-ema``
    keeps (``extra_state["ema"]``) as its model, for fairseq-generate, the hubs and export (fairseq's
    ``checkpoint_utils.save_ema_as_checkpoint``, read under the allowlist, from the fp32 average where
    ``--ema-fp32`` kept one, without the optimizer's state, which belongs to the other weights, and written
    atomically)."""
    from preprocess.files import atomic_write

    state = load(src)
    extra = state.get("extra_state") or {}
    if not extra.get("ema"):
        raise XLMUserError(f"{src}: holds no moving average of its weights (train with --store-ema)")
    exact = extra.get("ema_fp32_params") or {}  # --ema-fp32: the average before rounding to the model's format
    ema = {k: exact.get(k, v) for k, v in extra["ema"].items()}
    state["model"] = collections.OrderedDict((k, v.float() if v.is_floating_point() else v) for k, v in ema.items())
    state["extra_state"] = {k: v for k, v in state["extra_state"].items() if k not in ("ema", "ema_fp32_params")}
    state["last_optimizer_state"] = None
    with atomic_write(str(dst), binary=True) as f:
        torch.save(state, f)
