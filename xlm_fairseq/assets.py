"""Read a pretrained XLM (our checkpoint, a converter or export OUT_DIR, or a fine-tuned classifier)
to initialise another model: its parameters, languages, dictionary and text pipeline.

The vocabulary must be the same; languages are matched by name, so a model pretrained on
en,de,ro can start a run over de,en (language-embedding rows are reordered)."""

import os
from typing import Dict, List, Optional, Tuple

import torch
from fairseq.data import Dictionary

from preprocess.langs import parse_langs
from preprocess.layout import MODEL_FILE
from preprocess.pipeline import PipelineSettings, read_settings, restore_subword_model
from xlm_fairseq.data.dictionary import checkpoint_dictionary, dictionary_from_state
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.models.xlm import LM_PREFIX
from xlm_fairseq.patches import safe_load


def resolve_checkpoint(path: str) -> str:
    if os.path.isdir(path):
        path = os.path.join(path, MODEL_FILE)
    if not os.path.isfile(path):
        raise XLMUserError(f"{path}: no such checkpoint")
    return path


class PretrainedCheckpoint:
    """One checkpoint, loaded once. What it carries (``task_state``: a classifier's dictionary, text
    pipeline and subword model) comes first; then the files beside it and in its data-bin."""

    def __init__(self, path: str):
        self.path = resolve_checkpoint(path)
        self.state = safe_load.load(self.path)
        if not isinstance(self.state, dict) or "model" not in self.state:
            raise XLMUserError(f"{self.path}: not a fairseq checkpoint (no model)")
        self.task_state = self.state.get("task_state") or {}

    @property
    def task_cfg(self) -> dict:
        return (self.state.get("cfg") or {}).get("task") or {}

    @property
    def langs(self) -> List[str]:
        if self.task_state.get("langs"):  # a classifier's, resolved when it was trained
            return list(self.task_state["langs"])
        return parse_langs(self.task_cfg.get("langs", ""), f"{self.path}: its --langs")

    def dirs(self) -> List[str]:
        """Where its ``dict.txt`` and subword model may be: beside it, then its data-bin."""
        data = str(self.task_cfg.get("data") or "").split(os.pathsep)[0]
        return [d for d in (os.path.dirname(self.path), data) if d and os.path.isdir(d)]

    def dictionary(self) -> Tuple[Optional[Dictionary], Optional[str]]:
        """(its dictionary, where it came from), or (None, None)."""
        if self.task_state.get("dictionary"):
            return dictionary_from_state(self.task_state["dictionary"]), self.path
        return checkpoint_dictionary(self.path, self.state)

    def pipeline_settings(self) -> Optional[PipelineSettings]:
        stored = self.task_state.get("text_pipeline")
        if stored:
            return PipelineSettings.from_dict(stored, f"{self.path}: its text pipeline")
        return next((s for s in map(read_settings, self.dirs()) if s is not None), None)

    def subword_dirs(self) -> List[str]:
        """Directories to look up its subword model in (one restored from the checkpoint first)."""
        carried = self.task_state.get("subword_model")
        restored = [restore_subword_model(carried, self.path)] if carried else []
        return restored + self.dirs()

    def architecture(self) -> str:
        """The options that rebuild its stack (for messages): ``--encoder-embed-dim 1024 ...``."""
        model_cfg = (self.state.get("cfg") or {}).get("model") or {}
        names = ("encoder_embed_dim", "encoder_layers", "encoder_attention_heads", "encoder_ffn_embed_dim")
        options = [f"--{n.replace('_', '-')} {model_cfg[n]}" for n in (*names, "max_positions") if n in model_cfg]
        options += [f"--{n.replace('_', '-')}" for n in ("no_lang_emb", "sinusoidal_embeddings") if model_cfg.get(n)]
        return " ".join(options) or "(its cfg names none)"

    def lm_state(self, dictionary: Dictionary, langs: List[str]) -> Dict[str, torch.Tensor]:
        """The LM parameters (``encoder.transformer.*``), checked against ``dictionary`` and with
        language embeddings reordered to ``langs``."""
        ckpt_path, model = self.path, self.state["model"]
        lm = {k: v for k, v in model.items() if k.startswith(LM_PREFIX)}
        if not lm:
            raise XLMUserError(f"{ckpt_path}: not an xlm_fairseq model (no {LM_PREFIX}* parameters)")
        n_words = lm[LM_PREFIX + "embeddings.weight"].shape[0]
        if n_words != len(dictionary):
            raise XLMUserError(
                f"{ckpt_path}: vocabulary of {n_words} entries, but the data's dict.txt gives {len(dictionary)}; "
                "binarise the data with the pretrained model's dict.txt/spm.model (preprocess --spm-model/--dict)"
            )
        theirs, _ = self.dictionary()
        if theirs is not None:
            for i, (a, b) in enumerate(zip(theirs.symbols, dictionary.symbols)):
                if a != b:
                    raise XLMUserError(
                        f"{ckpt_path}: vocabulary differs from the data's dict.txt at entry {i} ('{a}' vs '{b}')"
                    )
        ckpt_langs = self.langs
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
        elif len(langs) > 1 and not ((self.state.get("cfg") or {}).get("model") or {}).get("no_lang_emb", False):
            raise XLMUserError(f"{ckpt_path}: has no language embeddings; pass --no-lang-emb")
        return lm


def load_pretrained_lm_state(path: str, dictionary: Dictionary, langs: List[str]) -> Dict[str, torch.Tensor]:
    """The LM parameters of the checkpoint at ``path`` (see :meth:`PretrainedCheckpoint.lm_state`)."""
    return PretrainedCheckpoint(path).lm_state(dictionary, langs)
