"""Released models by their Hugging Face id (``FacebookAI/xlm-mlm-ende-1024``, ``name@revision``):
``huggingface_hub`` fetches the few files a conversion reads (or finds them in its cache, offline
too, checked by its own digests), the converter turns them into a model dir once, and that dir is
kept in ``$XLM_FAIRSEQ_CACHE`` (default ``~/.cache/xlm-fairseq``) under the snapshot's commit.

:func:`register` lets ``XLMModel.from_pretrained`` take ids (``xlm_fairseq.inference.hub`` asks its
resolvers about names that are not paths; the hub cannot import the converter, which imports the model)."""

import os
import re

from preprocess.layout import MODEL_FILE, cache_root
from xlm_fairseq.convert.from_hf import read_hf_dir
from xlm_fairseq.convert.to_fairseq import write_fairseq_dir
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.inference import hub

# a repo id as the Hub spells them, optionally @revision; never a path that exists
_REPO_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*(?:@[\w./-]+)?$")
_TEXT_FILES = ["config.json", "tokenizer_config.json", "vocab.json", "merges.txt"]
_FOUND_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
_WEIGHTS = (["model.safetensors", "model.safetensors.index.json", "model-*.safetensors"], ["pytorch_model.bin"])


def is_repo_id(name: str) -> bool:
    return not os.path.exists(name) and bool(_REPO_ID.match(name)) and not name.endswith((".pt", ".pth"))


def download(name: str) -> str:
    """The local snapshot directory of ``name`` (config, tokenizer files, weights: safetensors if the
    repo has them, else pytorch_model.bin)."""
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


def converted_dir(name: str) -> str:
    """A model dir of ``name``, converted on first use and reused after (keyed by the snapshot's commit)."""
    snapshot = download(name)
    repo_id = name.partition("@")[0]
    out = os.path.join(cache_root(), "converted", f"{repo_id.replace('/', '--')}--{os.path.basename(snapshot)}")
    if not os.path.isfile(os.path.join(out, MODEL_FILE)):
        write_fairseq_dir(read_hf_dir(snapshot), out, force=True)  # staged: never half a dir
    return out


def _resolve(name: str):
    return converted_dir(name) if is_repo_id(name) else None


def register() -> None:
    """Let ``XLMModel.from_pretrained`` take Hugging Face ids (called once by the plugin's ``__init__``)."""
    if _resolve not in hub.MODEL_RESOLVERS:
        hub.MODEL_RESOLVERS.append(_resolve)
