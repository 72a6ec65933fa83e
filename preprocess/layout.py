"""The data-bin and model-directory layout: symbols and file names, written down once.

``preprocess/`` writes these files; the plugin's tasks, hub and converter and the recipes read them."""

import os

FORMAT_VERSION = 1  # of manifest.json

FAIRSEQ_SYMBOLS = ("<s>", "<pad>", "</s>", "<unk>")  # fairseq's Dictionary, indices 0..3
XLM_SYMBOLS = ("<s>", "</s>", "<pad>", "<unk>")  # XLM's dictionary, indices 0..3
SPECIAL_SYMBOLS = tuple(f"<special{i}>" for i in range(10))  # XLM's, first in every dict.txt
MASK_SYMBOL = SPECIAL_SYMBOLS[1]  # XLM's MASK_WORD

DICT_FILE = "dict.txt"
SPM_MODEL_FILE = "spm.model"
SPM_VOCAB_FILE = "spm.vocab"
BPE_CODES_FILE = "bpe.codes"  # XLM/fastBPE codes, "a b count" per line
PIPELINE_FILE = "text_pipeline.json"  # the text pipeline's settings (preprocess/pipeline.py)
MANIFEST_FILE = "manifest.json"
SUMMARY_JSON_FILE = "summary.json"
SUMMARY_TEXT_FILE = "summary.txt"
MODEL_FILE = "model.pt"  # a converted model's checkpoint


def mono_dataset(split: str, lang: str) -> str:
    """Name of a monolingual dataset in a data-bin (``.bin``/``.idx`` added by fairseq)."""
    return f"{split}.{lang}"


def classification_file(split: str, lang: str) -> str:
    """Name of a classification TSV (``id``, ``label``, ``text`` [, ``text_b``] columns)."""
    return f"{split}.{lang}.tsv"


def pair_dataset(split: str, src: str, tgt: str, lang: str) -> str:
    """Name of one side of a parallel dataset; the pair is always stored sorted (``de-en``)."""
    a, b = sorted((src, tgt))
    return f"{split}.{a}-{b}.{lang}"


def cache_root() -> str:
    """Where models converted from Hugging Face ids and subword models restored from checkpoints are
    kept: ``$XLM_FAIRSEQ_CACHE``, default ``~/.cache/xlm-fairseq``."""
    return os.path.expanduser(os.environ.get("XLM_FAIRSEQ_CACHE") or os.path.join("~", ".cache", "xlm-fairseq"))
