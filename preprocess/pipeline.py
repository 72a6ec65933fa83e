"""The text pipeline, one object: raw text -> words (:func:`preprocess.text.tokenize`) -> subwords
(:mod:`preprocess.subwords`) -> the pieces of ``dict.txt``, and back. Pure Python; no torch or fairseq.

Its settings are written once, by ``preprocess/`` (or the converter), to ``text_pipeline.json``
beside ``dict.txt``; training copies them into every checkpoint (fairseq's ``task_state``), so the
hub, ``fairseq-generate``/``fairseq-interactive``, validation BLEU and the recipes all tokenise as
the data-bin was tokenised::

    {"format": 1, "subwords": "sentencepiece", "subword_model": "spm.model",
     "subword_sha256": "...", "ro_remove_diacritics": false, "lowercase_and_remove_accent": false,
     "segmenters": {"zh": "jieba"}}

``segmenters``: the languages whose words a segmenter cuts instead of Moses (:mod:`preprocess.segment`).

The subword model file is looked up by name in the model and data directories and checked against
its digest, so a checkpoint never runs with another data-bin's vocabulary."""

import base64
import dataclasses
import json
import os
from typing import Dict, List, Optional, Sequence

from preprocess import layout
from preprocess.errors import UserError
from preprocess.files import atomic_write, file_sha256
from preprocess.segment import check_segmenters
from preprocess.subwords import SUBWORD_MODELS
from preprocess.text import detokenize, tokenize

PIPELINE_FORMAT = 1


@dataclasses.dataclass(frozen=True)
class PipelineSettings:
    subwords: str  # a key of SUBWORD_MODELS
    subword_model: str  # its file name, in the model or data directory
    subword_sha256: Optional[str] = None  # None: not known (a converted model given no codes file)
    ro_remove_diacritics: bool = False
    lowercase_and_remove_accent: bool = False
    segmenters: Dict[str, str] = dataclasses.field(default_factory=dict)  # lang -> preprocess.segment name

    def to_dict(self) -> dict:
        return {"format": PIPELINE_FORMAT, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, value, what: str) -> "PipelineSettings":
        if not isinstance(value, dict) or value.get("format") != PIPELINE_FORMAT:
            raise UserError(f"{what}: not a text pipeline of format {PIPELINE_FORMAT}")
        fields = {f.name for f in dataclasses.fields(cls)}
        try:
            settings = cls(**{k: v for k, v in value.items() if k in fields})
        except TypeError as e:
            raise UserError(f"{what}: {e}") from None
        if settings.subwords not in SUBWORD_MODELS:
            raise UserError(f"{what}: unknown subwords {settings.subwords!r} (one of {', '.join(SUBWORD_MODELS)})")
        if os.path.basename(str(settings.subword_model)) != settings.subword_model:
            raise UserError(f"{what}: subword_model must be a file name, got {settings.subword_model!r}")
        check_segmenters(settings.segmenters, what)
        return settings


def write_settings(directory: str, settings: PipelineSettings) -> str:
    path = os.path.join(directory, layout.PIPELINE_FILE)
    with atomic_write(path) as f:
        json.dump(settings.to_dict(), f, indent=2, sort_keys=True)
        f.write("\n")
    return path


