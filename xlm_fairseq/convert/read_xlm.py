"""Read an original XLM checkpoint (``torch.save`` of model/params/dico_*, as XLM's trainer and its
releases write it) as an :class:`~xlm_fairseq.convert.lm.LM`. It carries no BPE codes: ``--codes``."""

from typing import Optional

import torch

from preprocess.subwords import read_bpe_codes
from xlm_fairseq.convert.lm import LM
from xlm_fairseq.convert.xlm_terms import (
    check_representable,
    check_vocab_head,
    in_our_terms,
    langs_from_ids,
    lowercase_of,
    py,
    resolve_langs,
)
from xlm_fairseq.errors import XLMUserError


def read_xlm_pth(
    src: str,
    ckpt: dict,
    langs_option: Optional[str] = None,
    lowercase: Optional[bool] = None,
    codes_path: Optional[str] = None,
) -> LM:
    """``ckpt``: the content of ``src``, which :func:`~xlm_fairseq.convert.detect.detect_source` found
    to be an original XLM checkpoint (keys model, params, dico_id2word)."""
    params = {k: py(v) for k, v in dict(ckpt["params"]).items()}
    check_representable(params.get, src)
    if params.get("share_inout_emb", True) is False:
        raise XLMUserError(
            f"{src}: output layer not tied to the embeddings (share_inout_emb false); xlm_transformer ties them"
        )

    id2word = {int(py(k)): str(v) for k, v in dict(ckpt["dico_id2word"]).items()}
    if sorted(id2word) != list(range(len(id2word))):
        raise XLMUserError(f"{src}: dico_id2word ids are not 0..{len(id2word) - 1}")
    words = [id2word[i] for i in range(len(id2word))]
    check_vocab_head(words, src)
    raw_counts = {str(k): int(py(v)) for k, v in dict(ckpt.get("dico_counts") or {}).items()}
    counts = [raw_counts.get(w, 0) for w in words]

    state = ckpt["model"]
    if not isinstance(state, dict):
        raise XLMUserError(f"{src}: 'model' is not a state dict")
    # a model trained on several GPUs is saved from its DistributedDataParallel wrapper
    weights = {k[len("module.") :] if k.startswith("module.") else k: v for k, v in state.items()}
    weights = {k: v for k, v in weights.items() if isinstance(v, torch.Tensor)}
    n_langs = int(params.get("n_langs", 1))
    found_langs = langs_from_ids(params.get("id2lang") or params.get("lang2id"), f"{src} params")
    langs = resolve_langs(found_langs, langs_option, n_langs, src)
    if "position_embeddings.weight" not in weights or "embeddings.weight" not in weights:
        raise XLMUserError(f"{src}: 'model' lacks position_embeddings/embeddings; not an XLM language model")
    notes = []
    lowercase = lowercase_of(words, lowercase, None, src, notes)
    if params.get("n_words") is not None and int(params["n_words"]) != len(words):
        raise XLMUserError(f"{src}: params n_words={params['n_words']} but the dictionary has {len(words)} entries")
    max_positions = int(weights["position_embeddings.weight"].shape[0])
    state, words, counts = in_our_terms(weights, words, counts, src)
    return LM(
        origin="original XLM .pth",
        path=src,
        state=state,
        words=words,
        counts=counts,
        langs=langs,
        dim=int(params["emb_dim"]),
        n_layers=int(params["n_layers"]),
        n_heads=int(params["n_heads"]),
        dropout=float(params.get("dropout", 0.1)),
        attention_dropout=float(params.get("attention_dropout", 0.1)),
        max_positions=max_positions,
        sinusoidal=bool(params.get("sinusoidal_embeddings", False)),
        use_lang_emb=bool(params.get("use_lang_emb", True)) and n_langs > 1,
        subwords="xlm_bpe",
        lowercase=lowercase,
        ro_remove_diacritics=True,  # XLM's get-data-nmt.sh strips them (WMT16's scripts); ro only
        codes=read_bpe_codes(codes_path, "--codes") if codes_path else None,
        notes=notes,
    )
