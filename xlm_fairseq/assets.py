"""One answer to "which dictionary, languages and text pipeline belong to this model", and the
reading of a pretrained LM to start another model from (``init_from_lm``).

Every lookup goes in one order: what the checkpoint carries (fairseq's ``task_state``: dictionary,
text pipeline and its subword model, languages), then the files beside the checkpoint (a model dir
made by ``xlm-fairseq-export`` or the converter), then the data-bin it names (or the one given).
A pretrained LM's vocabulary must be the one of the new model; languages are matched by name, so a
model pretrained on en,de,ro can start a run over de,en (language-embedding rows are reordered).
"""

import logging
import os
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from fairseq.data import Dictionary

from preprocess.layout import DICT_FILE, MODEL_FILE
from preprocess.pipeline import PipelineSettings, TextPipeline, load_pipeline, read_settings, restore_subword_model
from xlm_fairseq import checkpoints
from xlm_fairseq.data.data_bin import data_shards
from xlm_fairseq.data.dictionary import dictionary_digest, dictionary_from_state, load_dictionary
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.models.xlm import LM_PREFIX

logger = logging.getLogger(__name__)

OTHER_DICTIONARY = "give the data-bin it was trained on, or a model dir made by xlm-fairseq-export"


def resolve_checkpoint(path: str) -> str:
    if os.path.isdir(path):
        path = os.path.join(path, MODEL_FILE)
    if not os.path.isfile(path):
        raise XLMUserError(f"{path}: no such checkpoint")
    return path


class ModelAssets:
    """A model's dictionary, text pipeline and subword model: from ``carried`` (a checkpoint's
    ``task_state``), else from ``dirs`` in order (beside the checkpoint, then the data-bin).
    ``name`` (the checkpoint) is named in messages."""

    def __init__(self, carried: Optional[Mapping], dirs: Sequence[Optional[str]], name: str):
        self.carried = carried or {}
        self.dirs = list(dict.fromkeys(d for d in dirs if d and os.path.isdir(d)))
        self.name = name

    def dictionary(self) -> Tuple[Optional[Dictionary], Optional[str]]:
        """(the dictionary, where it came from), or (None, None)."""
        if self.carried.get("dictionary"):
            return dictionary_from_state(self.carried["dictionary"]), self.name
        for directory in self.dirs:
            if os.path.isfile(os.path.join(directory, DICT_FILE)):
                return load_dictionary(directory), directory
        return None, None

    def check_dictionary(
        self, dictionary: Dictionary, source: str, rows: Optional[int] = None, remedy: str = OTHER_DICTIONARY
    ) -> None:
        """The one answer to "is ``dictionary`` (read from ``source``) the model's?": as many types as
        the model's embedding ``rows`` (when given), and the digest its checkpoint carries, else the
        symbols of the dictionary it has. A mismatch is one line naming ``source``, ending in ``remedy``."""
        reason = None
        if rows is not None and rows != len(dictionary):
            reason = f"{len(dictionary)} types for its {rows} embedding rows"
        elif self.carried.get("dictionary_sha256"):
            if self.carried["dictionary_sha256"] != dictionary_digest(dictionary):
                reason = f"{len(dictionary)} types, other symbols or order"
        else:
            theirs, _ = self.dictionary()
            differ = [i for i, (a, b) in enumerate(zip(theirs.symbols, dictionary.symbols)) if a != b] if theirs else []
            if differ:
                i = differ[0]
                reason = f"entry {i} is '{dictionary.symbols[i]}', the model's '{theirs.symbols[i]}'"
        if reason:
            raise XLMUserError(f"{source}: not the dictionary {self.name} was trained with ({reason}); {remedy}")

    def pipeline_settings(self) -> Optional[PipelineSettings]:
        stored = self.carried.get("text_pipeline")
        if stored:
            return PipelineSettings.from_dict(stored, f"{self.name}: its text pipeline")
        return next((s for s in map(read_settings, self.dirs) if s is not None), None)

    def subword_dirs(self) -> List[str]:
        """Where its subword model is looked up: the one it carries (restored to a cache directory)
        first, then ``dirs``."""
        carried = self.carried.get("subword_model")
        return ([restore_subword_model(carried, self.name)] if carried else []) + self.dirs

    def pipeline(self, first_dirs: Sequence[str] = ()) -> Optional[TextPipeline]:
        """The text pipeline (None when nothing describes one); ``first_dirs`` are searched for the
        subword model before the others (a hub's model directory)."""
        return load_pipeline([*first_dirs, *self.subword_dirs()], self.pipeline_settings())


class PretrainedCheckpoint:
    """One checkpoint, read once: its parameters, languages and :class:`ModelAssets` (what it
    carries, then the files beside it, then ``data`` or the data-bin its config names)."""

    def __init__(self, path: str, data: Optional[str] = None):
        self.path = resolve_checkpoint(path)
        self.state = checkpoints.load(self.path)
        if not isinstance(self.state, dict) or "model" not in self.state:
            raise XLMUserError(f"{self.path}: not a fairseq checkpoint (no model)")
        self.task_state = self.state.get("task_state") or {}
        self.assets = ModelAssets(self.task_state, [os.path.dirname(self.path), data or self.data_bin], self.path)

    @property
    def task_cfg(self) -> dict:
        return (self.state.get("cfg") or {}).get("task") or {}

    @property
    def data_bin(self) -> str:
        """The data-bin it was trained on, as its config names it ('' when none)."""
        return data_shards(str(self.task_cfg.get("data") or ""))[0]

    @property
    def langs(self) -> List[str]:
        return checkpoints.carried_langs(self.task_state, self.task_cfg, self.path)

    def dictionary(self) -> Tuple[Optional[Dictionary], Optional[str]]:
        return self.assets.dictionary()

    @property
    def embedding_rows(self) -> Optional[int]:
        """How many words its embedding table holds (None: no XLM stack in it)."""
        table = self.state["model"].get(LM_PREFIX + "embeddings.weight")
        return None if table is None else table.shape[0]

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
        self.assets.check_dictionary(
            dictionary,
            getattr(dictionary, "source_file", None) or "the data's dict.txt",
            rows=self.embedding_rows,
            remedy="binarise the data with the pretrained model's dict.txt/spm.model (preprocess --spm-model/--dict)",
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
        return lm


def init_from_lm(model, path, dictionary: Dictionary, langs: List[str]) -> None:
    """Start ``model`` (an LM, a classifier or a translation model) from the pretrained LM at ``path``
    (XLM's ``--reload_model``): every stack of the model takes the LM's parameters; only what an LM
    does not have (a decoder's encoder-decoder attention and its LayerNorm, a classifier's head) stays
    as initialised, and the LM's output layer is left out where the model has none."""
    pretrained = path if isinstance(path, PretrainedCheckpoint) else PretrainedCheckpoint(path)  # read once
    fresh = model.init_from_lm(pretrained.lm_state(dictionary, langs), pretrained)
    note = (
        f"; as initialised: {len(fresh)} tensors ({', '.join(sorted({f.split('.')[1] for f in fresh}))})"
        if fresh
        else ""
    )
    logger.info(f"initialised from {pretrained.path}{note}")
