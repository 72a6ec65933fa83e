"""``--task xlm_classification``: fine-tune a pretrained XLM on sentence (pair) classification in some
languages and predict in every language it knows (XNLI-style zero-shot transfer)::

    fairseq-train DATA --user-dir xlm_fairseq --task xlm_classification \\
        --pretrained-xlm-checkpoint ckpt/xlm/checkpoint_best.pt --train-langs en --valid-langs en,de \\
        --arch xlm_1024 --batch-size 8 --optimizer adam --lr 2.5e-5 \\
        --best-checkpoint-metric acc_en --maximize-best-checkpoint-metric

DATA holds ``{split}.{lang}.tsv`` files (``preprocess/classification.py``: ``id``, ``label``, ``text``
and, for pairs, ``text_b``). Rows are fed as XLM's XNLI code feeds them (``data/classification.py``)
to the pretrained stack, and XLM's head (dropout, linear) reads the first position.

Where the vocabulary and text pipeline come from: with ``--pretrained-xlm-checkpoint``, from that
model (a ``dict.txt`` or ``text_pipeline.json`` in DATA that differs from it is an error); without
it (random initialisation), from DATA itself (a data-bin's ``dict.txt``, ``text_pipeline.json`` and
subword model placed beside the TSVs). The label set is the sorted labels of the training files.
Every checkpoint carries the dictionary, the text pipeline with its subword model, the languages
and the labels (fairseq's ``task_state``), so ``XLMModel.from_pretrained(SAVE_DIR,
checkpoint_file=...)`` needs nothing else.

Validation logs ``acc_{lang}`` for every ``--valid-langs`` language and ``acc``, their mean; each
works with ``--best-checkpoint-metric`` (with ``--maximize-best-checkpoint-metric``).
"""

import logging
import os
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

from fairseq.data import Dictionary
from fairseq.tasks import register_task

from preprocess.classification import read_tsv, split_langs, tsv_path
from preprocess.langs import parse_langs
from preprocess.layout import DICT_FILE
from preprocess.pipeline import PipelineSettings, read_settings, restore_subword_model, subword_model_state
from xlm_fairseq.assets import ModelAssets, PretrainedCheckpoint
from xlm_fairseq.data.classification import SentenceClassificationDataset, encode_row
from xlm_fairseq.data.dictionary import dictionary_from_state, dictionary_to_state, load_dictionary
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.tasks.base import XLMDataConfig, XLMDataTask

logger = logging.getLogger(__name__)

# what a checkpoint of this task carries besides its weights (fairseq's task_state)
CARRIED = ("langs", "dictionary", "text_pipeline", "subword_model", "labels", "pairs")


@dataclass
class XLMClassificationConfig(XLMDataConfig):
    train_langs: str = field(
        default="", metadata={"help": "languages whose train.{lang}.tsv is learnt; default: every train.*.tsv"}
    )
    valid_langs: str = field(
        default="",
        metadata={
            "help": "languages validated: acc_{lang} each, and acc, their mean; default: every "
            "{split}.{lang}.tsv of a language of the model"
        },
    )
    finetune_layers: str = field(
        default="0:_1",
        metadata={
            "help": "layers fine-tuned (XLM --finetune_layers): 0 = embeddings, k = layer k, _k = k-th from the "
            "end; 0:_1 = all, 4:_1 = layer 4 to the last (the rest frozen); the head is always trained"
        },
    )
    lang_id: str = field(
        default="own",
        metadata={
            "help": "the language id of every row: own = each row its own language's (XLM), or a language (e.g. "
            "en) given to every row whatever its language: a classifier fine-tuned on one language has seen "
            "only its language embedding, and a small LM transfers far better when the other languages are "
            "read with the fine-tuning language's id (recipes/README.md, xcls)"
        },
    )
    truncate_len: int = field(
        default=256,
        metadata={
            "help": "training sentences are cut to this many tokens with their two </s> (XLM --max_len: 254 "
            "subwords kept at 256); validation and prediction read whole sentences"
        },
    )
    group_by_length: bool = field(
        default=False,
        metadata={
            "help": "training batches of rows of similar length (less padding; fairseq's sentence_prediction); "
            "default: random rows, as XLM (labels may correlate with length, as MNLI's do)"
        },
    )


