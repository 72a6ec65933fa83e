"""Read a pretrained XLM LM (our checkpoint, or a converter OUT_DIR) for initialisation.

The vocabulary must be the same; languages are matched by name, so a model pretrained on
en,de,ro can start a run over de,en (language-embedding rows are reordered)."""

import os
from typing import Dict, List

import torch

from fairseq.data import Dictionary

from xlm_fairseq import safe_load
from xlm_fairseq.errors import XLMUserError

LM_PREFIX = "encoder.transformer."


class PretrainedMismatchError(XLMUserError):
    pass


def resolve_checkpoint(path: str) -> str:
    if os.path.isdir(path):
        path = os.path.join(path, "model.pt")
    if not os.path.isfile(path):
        raise PretrainedMismatchError(f"{path}: no such checkpoint")
    return path


def _checkpoint_dictionary(ckpt_path: str, state) -> Dictionary:
    candidates = [os.path.join(os.path.dirname(ckpt_path), "dict.txt")]
    task_cfg = (state.get("cfg") or {}).get("task") or {}
    data = task_cfg.get("data") if hasattr(task_cfg, "get") else None
    if data:
        candidates.append(os.path.join(str(data).split(os.pathsep)[0], "dict.txt"))
    for c in candidates:
        if os.path.isfile(c):
            return Dictionary.load(c)
    return None


def load_pretrained_lm_state(path: str, dictionary: Dictionary, langs: List[str]) -> Dict[str, torch.Tensor]:
    """The LM parameters (``encoder.transformer.*``) of ``path``, checked against ``dictionary`` and
    with language embeddings reordered to ``langs``."""
    from xlm_fairseq.tasks.base import MASK_SYMBOL

    ckpt_path = resolve_checkpoint(path)
    state = safe_load.load(ckpt_path)
    model = state["model"]
    lm = {k: v for k, v in model.items() if k.startswith(LM_PREFIX)}
    if not lm:
        raise PretrainedMismatchError(f"{ckpt_path}: not an xlm_fairseq model (no {LM_PREFIX}* parameters)")
    n_words = lm[LM_PREFIX + "embeddings.weight"].shape[0]
    if n_words != len(dictionary):
        raise PretrainedMismatchError(
            f"{ckpt_path}: vocabulary of {n_words} entries, but the data's dict.txt gives {len(dictionary)}; "
            "binarise the data with the pretrained model's dict.txt/spm.model (preprocess --spm-model/--dict)"
        )
    theirs = _checkpoint_dictionary(ckpt_path, state)
    if theirs is not None:
        if MASK_SYMBOL not in theirs.indices:
            theirs.add_symbol(MASK_SYMBOL)
        for i, (a, b) in enumerate(zip(theirs.symbols, dictionary.symbols)):
            if a != b:
                raise PretrainedMismatchError(
                    f"{ckpt_path}: vocabulary differs from the data's dict.txt at entry {i} ('{a}' vs '{b}')"
                )
    ckpt_langs = list(_checkpoint_langs(state))
    key = LM_PREFIX + "lang_embeddings.weight"
    if key in lm:
        missing = [lang for lang in langs if lang not in ckpt_langs]
        if missing:
            raise PretrainedMismatchError(
                f"{ckpt_path}: pretrained on {','.join(ckpt_langs)}; no language embedding for {','.join(missing)}"
            )
        if len(langs) > 1:
            lm[key] = lm[key][[ckpt_langs.index(lang) for lang in langs]]
        else:
            del lm[key]
    elif len(langs) > 1 and not _uses_no_lang_emb(state):
        raise PretrainedMismatchError(f"{ckpt_path}: has no language embeddings; pass --no-lang-emb")
    return lm


def _checkpoint_langs(state):
    task_cfg = (state.get("cfg") or {}).get("task") or {}
    langs = task_cfg.get("langs", "")
    return [x for x in str(langs).split(",") if x]


def _uses_no_lang_emb(state):
    model_cfg = (state.get("cfg") or {}).get("model") or {}
    return bool(model_cfg.get("no_lang_emb", False))
