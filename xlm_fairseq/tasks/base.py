"""What every XLM task shares: one dictionary, a language list, the text pipeline, what checkpoints carry
and their own criterion (:class:`XLMDataTask`); the pretraining and translation tasks build on it with
their objectives (``objective_task.py``)."""

import logging
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Union

import torch
from fairseq.data import Dictionary, data_utils, indexed_dataset
from fairseq.dataclass import FairseqDataclass
from fairseq.tasks import FairseqTask
from omegaconf import II

from preprocess.errors import UserError
from preprocess.langs import parse_langs
from preprocess.layout import DICT_FILE, MASK_SYMBOL
from preprocess.pipeline import (
    TextPipeline,
    read_settings,
    subword_model_state,
)
from xlm_fairseq.assets import ModelAssets, init_from_lm
from xlm_fairseq.cpu_threads import IdleCoreThreads
from xlm_fairseq.data.data_bin import (
    check_shards_agree,
    data_shards,
    dictionary_may_come_later,
    load_data_bin_dictionary,
)
from xlm_fairseq.data.dictionary import dictionary_digest, dictionary_to_state
from xlm_fairseq.errors import XLMUserError

logger = logging.getLogger(__name__)


@dataclass
class XLMDataConfig(FairseqDataclass):
    """Options every XLM task shares."""

    data: str = field(
        default="",
        metadata={"help": "data-bin made by preprocess/ (dict.txt, {split}.{lang}, {split}.{src}-{tgt}.{lang})"},
    )
    langs: str = field(
        default="",
        metadata={"help": "comma-separated languages; their order fixes the language ids (XLM sorts its --lgs)"},
    )
    pretrained_xlm_checkpoint: str = field(
        default="", metadata={"help": "start from this LM (our .pt, or a converter OUT_DIR)"}
    )
    seed: int = II("common.seed")
    bf16: bool = II("common.bf16")
    no_tf32: bool = field(
        default=False,
        metadata={"help": "fp32 matmuls in full fp32 under CUDA (default: TF32 tensor cores, as on Ampere and later)"},
    )
    fixed_cpu_threads: bool = field(
        default=False,
        metadata={
            "help": "on a CPU, keep torch's thread count (default, when training or decoding: fewer threads while "
            "other processes keep cores busy, back up when they are idle again; never more than at the start)"
        },
    )


