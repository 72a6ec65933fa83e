"""Translation models for Hugging Face ``transformers``, written by ``xlm-fairseq-export CKPT OUT --hf``:
one directory per direction, ``OUT/hf/SRC-TGT``, that ``AutoModelForSeq2SeqLM.from_pretrained`` loads
and ``AutoTokenizer.from_pretrained(..., trust_remote_code=True)`` tokenises for (its ``README.md``)::

    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained("OUT/hf/de-en", trust_remote_code=True)
    model = AutoModelForSeq2SeqLM.from_pretrained("OUT/hf/de-en")
    batch = tokenizer(["Hallo Welt!"], return_tensors="pt", padding=True, truncation=True)
    print(tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True))

``transformers`` has no XLM encoder-decoder; the translator maps exactly onto ``EncoderDecoderModel``
of a ``BertGenerationEncoder`` and a ``BertGenerationDecoder`` with cross-attention: post-LN layers,
embedding LayerNorm, eps 1e-12, positions from 0, exact GELU, biases everywhere, the output layer tied to
the decoder's embeddings with its own bias. XLM's language embedding is a constant per side (the source
language on every encoder position, the target language on every decoder position), so it folds into
that side's position table, as in the CTranslate2 export (``ctranslate2_models.py``).

``generation_config.json`` holds the hub's rules (the checkpoint's generation options, fairseq's
defaults: ``--max-len-a 0 --max-len-b 200 --min-len 1 --lenpen 1``): decoding starts from ``</s>``;
``<pad>`` is never generated (``suppress_tokens``: transformers applies it after the log-softmax, where
fairseq bans it, so ``<pad>``'s output bias stays as trained and scores are fairseq's); no ``</s>``
first (``min_new_tokens``); at most ``max_len_b`` words and then ``</s>`` (``max_length``,
``forced_eos_token_id``); greedy. Beam search options are refused in a greedy config, so the README
passes them to ``generate``: ``num_beams``, ``length_penalty`` (``--lenpen``, where not transformers'
1.0) and ``early_stopping=True``, fairseq's stopping rule (a sentence ends with its first ``num_beams``
finished hypotheses; without it transformers searches on for better, longer ones). A limit that grows
with the source (``--max-len-a``) cannot be said there: ``max_length`` is then the decoder's positions
and the README gives the per-call ``max_new_tokens``.

In float32 the logits are XLM's (to float rounding) and greedy tokens fairseq's, but where two words tie
within float rounding. Beam search (``early_stopping=True``) gives fairseq's
hypotheses; their order can differ among those that reach the length limit, whose forced ``</s>``
transformers scores 0 and fairseq with its log-probability (``tests/inference/test_hf_translators.py``).

The tokenizer is ``tokenization_xlm_fairseq.py``, copied into each directory (it needs neither
fairseq nor this package)."""

import json
import os
import tempfile
from typing import Dict, List, Sequence, Tuple

import torch

from preprocess.pipeline import TextPipeline
from preprocess.segment import SEGMENTERS
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.modules.transformer import LAYER_NORM_EPS, count_layers

HF_DIR = "hf"  # in a model directory: one transformers model per SRC-TGT below it
SIDES = {"encoder": "encoder.transformer", "decoder": "decoder.transformer"}


def import_transformers():
    try:
        import transformers
    except ImportError as e:
        raise XLMUserError(f"--hf needs transformers ({e}): pip install transformers") from None
    return transformers


def check_exportable(params: Dict[str, torch.Tensor], model_cfg: dict, what: str) -> None:
    """One line for what --hf cannot export: not a translation model, unknown attention heads."""
    if not all(count_layers(params, f"{prefix}.") for prefix in SIDES.values()):
        raise XLMUserError(f"{what}: --hf exports translation models (translation_lm), not this one")
    for side in SIDES:
        if not model_cfg.get(f"{side}_attention_heads"):
            raise XLMUserError(f"{what}: its config names no {side}_attention_heads")
    import_transformers()


