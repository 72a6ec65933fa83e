"""Read an original XLM checkpoint (``torch.save`` of model/params/dico_*, as XLM's trainer and its
releases write it) as an :class:`~xlm_fairseq.convert.lm.LM`. It carries no BPE codes: ``--codes``.

A translation model's checkpoint (XLM's ``best-valid_*_mt_bleu.pth`` / ``checkpoint.pth``, MASS's
``mass_*.pth`` and fine-tuned ones: ``encoder`` and ``decoder`` instead of ``model``) is read the same
way, both stacks; MASS's differences from XLM (microsoft/MASS ``MASS-unsupNMT/src/model/transformer.py``)
are its decoder depth (``n_dec_layers``: read from the weights), ``english_only`` for ``not
use_lang_emb``, and, by default, one encoder attention (or its output projection) per target
language, which xlm_transformer cannot express: refused, naming it."""

from typing import Dict, Optional

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
from xlm_fairseq.models.xlm import DECODER_PREFIX, LM_PREFIX
from xlm_fairseq.modules.transformer import count_layers


def read_xlm_pth(
    src: str,
    ckpt: dict,
    langs_option: Optional[str] = None,
    lowercase: Optional[bool] = None,
    codes_path: Optional[str] = None,
) -> LM:
    """``ckpt``: the content of ``src``, which :func:`~xlm_fairseq.convert.detect.detect_source` found
    to be an original XLM checkpoint (keys model or encoder/decoder, params, dico_id2word)."""
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

    translation = "model" not in ckpt  # an MT checkpoint: encoder and decoder (detect.py)
    weights = _weights(ckpt, "encoder" if translation else "model", src)
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
    n_layers, decoder_layers = int(params["n_layers"]), None
    if translation:
        decoder = _weights(ckpt, "decoder", src)
        _check_decoder(decoder, params, src)
        n_layers, decoder_layers = count_layers(weights), count_layers(decoder)
        # XLM builds the encoder of an MT model with an output layer (unused in translation); ours has none
        weights = {k: v for k, v in weights.items() if not k.startswith("pred_layer.")}
        decoder_state, _, _ = in_our_terms(decoder, words, counts, src)
        decoder_state = {DECODER_PREFIX + k[len(LM_PREFIX) :]: v for k, v in decoder_state.items()}
    state, words, counts = in_our_terms(weights, words, counts, src)
    if translation:
        state.update(decoder_state)
    return LM(
        origin="original XLM MT .pth (encoder and decoder)" if translation else "original XLM .pth",
        path=src,
        state=state,
        words=words,
        counts=counts,
        langs=langs,
        dim=int(params["emb_dim"]),
        n_layers=n_layers,
        decoder_layers=decoder_layers,
        n_heads=int(params["n_heads"]),
        dropout=float(params.get("dropout", 0.1)),
        attention_dropout=float(params.get("attention_dropout", 0.1)),
        max_positions=max_positions,
        sinusoidal=bool(params.get("sinusoidal_embeddings", False)),
        # MASS says english_only where XLM says use_lang_emb
        use_lang_emb=bool(params.get("use_lang_emb", not params.get("english_only", False))) and n_langs > 1,
        subwords="xlm_bpe",
        lowercase=lowercase,
        ro_remove_diacritics=True,  # XLM's get-data-nmt.sh strips them (WMT16's scripts); ro only
        codes=read_bpe_codes(codes_path, "--codes") if codes_path else None,
        notes=notes,
    )


def _weights(ckpt: dict, key: str, src: str) -> Dict[str, torch.Tensor]:
    """The tensors of state dict ``ckpt[key]``, without DistributedDataParallel's ``module.``."""
    state = ckpt[key]
    if not isinstance(state, dict):
        raise XLMUserError(f"{src}: {key!r} is not a state dict")
    # a model trained on several GPUs is saved from its DistributedDataParallel wrapper
    weights = {k[len("module.") :] if k.startswith("module.") else k: v for k, v in state.items()}
    return {k: v for k, v in weights.items() if isinstance(v, torch.Tensor)}


def _check_decoder(decoder: Dict[str, torch.Tensor], params: dict, src: str) -> None:
    """A decoder xlm_transformer can express: XLM's, or MASS's with one encoder attention for all
    languages (``english_only``, or one language). MASS's default gives each target language its own
    encoder-attention output projection (``attention_setting`` v1) or whole encoder attention (v2)."""
    if not any(k.startswith("encoder_attn.") for k in decoder):
        raise XLMUserError(f"{src}: its 'decoder' has no encoder attention (encoder_attn.*); not an XLM decoder")
    per_language = [k for k in decoder if k.startswith("encoder_attn.") and k.split(".")[2].isdigit()]
    per_language += [k for k in decoder if k.startswith("encoder_attn.") and ".out_lin." in k and k.count(".") == 4]
    if per_language:
        setting = params.get("attention_setting", "v2" if per_language[0].split(".")[2].isdigit() else "v1")
        raise XLMUserError(
            f"{src}: a MASS decoder with a separate encoder attention {'output projection ' if setting == 'v1' else ''}"
            f"per target language (attention_setting {setting}, e.g. {per_language[0]}); xlm_transformer has one "
            "encoder attention for every language, so it cannot express this model"
        )
    if params.get("encoder_only") is True:
        raise XLMUserError(f"{src}: params say encoder_only, yet it holds an encoder and a decoder")
