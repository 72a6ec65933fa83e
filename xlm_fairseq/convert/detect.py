"""What SRC is -- the one place that decides: an original XLM ``.pth`` (:data:`XLM_PTH`), a Hugging
Face XLM directory (:data:`HF_DIR`; a Hugging Face model id is fetched to one first) or an
xlm_fairseq checkpoint (:data:`OURS`: a ``.pt`` file, or a directory holding ``model.pt``).

A file is read once, here, through :func:`xlm_fairseq.checkpoints.load` (the allowlist), and
its content handed on to the reader of its kind."""

import os
import re
import zipfile
from typing import NamedTuple, Optional

from preprocess.layout import MODEL_FILE
from xlm_fairseq import checkpoints
from xlm_fairseq.errors import XLMUserError

XLM_PTH, HF_DIR, OURS = "xlm_pth", "hf", "fairseq"


class Found(NamedTuple):
    kind: str  # XLM_PTH | HF_DIR | OURS
    path: str  # the file or directory SRC names (a Hugging Face id: its local snapshot)
    checkpoint_path: Optional[str] = None  # a file kind: the file read (SRC, or SRC/model.pt)
    checkpoint: Optional[dict] = None  # its content


def detect_source(src: str, hub_ids: bool = False) -> Found:
    """What ``src`` is; XLMUserError for anything else. ``hub_ids``: a name that is no path may be a
    Hugging Face model id (``owner/name[@revision]``), fetched with huggingface_hub."""
    if hub_ids and is_repo_id(src):
        src = download(src)
    if not os.path.exists(src):
        raise XLMUserError(f"{src}: no such file or directory")
    if os.path.isdir(src):
        if os.path.isfile(os.path.join(src, "config.json")):
            return Found(HF_DIR, src)
        if not os.path.isfile(os.path.join(src, MODEL_FILE)):
            raise XLMUserError(
                f"{src}: neither a Hugging Face XLM directory (no config.json) nor a converted model (no {MODEL_FILE})"
            )
        path = os.path.join(src, MODEL_FILE)
    else:
        path = src
    if not _looks_like_torch_file(path):
        raise XLMUserError(f"{path}: not an XLM .pth nor an xlm_fairseq checkpoint (not a file torch.save writes)")
    ckpt = checkpoints.load(path)  # a refused pickle or an unreadable file: one line naming it
    if isinstance(ckpt, dict) and {"params", "dico_id2word"} <= set(ckpt):
        if "model" in ckpt or {"encoder", "decoder"} <= set(ckpt):  # an LM, or an MT model (encoder, decoder)
            return Found(XLM_PTH, src, path, ckpt)
    if isinstance(ckpt, dict) and "model" in ckpt and ckpt.get("cfg"):
        return Found(OURS, src, path, ckpt)
    raise XLMUserError(
        f"{path}: not an XLM .pth (keys model or encoder/decoder, params, dico_id2word) nor an xlm_fairseq checkpoint"
    )


def _looks_like_torch_file(path: str) -> bool:
    """torch.save writes a zip archive (torch >= 1.6) or a pickle (protocol 2+ starts with 0x80)."""
    if zipfile.is_zipfile(path):
        return True
    with open(path, "rb") as f:
        return f.read(1) == b"\x80"


# --------------------------------------------------------------------------------------------
# Hugging Face model ids
# --------------------------------------------------------------------------------------------

# a repo id as the Hub spells them, optionally @revision; never a path that exists
_REPO_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*(?:@[\w./-]+)?$")
_TEXT_FILES = ["config.json", "tokenizer_config.json", "vocab.json", "merges.txt"]
_FOUND_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
_WEIGHTS = (["model.safetensors", "model.safetensors.index.json", "model-*.safetensors"], ["pytorch_model.bin"])


def is_repo_id(name: str) -> bool:
    return not os.path.exists(name) and bool(_REPO_ID.match(name)) and not name.endswith((".pt", ".pth"))


def download(name: str) -> str:
    """The local snapshot directory of ``name`` (config, tokenizer files, weights: safetensors if the
    repo has them, else pytorch_model.bin), fetched by huggingface_hub or found in its cache (offline
    too, checked by its own digests)."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import (
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    repo_id, _, revision = name.partition("@")
    try:
        path = None
        for weights in _WEIGHTS:  # one kind of weights, not both: each is the whole model
            path = snapshot_download(repo_id, revision=revision or None, allow_patterns=_TEXT_FILES + weights)
            if any(os.path.isfile(os.path.join(path, w)) for w in _FOUND_WEIGHTS):
                break
    except LocalEntryNotFoundError:
        how = "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else "the Hub cannot be reached"
        raise XLMUserError(
            f"{name}: not in the Hugging Face cache ({constants.HF_HUB_CACHE}) and {how}; "
            "fetch it once with network access, or give a local directory"
        ) from None
    except RepositoryNotFoundError:
        raise XLMUserError(f"{name}: no such model on the Hugging Face Hub (or it is private: log in)") from None
    except RevisionNotFoundError:
        raise XLMUserError(f"{name}: no revision {revision!r} on the Hugging Face Hub") from None
    except HFValidationError as e:
        raise XLMUserError(f"{name}: not a Hugging Face model id ({e})") from None
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise XLMUserError(f"{name}: the Hugging Face repo has no config.json; not a transformers XLM model")
    return path
