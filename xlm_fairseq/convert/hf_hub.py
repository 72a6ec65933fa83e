"""Released models by their Hugging Face id (``FacebookAI/xlm-mlm-ende-1024``, ``name@revision``) in
``XLMModel.from_pretrained``: :func:`~xlm_fairseq.convert.detect.download` fetches the few files a
conversion reads (huggingface_hub, its cache and digests, offline too), the converter turns them into
a model dir once, and that dir is kept in ``$XLM_FAIRSEQ_CACHE`` (default ``~/.cache/xlm-fairseq``)
under the snapshot's commit.

:func:`register` lets ``XLMModel.from_pretrained`` take ids (``xlm_fairseq.inference.hub`` asks its
resolvers about names that are not paths; the hub cannot import the converter, which imports the model)."""

import os

from preprocess.layout import MODEL_FILE, cache_root
from xlm_fairseq.convert.detect import download, is_repo_id
from xlm_fairseq.convert.read_hf import read_hf_dir
from xlm_fairseq.convert.write_fairseq import write_fairseq_dir
from xlm_fairseq.inference import hub


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