def side_config(params: Dict[str, torch.Tensor], model_cfg: dict, side: str, pad: int, eos: int):
    """The ``BertGenerationConfig`` of one side, its sizes read from the weights."""
    transformers = import_transformers()
    prefix = SIDES[side]
    n_words, dim = params[f"{prefix}.embeddings.weight"].shape
    decoder = side == "decoder"
    return transformers.BertGenerationConfig(
        vocab_size=n_words,
        hidden_size=dim,
        num_hidden_layers=count_layers(params, f"{prefix}."),
        num_attention_heads=model_cfg[f"{side}_attention_heads"],
        intermediate_size=params[f"{prefix}.ffns.0.lin1.weight"].shape[0],
        hidden_act="gelu",  # exact (erf) GELU, as XLM's
        hidden_dropout_prob=float(model_cfg.get("dropout", 0.1)),
        attention_probs_dropout_prob=float(model_cfg.get("attention_dropout", 0.1)),
        max_position_embeddings=params[f"{prefix}.position_embeddings.weight"].shape[0],
        layer_norm_eps=LAYER_NORM_EPS,
        pad_token_id=pad,
        bos_token_id=eos,
        eos_token_id=eos,
        is_decoder=decoder,
        add_cross_attention=decoder,
        tie_word_embeddings=decoder,  # output layer = the decoder's own embeddings
    )


def hf_state_dict(params: Dict[str, torch.Tensor], langs: Sequence[str], src: str, tgt: str) -> Dict[str, torch.Tensor]:
    """The ``EncoderDecoderModel`` weights of direction ``src`` -> ``tgt`` of a translation_lm state dict."""
    out: Dict[str, torch.Tensor] = {}

    def copy(name: str, ours: str):
        for kind in ("weight", "bias"):
            out[f"{name}.{kind}"] = params[f"{ours}.{kind}"].float()

    for side, lang, hf in (("encoder", src, "encoder"), ("decoder", tgt, "decoder.bert")):
        prefix = SIDES[side]
        positions = params[f"{prefix}.position_embeddings.weight"].float()
        if f"{prefix}.lang_embeddings.weight" in params:  # the side's language, on every position
            positions = positions + params[f"{prefix}.lang_embeddings.weight"][langs.index(lang)].float()
        out[f"{hf}.embeddings.word_embeddings.weight"] = params[f"{prefix}.embeddings.weight"].float()
        out[f"{hf}.embeddings.position_embeddings.weight"] = positions
        copy(f"{hf}.embeddings.LayerNorm", f"{prefix}.layer_norm_emb")
        for i in range(count_layers(params, f"{prefix}.")):
            layer = f"{hf}.encoder.layer.{i}"
            attentions = [("attention", "attentions", "layer_norm1")]
            if side == "decoder":
                attentions.append(("crossattention", "encoder_attn", "layer_norm15"))
            for name, ours, norm in attentions:
                for p, q in (("query", "q"), ("key", "k"), ("value", "v")):
                    copy(f"{layer}.{name}.self.{p}", f"{prefix}.{ours}.{i}.{q}_lin")
                copy(f"{layer}.{name}.output.dense", f"{prefix}.{ours}.{i}.out_lin")
                copy(f"{layer}.{name}.output.LayerNorm", f"{prefix}.{norm}.{i}")
            copy(f"{layer}.intermediate.dense", f"{prefix}.ffns.{i}.lin1")
            copy(f"{layer}.output.dense", f"{prefix}.ffns.{i}.lin2")
            copy(f"{layer}.output.LayerNorm", f"{prefix}.layer_norm2.{i}")
    dec = SIDES["decoder"]
    out["decoder.lm_head.decoder.weight"] = params[f"{dec}.embeddings.weight"].float()
    out["decoder.lm_head.decoder.bias"] = out["decoder.lm_head.bias"] = params[f"{dec}.pred_layer.proj.bias"].float()
    return out


