"""Read an xlm_fairseq LM checkpoint (``cross_lingual_lm`` / ``xlm_transformer``) as an
:class:`~xlm_fairseq.convert.lm.LM`: its dictionary, text pipeline and subword model as
``xlm_fairseq.assets`` finds them (what it carries, then beside it, then its data-bin)."""

import os

from preprocess.layout import FAIRSEQ_SYMBOLS
from preprocess.subwords import parse_bpe_codes
from xlm_fairseq import checkpoints
from xlm_fairseq.assets import ModelAssets
from xlm_fairseq.convert.lm import LM
from xlm_fairseq.data.data_bin import data_shards
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.models.xlm import LM_PREFIX

_XLM_ARCHS = ("xlm_transformer", "xlm_tiny", "xlm_512", "xlm_1024")


def read_ours(src: str, ckpt: dict) -> LM:
    """``ckpt``: the content of the checkpoint file ``src``, which
    :func:`~xlm_fairseq.convert.detect.detect_source` found to be a fairseq checkpoint (model, cfg)."""
    model_cfg, task_cfg = ckpt["cfg"].get("model") or {}, ckpt["cfg"].get("task") or {}
    if (model_cfg.get("_name") or model_cfg.get("arch")) not in _XLM_ARCHS:
        raise XLMUserError(f"{src}: model {model_cfg.get('_name')!r} is not xlm_transformer")
    state = {k: v for k, v in ckpt["model"].items() if k.startswith(LM_PREFIX)}
    if LM_PREFIX + "pred_layer.proj.bias" not in state:
        raise XLMUserError(
            f"{src}: no LM output layer (a translation model?); only cross_lingual_lm checkpoints export"
        )
    state.pop(LM_PREFIX + "pred_layer.proj.weight", None)  # tied to the embeddings
    data_bin = data_shards(str(task_cfg.get("data") or ""))[0]
    assets = ModelAssets(ckpt.get("task_state"), [os.path.dirname(os.path.abspath(src)), data_bin], src)
    dictionary, _ = assets.dictionary()
    if dictionary is None:
        raise XLMUserError(f"{src}: no dict.txt beside it or in its task.data")
    emb = state[LM_PREFIX + "embeddings.weight"]
    assets.check_dictionary(dictionary, getattr(dictionary, "source_file", None) or src, rows=emb.shape[0])
    if list(dictionary.symbols[:4]) != list(FAIRSEQ_SYMBOLS):
        raise XLMUserError(f"{src}: dictionary starts {dictionary.symbols[:4]}, expected {list(FAIRSEQ_SYMBOLS)}")
    langs = checkpoints.carried_langs(ckpt.get("task_state"), task_cfg, src)
    lang_emb = state.get(LM_PREFIX + "lang_embeddings.weight")
    if lang_emb is not None and lang_emb.shape[0] != max(len(langs), 1):
        raise XLMUserError(f"{src}: {lang_emb.shape[0]} language embeddings for langs {langs}")
    pipeline = _pipeline(assets)
    return LM(
        origin="xlm_fairseq checkpoint",
        path=src,
        state=state,
        words=list(dictionary.symbols),
        counts=[int(c) for c in dictionary.count],
        langs=langs,
        dim=int(emb.shape[1]),
        n_layers=len({k[len(LM_PREFIX) :].split(".")[1] for k in state if k.startswith(LM_PREFIX + "attentions.")}),
        n_heads=int(model_cfg.get("encoder_attention_heads")),
        dropout=float(model_cfg.get("dropout", 0.1)),
        attention_dropout=float(model_cfg.get("attention_dropout", 0.1)),
        max_positions=int(state[LM_PREFIX + "position_embeddings.weight"].shape[0]),
        sinusoidal=bool(model_cfg.get("sinusoidal_embeddings", False)),
        use_lang_emb=lang_emb is not None,
        **pipeline,
    )


def _pipeline(assets: ModelAssets) -> dict:
    """The text pipeline's fields of :class:`LM` (no subwords when nothing describes a pipeline)."""
    settings = assets.pipeline_settings()
    if settings is None:
        return dict(lowercase=True, ro_remove_diacritics=False, subwords=None)
    found = {"lowercase": settings.lowercase_and_remove_accent, "ro_remove_diacritics": settings.ro_remove_diacritics}
    path = assets.pipeline().model_path
    if settings.subwords == "xlm_bpe":
        with open(path, encoding="utf-8") as f:
            return dict(found, subwords="xlm_bpe", codes=parse_bpe_codes(f, path))
    return dict(found, subwords="sentencepiece", spm_model=path)
