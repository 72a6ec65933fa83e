"""Write an :class:`~xlm_fairseq.convert.lm.LM` as a Hugging Face XLM directory
(``XLMWithLMHeadModel``), with ``vocab.json``/``merges.txt``/``tokenizer_config.json`` for XLM's BPE
or ``spm.model`` and a fast tokenizer for sentencepiece; staged, so OUT_DIR is whole or not there."""

import json
import os
import shutil
import warnings
from typing import Dict, List

from preprocess.files import staged_out_dir
from preprocess.layout import MASK_SYMBOL, SPM_MODEL_FILE
from preprocess.subwords import write_bpe_codes
from xlm_fairseq.convert.lm import LM, swap_permutation, xlm_word_to_hf_token
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.models.xlm import LM_PREFIX
from xlm_fairseq.modules.transformer import LAYER_NORM_EPS


def write_hf_dir(lm: LM, out: str, force: bool = False) -> str:
    """Write ``lm`` as a directory ``transformers.XLMWithLMHeadModel.from_pretrained`` loads. Returns OUT_DIR."""
    ffn = lm.state[LM_PREFIX + "ffns.0.lin1.weight"].shape[0]
    if ffn != 4 * lm.dim:
        raise XLMUserError(f"{lm.path}: FFN size {ffn} is not 4 x {lm.dim}; Hugging Face's XLM hard-codes 4 x emb_dim")
    perm = swap_permutation(len(lm.words))
    hf_words = [lm.words[int(i)] for i in perm]  # HF/XLM order
    hf_state = {}
    for name, value in lm.state.items():
        name = name[len(LM_PREFIX) :]
        if name in ("embeddings.weight", "pred_layer.proj.bias"):
            value = value[perm]
        key = name if name.startswith("pred_layer.") else "transformer." + name
        hf_state[key] = value.detach().float().clone()
    hf_state["pred_layer.proj.weight"] = hf_state["transformer.embeddings.weight"]

    from transformers import XLMConfig, XLMWithLMHeadModel

    mask_index = hf_words.index(MASK_SYMBOL)
    lang2id = {lang: i for i, lang in enumerate(lm.langs)}
    config = XLMConfig(
        vocab_size=len(hf_words),
        emb_dim=lm.dim,
        n_layers=lm.n_layers,
        n_heads=lm.n_heads,
        dropout=lm.dropout,
        attention_dropout=lm.attention_dropout,
        gelu_activation=True,
        sinusoidal_embeddings=lm.sinusoidal,
        causal=False,
        asm=False,
        n_langs=max(len(lm.langs), 1),
        use_lang_emb=lm.use_lang_emb,
        max_position_embeddings=lm.max_positions,
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
                    f"{lm.path}: cannot fill the HF model (missing {missing[:3]}, unexpected {unexpected[:3]})"
                )
            hf_model.tie_weights()
            try:
                hf_model.save_pretrained(tmp)
            finally:
                if bars:
                    hf_logging.enable_progress_bar()
        readme = _write_tokenizer(tmp, lm, hf_words, lang2id, mask_index)
        with open(os.path.join(tmp, "README.md"), "w", encoding="utf-8") as f:
            f.write("\n".join(readme))
    return final


def _write_tokenizer(tmp: str, lm: LM, hf_words: List[str], lang2id: Dict[str, int], mask_index: int) -> List[str]:
    """The tokenizer files of ``lm``'s subwords; returns the lines of README.md."""
    readme = [
        "# XLM model exported from xlm_fairseq",
        "",
        "Load with `transformers.XLMWithLMHeadModel.from_pretrained(THIS_DIR)`; pass `langs` "
        f"(ids: {json.dumps(lang2id)}) as XLM expects.",
        "",
    ]
    if lm.subwords == "xlm_bpe":
        vocab = {xlm_word_to_hf_token(w): i for i, w in enumerate(hf_words)}
        with open(os.path.join(tmp, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump(vocab, f, ensure_ascii=False, indent=2)
            f.write("\n")
        if lm.codes is not None:
            with open(os.path.join(tmp, "merges.txt"), "w", encoding="utf-8", newline="\n") as f:
                write_bpe_codes(lm.codes, f)
        else:
            readme += [
                "No BPE codes were next to the checkpoint: add the model's `merges.txt` before using `XLMTokenizer`.",
                "",
            ]
        with open(os.path.join(tmp, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(
                {
                    "tokenizer_class": "XLMTokenizer",
                    "do_lowercase_and_remove_accent": bool(lm.lowercase),
                    "lang2id": lang2id or None,
                    "id2lang": {str(i): lang for lang, i in lang2id.items()} or None,
                    "mask_token": MASK_SYMBOL,
                },
                f,
                indent=2,
            )
            f.write("\n")
    elif lm.subwords == "sentencepiece":
        shutil.copyfile(lm.spm_model, os.path.join(tmp, SPM_MODEL_FILE))
        with open(os.path.join(tmp, "vocab.txt"), "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(w + "\n" for w in hf_words))
        _spm_fast_tokenizer(lm.spm_model, hf_words).save_pretrained(tmp)
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
    return readme


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