def length_limit(generation_cfg: dict, max_positions: int) -> Tuple[int, bool]:
    """(the most words before ``</s>``, whether that is fairseq's limit for every source): fairseq's
    ``min(max_len_a * source length + max_len_b, max_positions - 1)``, exact when ``max_len_a`` is 0."""
    a, b = float(generation_cfg.get("max_len_a", 0) or 0), int(generation_cfg.get("max_len_b", 200))
    if a:
        return max_positions - 1, False
    return min(b, max_positions - 1), True


def generation_config(generation_cfg: dict, pad: int, eos: int, max_positions: int):
    transformers = import_transformers()
    words, _ = length_limit(generation_cfg, max_positions)
    min_len = int(generation_cfg.get("min_len", 1) or 0)
    return transformers.GenerationConfig(
        decoder_start_token_id=eos,
        bos_token_id=eos,
        eos_token_id=eos,
        pad_token_id=pad,
        # the start symbol, the words, then </s>: forced where fairseq forces it
        max_length=words + 2,
        forced_eos_token_id=eos,
        min_new_tokens=min_len or None,
        suppress_tokens=[pad],
        num_beams=1,
        do_sample=False,
    )


def beam_options(generation_cfg: dict) -> str:
    """The ``generate`` options of the hub's beam search (a greedy generation config may not hold them)."""
    lenpen = 0.0 if generation_cfg.get("unnormalized") else float(generation_cfg.get("lenpen", 1.0))
    options = f"num_beams={int(generation_cfg.get('beam', 5) or 5)}, early_stopping=True"
    return options + (f", length_penalty={lenpen}" if lenpen != 1.0 else "")  # 1.0: transformers' default


def build_model(state: dict, langs: Sequence[str], src: str, tgt: str, pad: int, eos: int):
    """The ``EncoderDecoderModel`` of one direction, in eval mode, with its generation config."""
    transformers = import_transformers()
    params, cfg = state["model"], state.get("cfg") or {}
    model_cfg = dict(cfg.get("model") or {})
    encoder, decoder = (side_config(params, model_cfg, side, pad, eos) for side in SIDES)
    config = transformers.EncoderDecoderConfig.from_encoder_decoder_configs(
        encoder, decoder, decoder_start_token_id=eos, pad_token_id=pad
    )
    model = transformers.EncoderDecoderModel(config=config)
    model.load_state_dict(hf_state_dict(params, langs, src, tgt), strict=True)
    model.generation_config = generation_config(
        dict(cfg.get("generation") or {}), pad, eos, decoder.max_position_embeddings
    )
    return model.eval()


def write_tokenizer(out_dir: str, symbols: Sequence[str], pipeline: TextPipeline, src: str, tgt: str, max_positions):
    """The tokenizer of one direction (``tokenization_xlm_fairseq.py`` copied beside it, ``auto_map``)."""
    from xlm_fairseq.inference.tokenization_xlm_fairseq import VOCAB_FILES_NAMES, XLMFairseqTokenizer

    settings = pipeline.settings
    subwords = {"sentencepiece": "spm_file", "xlm_bpe": "bpe_codes_file"}[settings.subwords]
    with tempfile.TemporaryDirectory() as tmp:
        vocab = os.path.join(tmp, VOCAB_FILES_NAMES["vocab_file"])
        with open(vocab, "w", encoding="utf-8") as f:
            json.dump(list(symbols), f, ensure_ascii=False)
        tokenizer = XLMFairseqTokenizer(
            vocab,
            **{subwords: pipeline.model_path},
            src_lang=src,
            tgt_lang=tgt,
            ro_remove_diacritics=settings.ro_remove_diacritics,
            lowercase_and_remove_accent=settings.lowercase_and_remove_accent,
            segmenters={lang: name for lang, name in settings.segmenters.items() if lang in (src, tgt)},
            model_max_length=max_positions,
        )
        tokenizer.register_for_auto_class("AutoTokenizer")  # save_pretrained copies the class's file, auto_map
        tokenizer.save_pretrained(out_dir)
    return tokenizer