def _read_json(path: str, what: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: cannot read {what} ({e})") from None


def read_settings(directory: str) -> Optional[PipelineSettings]:
    """The settings a data-bin or model directory stores, or None if it describes no pipeline."""
    path = os.path.join(directory, layout.PIPELINE_FILE)
    if os.path.isfile(path):
        return PipelineSettings.from_dict(_read_json(path, "the text pipeline"), path)
    if os.path.isfile(os.path.join(directory, layout.SPM_MODEL_FILE)):
        # a directory with spm.model and no settings (a training checkpoint's dir beside its data-bin's
        # files): sentencepiece, with the manifest's Romanian option
        manifest_path = os.path.join(directory, layout.MANIFEST_FILE)
        manifest = _read_json(manifest_path, "the manifest") if os.path.isfile(manifest_path) else {}
        options = manifest.get("options") if isinstance(manifest, dict) else None
        options = options if isinstance(options, dict) else {}
        return PipelineSettings(
            subwords="sentencepiece",
            subword_model=layout.SPM_MODEL_FILE,
            ro_remove_diacritics=bool(options.get("ro_remove_diacritics", False)),
        )
    return None


class TextPipeline:
    """Text <-> pieces for one model, in any of its languages."""

    def __init__(self, settings: PipelineSettings, model_path: str):
        self.settings = settings
        self.model_path = model_path
        self.subword_model = SUBWORD_MODELS[settings.subwords](model_path)

    @property
    def kind(self) -> str:
        return self.settings.subwords

    def tokenize(self, text: str, lang: str) -> str:
        """Normalised, Moses-tokenised or segmented (and, if the model was trained so, lowercased) words."""
        s = self.settings
        return tokenize(text, lang, s.ro_remove_diacritics, s.lowercase_and_remove_accent, s.segmenters.get(lang))

    def words(self, text: str, lang: str) -> List[str]:
        return self.tokenize(text, lang).split()

    def split(self, tokenized: str) -> List[str]:
        """Tokenised text -> pieces."""
        return self.subword_model.split(tokenized)

    def pieces(self, text: str, lang: str) -> List[str]:
        return self.split(self.tokenize(text, lang))

    def join(self, pieces: Sequence[str]) -> str:
        """Pieces -> tokenised text (what XLM's multi-bleu scores)."""
        return self.subword_model.join(pieces)

    def join_text(self, text: str) -> str:
        """Space-separated pieces -> tokenised text; text whose pieces were joined already (fairseq's
        ``--post-process``/``--remove-bpe``) passes through unchanged."""
        if self.kind == "sentencepiece" and "\u2581" not in text:
            return text
        return self.join(text.split())

    def detokenize(self, pieces: Sequence[str], lang: str) -> str:
        """Pieces -> text (Moses detokenisation for ``lang``)."""
        return detokenize(self.join(pieces), lang)


def subword_model_state(pipeline: TextPipeline) -> dict:
    """The subword model file itself, to be stored in a checkpoint (a fine-tuned classifier then
    needs no data directory): ``{"file", "sha256", "base64"}``."""
    with open(pipeline.model_path, "rb") as f:
        data = f.read()
    return {
        "file": pipeline.settings.subword_model,
        "sha256": file_sha256(pipeline.model_path),
        "base64": base64.b64encode(data).decode("ascii"),
    }


def restore_subword_model(state: dict, what: str) -> str:
    """The directory holding the subword model of :func:`subword_model_state`, written once into
    ``cache_root()/subword_models/SHA256/`` and checked against its digest."""
    try:
        name, digest, data = state["file"], state["sha256"], base64.b64decode(state["base64"])
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(f"{what}: a broken subword model ({e})") from None
    if os.path.basename(name) != name or not name or len(digest) != 64:
        raise UserError(f"{what}: a broken subword model (file {name!r}, sha256 {digest!r})")
    directory = os.path.join(layout.cache_root(), "subword_models", digest)
    path = os.path.join(directory, name)
    if not (os.path.isfile(path) and file_sha256(path) == digest):
        with atomic_write(path, binary=True) as f:
            f.write(data)
        if file_sha256(path) != digest:
            os.unlink(path)
            raise UserError(f"{what}: its subword model does not match its sha256 {digest}")
    return directory


def require_pipeline(directory: str, option: str) -> TextPipeline:
    """The pipeline that ``directory`` (given as ``option``) describes; refused if it describes none."""
    pipeline = load_pipeline([directory]) if directory else None
    if pipeline is None:
        raise UserError(f"{option} {directory or '(none)'}: no {layout.PIPELINE_FILE} (a data-bin made by preprocess/)")
    return pipeline


def load_pipeline(dirs: Sequence[Optional[str]], settings: Optional[PipelineSettings] = None) -> Optional[TextPipeline]:
    """The pipeline of ``settings`` (from a checkpoint), or of the first directory that stores
    settings; its subword model is looked up in ``dirs`` in order and checked against its digest.
    None if nothing describes a pipeline; UserError if the subword model is missing or differs."""
    dirs = list(dict.fromkeys(os.path.abspath(d) for d in dirs if d and os.path.isdir(d)))
    if settings is None:
        settings = next((s for s in map(read_settings, dirs) if s is not None), None)
        if settings is None:
            return None
    wrong = None
    for d in dirs:
        path = os.path.join(d, settings.subword_model)
        if not os.path.isfile(path):
            continue
        if settings.subword_sha256 and file_sha256(path) != settings.subword_sha256:
            wrong = path
            continue
        return TextPipeline(settings, path)
    if wrong is not None:
        raise UserError(
            f"{wrong}: not the {settings.subwords} model this model was trained with (its sha256 differs); "
            "give the data-bin or model directory it was trained with"
        )
    where = ", ".join(dirs) or "no directory"
    if settings.subwords == "xlm_bpe":
        raise UserError(
            f"no {settings.subword_model} in {where}; "
            "copy the model's released BPE codes file there (see its README.md)"
        )
    raise UserError(f"no {settings.subword_model} in {where}: the text pipeline needs it")
