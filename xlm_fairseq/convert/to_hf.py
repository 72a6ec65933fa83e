"""Export an xlm_fairseq LM checkpoint as a Hugging Face XLM directory (``XLMWithLMHeadModel``), with
``vocab.json``/``merges.txt``/``tokenizer_config.json`` for XLM's BPE or ``spm.model`` and a note."""

import json
import os
import shutil
import warnings

from preprocess.files import check_out_dir, staged_out_dir
from preprocess.langs import parse_langs
from preprocess.layout import (
    BPE_CODES_FILE,
    FAIRSEQ_SYMBOLS,
    MASK_SYMBOL,
    MODEL_FILE,
    SPM_MODEL_FILE,
)
from preprocess.pipeline import read_settings
from preprocess.subwords import parse_bpe_codes, write_bpe_codes
from xlm_fairseq.convert.source import _is_xlm_pth, _load_checkpoint, swap_permutation, xlm_word_to_hf_token
from xlm_fairseq.data.dictionary import checkpoint_dictionary
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.models.xlm import LM_PREFIX
from xlm_fairseq.modules.transformer import LAYER_NORM_EPS

_XLM_ARCHS = ("xlm_transformer", "xlm_tiny", "xlm_512", "xlm_1024")


def export_hf(src: str, out: str, force: bool = False) -> str:
    """xlm_fairseq LM checkpoint (file, or directory with model.pt) -> HF XLM directory."""
    if (
        os.path.isdir(src)
        and os.path.isfile(os.path.join(src, "config.json"))
        and not os.path.isfile(os.path.join(src, MODEL_FILE))
    ):
        raise XLMUserError(f"{src}: a Hugging Face directory; --to hf takes an xlm_fairseq checkpoint ({MODEL_FILE})")
    ckpt_path = os.path.join(src, MODEL_FILE) if os.path.isdir(src) else src
    if not os.path.isfile(ckpt_path):
        raise XLMUserError(f"{src}: no such checkpoint")
    check_out_dir(out, force, src)
    state = _load_checkpoint(ckpt_path)
    if _is_xlm_pth(state):
        raise XLMUserError(
            f"{ckpt_path}: an original XLM .pth; --to hf takes an xlm_fairseq checkpoint "
            "(convert with --to fairseq first)"
        )
    if not isinstance(state, dict) or "model" not in state or not state.get("cfg"):
        raise XLMUserError(f"{ckpt_path}: not a fairseq checkpoint with a cfg")
    cfg = state["cfg"]
    model_cfg, task_cfg = cfg.get("model") or {}, cfg.get("task") or {}
    if (model_cfg.get("_name") or model_cfg.get("arch")) not in _XLM_ARCHS:
        raise XLMUserError(f"{ckpt_path}: model {model_cfg.get('_name')!r} is not xlm_transformer")
    lm = {k[len(LM_PREFIX) :]: v for k, v in state["model"].items() if k.startswith(LM_PREFIX)}
    if "pred_layer.proj.bias" not in lm:
        raise XLMUserError(
            f"{ckpt_path}: no LM output layer (a translation model?); only cross_lingual_lm checkpoints export"
        )
    dictionary, dict_dir = checkpoint_dictionary(ckpt_path, state)
    if dictionary is None:
        raise XLMUserError(f"{ckpt_path}: no dict.txt beside it or in its task.data")
    n_words = lm["embeddings.weight"].shape[0]
    if len(dictionary) != n_words:
        raise XLMUserError(f"{ckpt_path}: {n_words} embedding rows but dict.txt gives {len(dictionary)} entries")
    if list(dictionary.symbols[:4]) != list(FAIRSEQ_SYMBOLS):
        raise XLMUserError(f"{ckpt_path}: dictionary starts {dictionary.symbols[:4]}, expected {list(FAIRSEQ_SYMBOLS)}")
    langs = parse_langs(str(task_cfg.get("langs") or ""), f"{ckpt_path}: the checkpoint's --langs")
    dim = lm["embeddings.weight"].shape[1]
    n_layers = len({k.split(".")[1] for k in lm if k.startswith("attentions.")})
    n_heads = int(model_cfg.get("encoder_attention_heads"))
    ffn_dim = lm["ffns.0.lin1.weight"].shape[0]
    if ffn_dim != 4 * dim:
        raise XLMUserError(
            f"{ckpt_path}: FFN size {ffn_dim} is not 4 x {dim}; Hugging Face's XLM hard-codes 4 x emb_dim"
        )
    use_lang_emb = "lang_embeddings.weight" in lm
    n_langs = max(len(langs), 1)
    if use_lang_emb and lm["lang_embeddings.weight"].shape[0] != n_langs:
        raise XLMUserError(
            f"{ckpt_path}: {lm['lang_embeddings.weight'].shape[0]} language embeddings for langs {langs}"
        )

    perm = swap_permutation(n_words)
    hf_words = [dictionary.symbols[int(i)] for i in perm]  # HF/XLM order
    hf_state = {}
    for name, value in lm.items():
        if name == "pred_layer.proj.weight":
            continue
        if name in ("embeddings.weight", "pred_layer.proj.bias"):
            value = value[perm]
        key = name if name.startswith("pred_layer.") else "transformer." + name
        hf_state[key] = value.detach().float().clone()
    hf_state["pred_layer.proj.weight"] = hf_state["transformer.embeddings.weight"]

    from transformers import XLMConfig, XLMWithLMHeadModel

    mask_index = hf_words.index(MASK_SYMBOL)
    lang2id = {lang: i for i, lang in enumerate(langs)}
    config = XLMConfig(
        vocab_size=n_words,
        emb_dim=dim,
        n_layers=n_layers,
        n_heads=n_heads,
        dropout=float(model_cfg.get("dropout", 0.1)),
        attention_dropout=float(model_cfg.get("attention_dropout", 0.1)),
        gelu_activation=True,
        sinusoidal_embeddings=bool(model_cfg.get("sinusoidal_embeddings", False)),
        causal=False,
        asm=False,
        n_langs=n_langs,
        use_lang_emb=use_lang_emb,
        max_position_embeddings=lm["position_embeddings.weight"].shape[0],
        layer_norm_eps=LAYER_NORM_EPS,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=2,
        unk_index=3,
        mask_index=mask_index,
        mask_token_id=mask_index,
        lang2id=lang2id or None,
        id2lang={i: lang for lang, i in lang2id.items()} or None,
        lang_id=0,
        tie_word_embeddings=True,
    )
    final = os.path.abspath(out)
    with staged_out_dir(final, force) as tmp:
        from transformers.utils import logging as hf_logging

        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hf_model = XLMWithLMHeadModel(config)
            missing, unexpected = hf_model.load_state_dict(hf_state, strict=False)
            missing = [k for k in missing if not k.endswith("position_ids")]
            if missing or unexpected:
                raise XLMUserError(
                    f"{ckpt_path}: cannot fill the HF model (missing {missing[:3]}, unexpected {unexpected[:3]})"
                )
            hf_model.tie_weights()
            try:
                hf_model.save_pretrained(tmp)
            finally:
                if bars:
                    hf_logging.enable_progress_bar()
        ckpt_dir = os.path.dirname(os.path.abspath(ckpt_path))
        _write_hf_tokenizer(tmp, hf_words, dict_dir, ckpt_dir, lang2id, mask_index)
    return final