def readme(src: str, tgt: str, generation_cfg: dict, max_positions: int, segmenters: Dict[str, str]) -> str:
    """The direction's README.md: the five lines a transformers user writes, what to install, the rules."""
    words, exact = length_limit(generation_cfg, max_positions)
    name = f"{src}-{tgt}"
    if exact:
        limit = f"Translations have at most {words} subwords, then `</s>`, as with xlm-fairseq's hub."
    else:
        a, b = generation_cfg.get("max_len_a"), generation_cfg.get("max_len_b")
        limit = (
            f"xlm-fairseq's hub allows `int({a} * len(input_ids) + {b})` subwords per source, which a generation\n"
            f"config cannot say (here `max_length` is the decoder's {max_positions} positions): pass\n"
            f"`max_new_tokens=int({a} * len(input_ids) + {b}) + 1` (the words and `</s>`) sentence by sentence."
        )
    packages = ["transformers", "sentencepiece", "sacremoses"] + [
        SEGMENTERS[n][1] for n in sorted(set(segmenters.values()))
    ]
    return f"""# XLM translator {name}, exported by xlm-fairseq

An XLM translation model ({src} -> {tgt}) as a `transformers` `EncoderDecoderModel` (BertGeneration encoder
and decoder). Its tokenizer, `tokenization_xlm_fairseq.py`, runs the model's whole text pipeline (Moses
normalisation and tokenisation, subwords, detokenisation), so neither fairseq nor xlm-fairseq is needed
(`pip install torch {" ".join(packages)}`). From this directory's parent:

```python
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained("{name}", trust_remote_code=True)
model = AutoModelForSeq2SeqLM.from_pretrained("{name}")
batch = tokenizer(["A sentence.", "Another one."], return_tensors="pt", padding=True, truncation=True)
print(tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True))
```

`generate` is greedy, as xlm-fairseq's `sample`. Its beam search (`translate`'s default: fairseq's length
normalisation, and a sentence ends with its first `num_beams` finished hypotheses) is

    model.generate(**batch, {beam_options(generation_cfg)})

{limit} The tokens are xlm-fairseq's: greedy, and nearly always in beam search (see its
`hf_translators.py`). `tokenizer(text_target=...)` gives labels (`pieces </s>`) for fine-tuning.
"""


def write_hf(
    state: dict,
    langs: Sequence[str],
    symbols: Sequence[str],
    pipeline: TextPipeline,
    model_dir: str,
    directions: Sequence[Tuple[str, str]],
) -> List[str]:
    """One transformers model and tokenizer per direction under ``model_dir/hf`` (a directory being built:
    see ``export.py``); returns their paths."""
    hf_logging = import_transformers().utils.logging
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # one per shard written: noise in an export's output
    try:
        return [_write_direction(state, langs, symbols, pipeline, model_dir, src, tgt) for src, tgt in directions]
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def _write_direction(state, langs, symbols, pipeline: TextPipeline, model_dir: str, src: str, tgt: str) -> str:
    pad, eos = symbols.index("<pad>"), symbols.index("</s>")
    out = os.path.join(model_dir, HF_DIR, f"{src}-{tgt}")
    model = build_model(state, langs, src, tgt, pad, eos)
    model.save_pretrained(out)
    write_tokenizer(out, symbols, pipeline, src, tgt, model.config.encoder.max_position_embeddings)
    segmenters = {lang: n for lang, n in pipeline.settings.segmenters.items() if lang in (src, tgt)}
    generation_cfg = dict((state.get("cfg") or {}).get("generation") or {})
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write(readme(src, tgt, generation_cfg, model.config.decoder.max_position_embeddings, segmenters))
    umask = os.umask(0)
    os.umask(umask)
    for name in os.listdir(out):  # safetensors writes its file private (0600); the rest of OUT_DIR is not
        os.chmod(os.path.join(out, name), 0o666 & ~umask)
    return out
