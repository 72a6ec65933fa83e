"""Read a Hugging Face XLM directory (``save_pretrained`` of an XLM model, plus its tokenizer files)
as an :class:`~xlm_fairseq.convert.lm.LM`."""

import json
import os
from typing import Dict, Optional

import torch

from preprocess.layout import SPECIAL_SYMBOLS, XLM_SYMBOLS
from preprocess.subwords import parse_bpe_codes, read_bpe_codes
from xlm_fairseq import checkpoints
from xlm_fairseq.convert.lm import LM, hf_token_to_xlm_word
from xlm_fairseq.convert.xlm_terms import (
    check_representable,
    check_vocab_head,
    in_our_terms,
    langs_from_ids,
    lowercase_of,
    resolve_langs,
)
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.modules.transformer import LAYER_NORM_EPS


def read_hf_dir(
    src: str, langs_option: Optional[str] = None, lowercase: Optional[bool] = None, codes_path: Optional[str] = None
) -> LM:
    """A Hugging Face XLM directory; ``--codes`` replaces its ``merges.txt``."""
    config = _read_config(src)
    words = _read_vocab(src)
    counts = [0 if (w in XLM_SYMBOLS or w in SPECIAL_SYMBOLS) else 1 for w in words]

    weights = {}
    for k, v in _hf_weights(src).items():
        if k.startswith("transformer."):
            k = k[len("transformer.") :]
        elif not k.startswith("pred_layer."):
            continue  # task heads (sequence_summary, qa_outputs, ...) are not part of the LM
        if k == "position_ids":
            continue
        weights[k] = v
    notes = [
        "Hugging Face vocabularies carry no word counts: dict.txt gives every word count 1 "
        "(specials 0), so --sample-alpha weights words uniformly."
    ]
    if "pred_layer.proj.bias" not in weights and "embeddings.weight" in weights:
        weights["pred_layer.proj.bias"] = torch.zeros(weights["embeddings.weight"].shape[0])
        notes.append(
            "The source had no LM head (pred_layer.proj.bias): it was set to zero; "
            "predictions and fill_mask are not meaningful until the model is trained."
        )
    if getattr(config, "causal", False):
        notes.append("The source config says causal=true (a CLM model): call the model with causal=True.")

    tok_cfg = {}
    tok_cfg_path = os.path.join(src, "tokenizer_config.json")
    if os.path.isfile(tok_cfg_path):
        with open(tok_cfg_path, encoding="utf-8") as f:
            tok_cfg = json.load(f)
    claim = tok_cfg.get("do_lowercase_and_remove_accent")
    lowercase = lowercase_of(words, lowercase, None if claim is None else bool(claim), tok_cfg_path, notes)
    found_langs = langs_from_ids(
        getattr(config, "lang2id", None)
        or getattr(config, "id2lang", None)
        or tok_cfg.get("lang2id")
        or tok_cfg.get("id2lang"),
        f"{src}/config.json",
    )
    n_langs = int(config.n_langs)
    langs = resolve_langs(found_langs, langs_option, n_langs, src)

    codes = None
    merges_path = os.path.join(src, "merges.txt")
    if codes_path:
        codes = read_bpe_codes(codes_path, "--codes")
    elif os.path.isfile(merges_path):
        with open(merges_path, encoding="utf-8") as f:
            codes = parse_bpe_codes(f, merges_path)
    state, words, counts = in_our_terms(weights, words, counts, src)
    return LM(
        origin="Hugging Face XLM directory",
        path=src,
        state=state,
        words=words,
        counts=counts,
        langs=langs,
        dim=int(config.emb_dim),
        n_layers=int(config.n_layers),
        n_heads=int(config.n_heads),
        dropout=float(config.dropout),
        attention_dropout=float(config.attention_dropout),
        max_positions=int(config.max_position_embeddings),
        sinusoidal=bool(config.sinusoidal_embeddings),
        use_lang_emb=bool(config.use_lang_emb) and n_langs > 1,
        subwords="xlm_bpe",
        lowercase=lowercase,
        ro_remove_diacritics=True,  # XLM's get-data-nmt.sh strips them (WMT16's scripts); ro only
        codes=codes,
        notes=notes,
    )


def _read_config(src: str):
    """config.json as transformers reads it, refused where xlm_transformer differs."""
    try:
        with open(os.path.join(src, "config.json"), encoding="utf-8") as f:
            raw = json.load(f)
    except ValueError as e:
        raise XLMUserError(f"{src}/config.json: not valid JSON ({e})") from None
    if not isinstance(raw, dict) or raw.get("model_type") not in (None, "xlm"):
        model_type = raw.get("model_type") if isinstance(raw, dict) else None
        raise XLMUserError(f"{src}: config.json does not describe an XLM model (model_type {model_type!r})")
    from transformers import XLMConfig

    config = XLMConfig.from_pretrained(src)
    check_representable(lambda key, default: getattr(config, key, default), src)
    if abs(float(getattr(config, "layer_norm_eps", LAYER_NORM_EPS)) - LAYER_NORM_EPS) > 1e-15:
        raise XLMUserError(
            f"{src}: layer_norm_eps={config.layer_norm_eps}; xlm_transformer uses XLM's {LAYER_NORM_EPS}"
        )
    for name, want in (("bos_token_id", 0), ("eos_token_id", 1), ("pad_token_id", 2), ("unk_index", 3)):
        value = getattr(config, name, want)
        if value is not None and value != want:
            raise XLMUserError(
                f"{src}: config {name}={value}; only XLM's layout <s>=0 </s>=1 <pad>=2 <unk>=3 is supported"
            )
    return config


def _read_vocab(src: str):
    """vocab.json -> words in XLM order and fastBPE spelling."""
    vocab_path = os.path.join(src, "vocab.json")
    if not os.path.isfile(vocab_path):
        raise XLMUserError(f"{src}: no vocab.json; the vocabulary is needed for dict.txt")
    with open(vocab_path, encoding="utf-8") as f:
        vocab = json.load(f)
    by_id = {}
    for token, i in vocab.items():
        if i in by_id:
            raise XLMUserError(f"{vocab_path}: id {i} given to {by_id[i]!r} and {token!r}")
        by_id[int(i)] = token
    if sorted(by_id) != list(range(len(by_id))):
        raise XLMUserError(f"{vocab_path}: ids are not 0..{len(by_id) - 1}")
    words = [hf_token_to_xlm_word(by_id[i]) for i in range(len(by_id))]
    check_vocab_head(words, vocab_path)
    return words


def _hf_weights(src: str) -> Dict[str, torch.Tensor]:
    """model.safetensors (one file or shards) or pytorch_model.bin (read through the allowlist)."""
    st = os.path.join(src, "model.safetensors")
    st_index = os.path.join(src, "model.safetensors.index.json")
    pt = os.path.join(src, "pytorch_model.bin")
    if os.path.isfile(st) or os.path.isfile(st_index):
        from safetensors.torch import load_file

        if os.path.isfile(st):
            return load_file(st)
        with open(st_index, encoding="utf-8") as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        weights = {}
        for shard in shards:
            weights.update(load_file(os.path.join(src, shard)))
        return weights
    if os.path.isfile(pt):
        return checkpoints.load(pt)
    raise XLMUserError(f"{src}: no model.safetensors or pytorch_model.bin")