@register_task("xlm_classification", dataclass=XLMClassificationConfig)
class XLMClassificationTask(XLMDataTask):
    cfg: XLMClassificationConfig
    criterion_name = "xlm_sentence_classification"
    model_kind = "classifier"

    def __init__(self, cfg: XLMClassificationConfig):
        self._pretrained = None
        self.model_positions = 512  # set by build_model
        self._training = None  # (labels, pairs) of the training files, read once
        parse_langs(cfg.langs or "", "--langs")  # checked now, used by find_langs
        super().__init__(cfg, None)  # the languages and dictionary are resolved on first use (see CARRIED)
        self.state.add_factory("dictionary", lambda: dictionary_to_state(self._find_dictionary()))
        self.state.add_factory("text_pipeline", lambda: self._find_pipeline_settings().to_dict())
        self.state.add_factory("subword_model", lambda: subword_model_state(self.require_pipeline()))
        self.state.add_factory("labels", lambda: self._training_data()[0])
        self.state.add_factory("pairs", lambda: self._training_data()[1])

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        return cls(cfg)

    def model_lang_id(self, lang: str) -> int:
        """The language id that rows in ``lang`` are given (``--lang-id``)."""
        chosen = getattr(self.cfg, "lang_id", "own")  # a checkpoint from before the option: own
        if chosen in ("own", "", None):
            return self.lang2id[lang]
        if chosen not in self.lang2id:
            raise XLMUserError(
                f"--lang-id {chosen}: not 'own' or one of the model's languages ({','.join(self.langs)})"
            )
        return self.lang2id[chosen]

    def find_langs(self) -> List[str]:
        """--langs, else the pretrained model's, else those of the TSV files."""
        if self.cfg.langs:
            return parse_langs(self.cfg.langs, "--langs")
        if self.cfg.pretrained_xlm_checkpoint:
            return self.pretrained.langs
        return self._data_langs()

    # ---- what the model carries -------------------------------------------------------------

    @property
    def pretrained(self):
        if self._pretrained is None:
            self._pretrained = PretrainedCheckpoint(self.cfg.pretrained_xlm_checkpoint)
        return self._pretrained

    @property
    def dictionary(self) -> Dictionary:
        if self._dictionary is None:
            self._dictionary = dictionary_from_state(self.state.dictionary)
        return self._dictionary

    @property
    def labels(self) -> List[str]:
        return list(self.state.labels)

    @property
    def num_classes(self) -> int:
        return len(self.labels)

    @property
    def pairs(self) -> bool:
        """Whether rows are sentence pairs (``text_b``), as the training files were."""
        return bool(self.state.pairs)

    def _data_file(self, name: str) -> Optional[str]:
        path = os.path.join(self.data_dir, name)
        return path if os.path.isfile(path) else None

    @property
    def source_assets(self) -> ModelAssets:
        """Where the model's dictionary and text pipeline come from: the pretrained model's (what it
        carries, then beside it, then its data-bin), else (random initialisation) the data directory's."""
        if self.cfg.pretrained_xlm_checkpoint:
            return self.pretrained.assets
        return ModelAssets({}, [self.data_dir], self.data_dir)

    def _find_dictionary(self) -> Dictionary:
        theirs, _ = self.source_assets.dictionary()
        if not self.cfg.pretrained_xlm_checkpoint:
            if theirs is None:
                raise XLMUserError(
                    f"{self.data_dir}: no {DICT_FILE}; give --pretrained-xlm-checkpoint, or (random initialisation) "
                    "place a data-bin's dict.txt, text_pipeline.json and subword model beside the TSV files"
                )
            return theirs
        if theirs is None:
            raise XLMUserError(f"{self.pretrained.path}: no {DICT_FILE} beside it or in its data-bin")
        mine = self._data_file(DICT_FILE)
        if mine is not None:
            remedy = f"the pretrained model's vocabulary is used: remove {DICT_FILE} from {self.data_dir}"
            self.pretrained.assets.check_dictionary(load_dictionary(mine), mine, self.pretrained.embedding_rows, remedy)
        return theirs

    def _find_pipeline_settings(self) -> PipelineSettings:
        theirs = self.source_assets.pipeline_settings()
        if not self.cfg.pretrained_xlm_checkpoint:
            if theirs is None:
                raise XLMUserError(f"{self.data_dir}: no text_pipeline.json (a data-bin's, with its subword model)")
            return theirs
        if theirs is None:
            raise XLMUserError(f"{self.pretrained.path}: no text pipeline in it, beside it or in its data-bin")
        mine = read_settings(self.data_dir) if os.path.isdir(self.data_dir) else None
        if mine is not None and mine != theirs:
            raise XLMUserError(
                f"{self.data_dir}: its text pipeline ({mine.subwords}, {mine.subword_model}) differs from that of "
                "--pretrained-xlm-checkpoint, which is used: remove text_pipeline.json from the data directory"
            )
        return theirs

    def text_pipeline(self, model_dirs: Sequence[str] = ()):
        """The pipeline of the model; its subword model from the checkpoint itself, else the
        pretrained model's directories, else the data directory."""
        if "subword_model" in self.state.state_dict:  # carried: a loaded or a built model
            extra = [restore_subword_model(self.state.subword_model, "the checkpoint")]
        else:
            extra = self.source_assets.subword_dirs()
        return super().text_pipeline([*model_dirs, *extra])

    def require_pipeline(self):
        pipeline = self.text_pipeline()
        if pipeline is None:
            raise XLMUserError(f"no text pipeline for the model in {self.data_dir}")
        return pipeline

    # ---- data -----------------------------------------------------------------------------

    def _data_langs(self) -> List[str]:
        langs = set(parse_langs(self.cfg.train_langs, "--train-langs")) | set(
            parse_langs(self.cfg.valid_langs, "--valid-langs")
        )
        langs |= set(split_langs(self.data_dir, "train")) | set(split_langs(self.data_dir, "valid"))
        if not langs:
            raise XLMUserError(f"{self.data_dir}: no train.{{lang}}.tsv or valid.{{lang}}.tsv files")
        return sorted(langs)

    def split_langs(self, split: str) -> List[str]:
        """The languages of ``split``: --train-langs / --valid-langs, else every file of a model language."""
        option = "--train-langs" if split == "train" else "--valid-langs"
        given = parse_langs(self.cfg.train_langs if split == "train" else self.cfg.valid_langs, option)
        for lang in given:
            if lang not in self.lang2id:
                raise XLMUserError(f"{option}: language '{lang}' is not one of the model's: {','.join(self.langs)}")
            if not os.path.isfile(tsv_path(self.data_dir, split, lang)):
                raise XLMUserError(f"{tsv_path(self.data_dir, split, lang)}: no such file ({option} {lang})")
        if given:
            return given
        found = split_langs(self.data_dir, split)
        unknown = [lang for lang in found if lang not in self.lang2id]
        if unknown and split == "train":
            raise XLMUserError(
                f"{tsv_path(self.data_dir, split, unknown[0])}: language '{unknown[0]}' is not one of the model's "
                f"({','.join(self.langs)}); give --train-langs"
            )
        if unknown:
            logger.info(f"{split}: {','.join(unknown)} left out (not languages of the model)")
        return [lang for lang in found if lang in self.lang2id]

    def _training_data(self) -> Tuple[List[str], bool]:
        """(the sorted labels of the training files, whether their rows are sentence pairs)."""
        if self._training is None:
            labels, pairs = set(), set()
            for lang in self.split_langs("train"):
                rows = read_tsv(tsv_path(self.data_dir, "train", lang))
                labels.update(rows.labels)
                pairs.add(rows.is_pair)
            if not labels:
                raise XLMUserError(f"{self.data_dir}: no train.{{lang}}.tsv to learn the labels from")
            if len(labels) < 2:
                raise XLMUserError(f"{self.data_dir}: the training files have one label only ({labels.pop()})")
            if len(pairs) > 1:
                raise XLMUserError(f"{self.data_dir}: some train.*.tsv have a text_b column and some do not")
            self._training = (sorted(labels), pairs.pop())
        return self._training

    def encode_rows(
        self, texts: Sequence[str], texts_b: Optional[Sequence[str]], lang: str, training: bool = False
    ) -> Tuple[list, int]:
        """Raw text (pairs when ``texts_b``) in ``lang`` -> (token rows, how many were truncated).
        Training rows are cut to --truncate-len (XLM truncates in training only); every row to
        the model's positions."""
        pipeline, d = self.require_pipeline(), self.dictionary
        max_positions = self.model_positions
        max_len = self.cfg.truncate_len if training else None
        rows, truncated = [], 0
        for i, text in enumerate(texts):
            ids_a = [d.index(p) for p in pipeline.pieces(text, lang)]
            ids_b = None if texts_b is None else [d.index(p) for p in pipeline.pieces(texts_b[i], lang)]
            row, cut = encode_row(ids_a, ids_b, d.eos(), max_len, max_positions)
            rows.append(row)
            truncated += cut
        return rows, truncated

    def label_ids(self, labels: Sequence[str], path: str) -> List[int]:
        index = {label: i for i, label in enumerate(self.labels)}
        for i, label in enumerate(labels):
            if label not in index:
                raise XLMUserError(
                    f"{path}: row {i + 1}: label '{label}' is not one of the training labels ({','.join(self.labels)})"
                )
        return [index[label] for label in labels]

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        langs = self.split_langs(split)
        if not langs:
            raise XLMUserError(
                f"{self.data_dir}: no {split}.{{lang}}.tsv for the model's languages ({','.join(self.langs)})"
                + ("" if split == "train" else "; give --disable-validation to train without")
            )
        rows, row_langs, model_langs, labels = [], [], [], []
        for lang in langs:
            path = tsv_path(self.data_dir, split, lang)
            data = read_tsv(path)
            if data.is_pair != self.pairs:
                mine, theirs = ("a", "do not") if data.is_pair else ("no", "do")
                raise XLMUserError(f"{path}: has {mine} text_b column (sentence pairs), the training files {theirs}")
            encoded, truncated = self.encode_rows(data.texts, data.texts_b, lang, training=split == "train")
            rows += encoded
            row_langs += [self.lang2id[lang]] * len(encoded)
            model_langs += [self.model_lang_id(lang)] * len(encoded)
            labels += self.label_ids(data.labels, path)
            limit = f"--truncate-len {self.cfg.truncate_len}" if split == "train" else "the model's positions"
            note = f", {truncated} truncated to {limit}" if truncated else ""
            logger.info(f"{split} {lang}: {len(encoded)} rows{note} from {path}")
        self.datasets[split] = SentenceClassificationDataset(
            rows,
            row_langs,
            labels,
            self.dictionary.pad(),
            shuffle=split == "train",
            seed=self.cfg.seed,
            group_by_length=self.cfg.group_by_length,
            model_langs=model_langs,
        )

    # ---- model ----------------------------------------------------------------------------

    def build_model(self, cfg, from_checkpoint=False):
        for name in CARRIED:  # evaluated now, so that every checkpoint carries them
            getattr(self.state, name)
        self.model_lang_id(self.langs[0])  # a bad --lang-id fails before training
        model = super().build_model(cfg, from_checkpoint)
        self.model_positions = model.encoder.max_positions()  # rows are cut to fit it
        trained = model.freeze_outside(self.cfg.finetune_layers)
        total = sum(p.numel() for p in model.parameters())
        logger.info(f"--finetune-layers {self.cfg.finetune_layers}: {trained} of {total} parameters trained")
        self._pretrained = None  # its tensors are no longer needed
        return model

    def max_positions(self):
        return None  # the model's: rows are truncated to fit it