def _write_hf_tokenizer(tmp, hf_words, dict_dir, ckpt_dir, lang2id, mask_index):
    tok_info = {}
    codes_path = None
    spm_path = None
    for d in dict.fromkeys([ckpt_dir, dict_dir]):
        if not tok_info:
            settings = read_settings(d)
            tok_info = settings.to_dict() if settings is not None else {}
        if codes_path is None and os.path.isfile(os.path.join(d, BPE_CODES_FILE)):
            codes_path = os.path.join(d, BPE_CODES_FILE)
        if spm_path is None and os.path.isfile(os.path.join(d, SPM_MODEL_FILE)):
            spm_path = os.path.join(d, SPM_MODEL_FILE)
    readme = [
        "# XLM model exported from xlm_fairseq",
        "",
        "Load with `transformers.XLMWithLMHeadModel.from_pretrained(THIS_DIR)`; pass `langs` "
        f"(ids: {json.dumps(lang2id)}) as XLM expects.",
        "",
    ]
    if tok_info.get("subwords") == "xlm_bpe" or (codes_path and not spm_path):
        vocab = {xlm_word_to_hf_token(w): i for i, w in enumerate(hf_words)}
        with open(os.path.join(tmp, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump(vocab, f, ensure_ascii=False, indent=2)
            f.write("\n")
        if codes_path:
            with open(codes_path, encoding="utf-8") as f:
                codes = parse_bpe_codes(f, codes_path)
            with open(os.path.join(tmp, "merges.txt"), "w", encoding="utf-8", newline="\n") as f:
                write_bpe_codes(codes, f)
        else:
            readme += [
                "No BPE codes were next to the checkpoint: add the model's `merges.txt` before using `XLMTokenizer`.",
                "",
            ]
        with open(os.path.join(tmp, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(
                {
                    "tokenizer_class": "XLMTokenizer",
                    "do_lowercase_and_remove_accent": bool(tok_info.get("lowercase_and_remove_accent", True)),
                    "lang2id": lang2id or None,
                    "id2lang": {str(i): lang for lang, i in lang2id.items()} or None,
                    "mask_token": MASK_SYMBOL,
                },
                f,
                indent=2,
            )
            f.write("\n")
    elif spm_path:
        shutil.copyfile(spm_path, os.path.join(tmp, SPM_MODEL_FILE))
        with open(os.path.join(tmp, "vocab.txt"), "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(w + "\n" for w in hf_words))
        _spm_fast_tokenizer(spm_path, hf_words).save_pretrained(tmp)
        readme += [
            "`AutoTokenizer.from_pretrained(THIS_DIR)` is the model's sentencepiece vocabulary as a fast "
            f"tokenizer (`</s> pieces </s>`, mask `{MASK_SYMBOL}` = {mask_index}, the model's ids). Its input "
            "is Moses-tokenised text, as in `preprocess/`: the normalisation and Moses steps cannot live in a "
            "`tokenizers` pipeline. With this repository:",
            "",
            "```python",
            "from preprocess.pipeline import PipelineSettings, TextPipeline",
            'words = TextPipeline(PipelineSettings("sentencepiece", "spm.model"), "THIS_DIR/spm.model")'
            '.tokenize("Hello, world!", "en")',
            'ids = AutoTokenizer.from_pretrained("THIS_DIR")(words)["input_ids"]',
            "```",
            "",
            "(or `sacremoses`: `MosesPunctNormalizer(lang, pre_replace_unicode_punct=True)`, then "
            "`MosesTokenizer(lang).tokenize(text, escape=False, return_str=True)`).",
            "",
        ]
    else:
        readme += ["No tokenizer files were found next to the checkpoint; only the weights were exported.", ""]
    with open(os.path.join(tmp, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(readme))


def _spm_fast_tokenizer(spm_path: str, hf_words):
    """The sentencepiece BPE model as a ``tokenizers`` BPE with the HF model's ids: pieces inside
    whitespace-separated words (Metaspace, as sentencepiece splits), merges in sentencepiece's order
    (transformers' own extractor), ``</s>`` around every sentence as XLM does."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import SentencePieceExtractor

    vocab = {w: i for i, w in enumerate(hf_words)}
    merges = SentencePieceExtractor(spm_path).extract(models.BPE)["merges"]
    merges = [(a, b) for a, b in merges if a in vocab and b in vocab and a + b in vocab]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    eos = ("</s>", vocab["</s>"])
    tokenizer.post_processor = processors.TemplateProcessing(
        single="</s> $A </s>", pair="</s> $A </s> $B </s>", special_tokens=[eos]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token=MASK_SYMBOL,
    )