class XLMDataTask(FairseqTask):
    """Base of every XLM task: the data-bin's dictionary (or the loaded checkpoint's), the language
    list, the text pipeline, what checkpoints carry (fairseq's ``task_state``), and the task's own
    criterion."""

    criterion_name = "xlm_cross_entropy"
    model_kind = "lm"  # what xlm_transformer builds for the task: "lm", "translation" or "classifier"

    def __init__(self, cfg, dictionary: Optional[Dictionary]):
        super().__init__(cfg)
        self._dictionary = dictionary
        # the language list, in one store: what checkpoints carry (fairseq's task_state), so that
        # fairseq-generate / -interactive (which set up the task from the command line) know the
        # language ids of a model; --langs until a loaded checkpoint gives its own
        self.state.add_factory("langs", self.find_langs)
        # the data-bin's text pipeline, saved in every checkpoint (fairseq's task_state) and put
        # back by fairseq when a checkpoint is loaded, so that a model keeps its own pipeline
        self.state.add_factory("text_pipeline", self._data_pipeline_settings)
        # what the model's embedding rows mean: a checkpoint's (fairseq-generate, the hub) is checked
        # against the dictionary it is used with, in build_model
        self.state.add_factory("dictionary_sha256", lambda: dictionary_digest(self.dictionary))
        # the dictionary and the subword model themselves, so that a checkpoint copied alone is a
        # whole model: fairseq-interactive, the hub and --pretrained-xlm-checkpoint need no data-bin
        self.state.add_factory("dictionary", lambda: dictionary_to_state(self.dictionary))
        self.state.add_factory("subword_model", self._subword_model_state)
        self._pipeline_cache = None
        self._cpu_threads: Union[IdleCoreThreads, bool, None] = None  # False: threads left alone
        self.langs_known()

    @property
    def dictionary(self) -> Dictionary:
        if self._dictionary is None:  # no dict.txt in DATA: the loaded checkpoint's, if it carries one
            if not self.state.state_dict.get("dictionary"):
                load_data_bin_dictionary(self.cfg.data)  # raises: names DATA's dict.txt
            self._dictionary, _ = ModelAssets(self.state.state_dict, [], "the checkpoint").dictionary()
        return self._dictionary

    def _subword_model_state(self) -> Optional[dict]:
        try:
            pipeline = self.text_pipeline()
        except UserError:  # a data-bin without its subword model: the checkpoint carries none either
            return None
        return subword_model_state(pipeline) if pipeline is not None else None

    def optimizer_step(self, optimizer, model, update_num):
        super().optimizer_step(optimizer, model, update_num)
        self.follow_idle_cores(model)

    def follow_idle_cores(self, model) -> None:
        """On a CPU, torch's thread count follows the cores other processes leave idle
        (xlm_fairseq/cpu_threads.py); called once per update and once per decoded batch."""
        if self._cpu_threads is None and not getattr(self.cfg, "fixed_cpu_threads", False):
            on_cpu = next(model.parameters()).device.type == "cpu"
            self._cpu_threads = IdleCoreThreads() if on_cpu else False
        if self._cpu_threads:
            self._cpu_threads.follow()

    def build_model(self, cfg, from_checkpoint=False):
        source = getattr(self.dictionary, "source_file", None) or os.path.join(self.data_dir, DICT_FILE)
        # what a loaded checkpoint's task_state carries (generate, the hub); a new model's is its own
        ModelAssets(self.state.state_dict, [], "the model").check_dictionary(self.dictionary, source)
        for carried in ("dictionary_sha256", "dictionary", "subword_model"):  # computed now: checkpoints carry them
            getattr(self.state, carried)
        model = super().build_model(cfg, from_checkpoint)
        self.state.langs  # what checkpoints carry: computed now, from the list the model was built with
        if self.cfg.pretrained_xlm_checkpoint and not from_checkpoint:
            # a task that already read the checkpoint (classification: its dictionary and pipeline) passes it
            pretrained = getattr(self, "pretrained", None) or self.cfg.pretrained_xlm_checkpoint
            init_from_lm(model, pretrained, self.dictionary, self.langs)
        # fairseq-train casts the model for --bf16, fairseq-generate/-interactive only for --fp16
        return model.to(torch.bfloat16) if getattr(self.cfg, "bf16", False) else model

    @property
    def mask_idx(self) -> int:
        return self.dictionary.index(MASK_SYMBOL)

    @property
    def data_dir(self) -> str:
        return data_shards(self.cfg.data)[0]

    def _data_pipeline_settings(self) -> Optional[dict]:
        settings = read_settings(self.data_dir) if os.path.isdir(self.data_dir) else None
        return settings.to_dict() if settings is not None else None

    def text_pipeline(self, model_dirs: Sequence[str] = ()) -> Optional[TextPipeline]:
        """The model's text pipeline (``preprocess/pipeline.py``), its subword model looked up in
        ``model_dirs``, then the data-bin; None for a data-bin that describes none."""
        stored = self.state.text_pipeline
        key = (repr(stored), tuple(model_dirs))
        if self._pipeline_cache is None or self._pipeline_cache[0] != key:
            # a loaded checkpoint's subword model (never a factory call), then the data-bin's
            carried = {"text_pipeline": stored, "subword_model": self.state.state_dict.get("subword_model")}
            assets = ModelAssets(carried, [self.data_dir], "the checkpoint")
            self._pipeline_cache = (key, assets.pipeline(first_dirs=model_dirs))
        return self._pipeline_cache[1]

    def build_tokenizer(self, cfg):
        """Without ``--tokenizer`` (or with ``--tokenizer xlm``): the words of the model's own
        pipeline, so fairseq-interactive/-generate tokenise as preprocess/ did."""
        from xlm_fairseq.data.encoders import XLMWordTokenizer

        if cfg is not None and getattr(cfg, "_name", None) not in (None, XLMWordTokenizer.name):
            return super().build_tokenizer(cfg)
        pipeline = self.text_pipeline()
        if pipeline is None:
            return None
        source, target = getattr(self.cfg, "source_lang", None), getattr(self.cfg, "target_lang", None)
        return XLMWordTokenizer.for_pipeline(pipeline, source, target)

    def build_bpe(self, cfg):
        """Without ``--bpe`` (or with ``--bpe xlm``): the subwords of the model's own pipeline."""
        from xlm_fairseq.data.encoders import XLMSubwords

        if cfg is not None and getattr(cfg, "_name", None) not in (None, XLMSubwords.name):
            return super().build_bpe(cfg)
        pipeline = self.text_pipeline()
        return None if pipeline is None else XLMSubwords.for_pipeline(pipeline)

    def find_langs(self) -> List[str]:
        """The language list of a task no checkpoint has given one: --langs."""
        return parse_langs(self.cfg.langs or "", "--langs")

    @property
    def langs(self) -> List[str]:
        """The languages, in the order of their ids."""
        return list(self.state.langs)

    @property
    def lang2id(self) -> Dict[str, int]:
        return {lang: i for i, lang in enumerate(self.state.langs)}

    def langs_known(self) -> None:
        """Make what depends on the language list: called when the task is made, and again when a loaded
        checkpoint brings another list (fairseq-generate: the model's, with --langs left out)."""

    def load_state_dict(self, state_dict):
        """A loaded checkpoint's ``task_state`` (fairseq-generate, -interactive, the hub: before the model
        is built): its language list is the task's, which --langs may only repeat."""
        carried = list(state_dict.get("langs") or [])
        given = parse_langs(self.cfg.langs or "", "--langs")
        if carried and given and given != carried:
            # language ids are positions in the list: another order translates with the wrong embeddings
            raise XLMUserError(
                f"--langs {','.join(given)} is not the model's language list {','.join(carried)}; "
                "leave --langs out, or give that list in that order"
            )
        before = self.state.state_dict.get("langs")
        super().load_state_dict({k: v for k, v in state_dict.items() if k != "langs" or carried})
        if carried and carried != before:
            self.langs_known()

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        dictionary = None
        if not dictionary_may_come_later(cfg.data):
            dictionary = load_data_bin_dictionary(cfg.data)
            check_shards_agree(cfg.data, dictionary)
            shards = len(data_shards(cfg.data))
            logger.info(f"dictionary: {len(dictionary)} types" + (f"; {shards} shards" if shards > 1 else ""))
        task = cls(cfg, dictionary)
        task.state.text_pipeline  # read now: a bad text_pipeline.json fails before training starts
        return task

    @property
    def source_dictionary(self):
        return self.dictionary

    @property
    def target_dictionary(self):
        return self.dictionary

    def shard_dir(self, split: str, epoch: int = 1) -> str:
        """Where ``split`` is read in ``epoch``: with ``DATA1:DATA2:...`` the training data of epoch k
        from shard (k - 1) mod n, as fairseq's translation tasks read it; valid and test from the first."""
        shards = data_shards(self.cfg.data)
        return shards[(epoch - 1) % len(shards)] if split == "train" else shards[0]

    def data_path(self, split: str, name: str, epoch: int = 1) -> str:
        """The data-bin prefix of ``{split}.{name}`` read in ``epoch``."""
        return os.path.join(self.shard_dir(split, epoch), f"{split}.{name}")

    def load_indexed(self, path: str):
        """The binarised data at ``path`` (without .bin/.idx); None when there is none."""
        return data_utils.load_indexed_dataset(path, self.dictionary, combine=False)

    def pair_datasets(self, split, a, b, epoch=1):
        """Parallel data of a and b, stored as {split}.{x}-{y}.{lang} in either order: (a's, b's, the
        prefix of a's file); (None, None, where it was looked for) when there is none."""
        for x, y in sorted({(a, b), (b, a)}):
            prefix = self.data_path(split, f"{x}-{y}", epoch)
            if indexed_dataset.dataset_exists(f"{prefix}.{a}", impl="mmap"):
                return self.load_indexed(f"{prefix}.{a}"), self.load_indexed(f"{prefix}.{b}"), f"{prefix}.{a}"
        return None, None, self.data_path(split, f"{min(a, b)}-{max(a, b)}.{a}", epoch)

    def build_criterion(self, cfg):
        """The task brings its own loss: ``--criterion`` may be left out (fairseq then passes its
        default, cross_entropy); anything else is refused rather than silently ignored."""
        from xlm_fairseq.criterions import build_task_criterion

        return build_task_criterion(self, cfg)
