"""Read an original XLM checkpoint (``torch.save`` of model/params/dico_*) as an :class:`XLMSource`."""

from typing import Optional

import torch

from preprocess.subwords import parse_bpe_codes, read_bpe_codes
from xlm_fairseq.convert.source import (
    XLMSource,
    _check_vocab_head,
    _is_xlm_pth,
    _langs_from_ids,
    _load_checkpoint,
    _py,
    _resolve_langs,
    check_representable,
    lowercase_of,
)
from xlm_fairseq.errors import XLMUserError


def read_xlm_pth(
    src: str,
    langs_option: Optional[str] = None,
    lowercase: Optional[bool] = None,
    codes_path: Optional[str] = None,
    ckpt=None,
) -> XLMSource:
    """An original XLM checkpoint (``torch.save`` of model/params/dico_*), read through the allowlist
    (``ckpt``: the file's content, when the caller has loaded it already)."""
    if ckpt is None:
        ckpt = _load_checkpoint(src)
    if not _is_xlm_pth(ckpt):
        keys = sorted(ckpt)[:8] if isinstance(ckpt, dict) else type(ckpt).__name__
        raise XLMUserError(
            f"{src}: not an original XLM checkpoint (expected keys model, params, dico_id2word; found {keys})"
        )
    params = {k: _py(v) for k, v in dict(ckpt["params"]).items()}
    check_representable(params.get, src)
    if params.get("share_inout_emb", True) is False:
        raise XLMUserError(
            f"{src}: output layer not tied to the embeddings (share_inout_emb false); xlm_transformer ties them"
        )

    id2word = {int(_py(k)): str(v) for k, v in dict(ckpt["dico_id2word"]).items()}
    if sorted(id2word) != list(range(len(id2word))):
        raise XLMUserError(f"{src}: dico_id2word ids are not 0..{len(id2word) - 1}")
    words = [id2word[i] for i in range(len(id2word))]
    _check_vocab_head(words, src)
    raw_counts = {str(k): int(_py(v)) for k, v in dict(ckpt.get("dico_counts") or {}).items()}
    counts = [raw_counts.get(w, 0) for w in words]

    state = ckpt["model"]
    if not isinstance(state, dict):
        raise XLMUserError(f"{src}: 'model' is not a state dict")
    weights = {}
    for k, v in state.items():
        if not isinstance(v, torch.Tensor):
            continue
        k = k[len("module.") :] if k.startswith("module.") else k
        weights[k] = v
    n_langs = int(params.get("n_langs", 1))
    use_lang_emb = bool(params.get("use_lang_emb", True)) and n_langs > 1
    found_langs = _langs_from_ids(params.get("id2lang") or params.get("lang2id"), f"{src} params")
    langs = _resolve_langs(found_langs, langs_option, n_langs, src)
    if "position_embeddings.weight" not in weights or "embeddings.weight" not in weights:
        raise XLMUserError(f"{src}: 'model' lacks position_embeddings/embeddings; not an XLM language model")

    codes = None
    for key in ("codes", "bpe_codes"):
        value = ckpt.get(key, params.get(key))
        if isinstance(value, (str, list)) and value:
            lines = value.splitlines() if isinstance(value, str) else [str(x) for x in value]
            codes = parse_bpe_codes(lines, f"{src}[{key}]")
            break
    notes = []
    if codes_path:
        codes = read_bpe_codes(codes_path, "--codes")
    lowercase = lowercase_of(words, lowercase, None, src, notes)
    n_words = len(words)
    if params.get("n_words") is not None and int(params["n_words"]) != n_words:
        raise XLMUserError(f"{src}: params n_words={params['n_words']} but the dictionary has {n_words} entries")
    return XLMSource(
        kind="xlm_pth",
        path=src,
        weights=weights,
        words=words,
        counts=counts,
        langs=langs,
        dim=int(params["emb_dim"]),
        n_layers=int(params["n_layers"]),
        n_heads=int(params["n_heads"]),
        dropout=float(params.get("dropout", 0.1)),
        attention_dropout=float(params.get("attention_dropout", 0.1)),
        max_positions=int(weights["position_embeddings.weight"].shape[0]),
        sinusoidal=bool(params.get("sinusoidal_embeddings", False)),
        use_lang_emb=use_lang_emb,
        lowercase=lowercase,
        codes=codes,
        notes=notes,
    )
