"""Read a pretrained XLM LM (our checkpoint, or a converter OUT_DIR) for initialisation.

The vocabulary must be the same; languages are matched by name, so a model pretrained on
en,de,ro can start a run over de,en (language-embedding rows are reordered)."""

import os
from typing import Dict, List

import torch
from fairseq.data import Dictionary

from preprocess.langs import parse_langs
from preprocess.layout import MODEL_FILE
from xlm_fairseq import safe_load
from xlm_fairseq.data.dictionary import checkpoint_dictionary
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.models.xlm import LM_PREFIX


def resolve_checkpoint(path: str) -> str:
    if os.path.isdir(path):
        path = os.path.join(path, MODEL_FILE)
    if not os.path.isfile(path):
        raise XLMUserError(f"{path}: no such checkpoint")
    return path


def load_pretrained_lm_state(path: str, dictionary: Dictionary, langs: List[str]) -> Dict[str, torch.Tensor]:
    """The LM parameters (``encoder.transformer.*``) of ``path``, checked against ``dictionary`` and
    with language embeddings reordered to ``langs``."""
    ckpt_path = resolve_checkpoint(path)
    state = safe_load.load(ckpt_path)
    model = state["model"]
    lm = {k: v for k, v in model.items() if k.startswith(LM_PREFIX)}
    if not lm:
        raise XLMUserError(f"{ckpt_path}: not an xlm_fairseq model (no {LM_PREFIX}* parameters)")
    n_words = lm[LM_PREFIX + "embeddings.weight"].shape[0]
    if n_words != len(dictionary):
        raise XLMUserError(
            f"{ckpt_path}: vocabulary of {n_words} entries, but the data's dict.txt gives {len(dictionary)}; "
            "binarise the data with the pretrained model's dict.txt/spm.model (preprocess --spm-model/--dict)"
        )
    theirs, _ = checkpoint_dictionary(ckpt_path, state)
    if theirs is not None:
        for i, (a, b) in enumerate(zip(theirs.symbols, dictionary.symbols)):
            if a != b:
                raise XLMUserError(
                    f"{ckpt_path}: vocabulary differs from the data's dict.txt at entry {i} ('{a}' vs '{b}')"
                )
    ckpt_langs = list(_checkpoint_langs(state))
    key = LM_PREFIX + "lang_embeddings.weight"
    if key in lm:
        missing = [lang for lang in langs if lang not in ckpt_langs]
        if missing:
            raise XLMUserError(
                f"{ckpt_path}: pretrained on {','.join(ckpt_langs)}; no language embedding for {','.join(missing)}"
            )
        if len(langs) > 1:
            lm[key] = lm[key][[ckpt_langs.index(lang) for lang in langs]]
        else:
            del lm[key]
    elif len(langs) > 1 and not _uses_no_lang_emb(state):
        raise XLMUserError(f"{ckpt_path}: has no language embeddings; pass --no-lang-emb")
    return lm


def _checkpoint_langs(state):
    task_cfg = (state.get("cfg") or {}).get("task") or {}
    return parse_langs(task_cfg.get("langs", ""), "the checkpoint's --langs")


def _uses_no_lang_emb(state):
    model_cfg = (state.get("cfg") or {}).get("model") or {}
    return bool(model_cfg.get("no_lang_emb", False))
