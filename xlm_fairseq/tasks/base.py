"""What the XLM tasks share: one dictionary, a language list, their own criterion, objective loops."""

import contextlib
import logging
import os
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch
from fairseq.data import Dictionary, data_utils, indexed_dataset
from fairseq.dataclass import FairseqDataclass
from fairseq.distributed import utils as distributed_utils
from fairseq.models import BaseFairseqModel
from fairseq.optim.amp_optimizer import AMPOptimizer
from fairseq.tasks import FairseqTask
from fairseq.tasks.online_backtranslation import PiecewiseLinearFn
from omegaconf import II

from preprocess.errors import UserError
from preprocess.langs import parse_langs
from preprocess.layout import DICT_FILE, MASK_SYMBOL
from preprocess.pipeline import (
    PipelineSettings,
    TextPipeline,
    load_pipeline,
    read_settings,
    restore_subword_model,
    subword_model_state,
)
from xlm_fairseq.data.dictionary import (
    dictionary_digest,
    dictionary_from_state,
    dictionary_may_come_later,
    dictionary_to_state,
    load_data_bin_dictionary,
)
from xlm_fairseq.distributed.rank_agreement import agree_on_failure
from xlm_fairseq.errors import XLMUserError

logger = logging.getLogger(__name__)

MAX_DRAWS_PER_FAMILY = 5  # XLM's shuf_order(n=5): objectives drawn per family and iteration


def lambda_schedule(value: str, option: str = "lambda") -> PiecewiseLinearFn:
    """'1' -> constant 1; '0:1,100000:0.1,300000:0' -> piecewise linear through those points, constant
    after the last (XLM's ``get_lambda_value``; fairseq's online_backtranslation schedule)."""
    value = str(value).strip()
    try:
        schedule = PiecewiseLinearFn.from_string(value)
    except ValueError:
        raise XLMUserError(
            f"--{option}: cannot parse '{value}' (a number, or updates:value pairs like 0:1,100000:0.1)"
        ) from None
    steps = [x for x, _ in schedule.pieces]
    if steps[0] != 0 or steps != sorted(set(steps)):
        raise XLMUserError(f"--{option}: schedule '{value}' must start at 0 and increase")
    if min(y for _, y in schedule.pieces) < 0:
        raise XLMUserError(f"--{option}: schedule '{value}' has a negative weight")
    return schedule


def bare_model(model):
    """The model inside fairseq's distributed wrappers (a ModuleProxyWrapper around a DDP module):
    ``model.module`` alone is still a wrapper under --ddp-backend legacy_ddp."""
    while not isinstance(model, BaseFairseqModel) and hasattr(model, "module"):
        model = model.module
    return model


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


@dataclass
class XLMTaskConfig(XLMDataConfig):
    """Options of the pretraining and translation tasks."""

    max_sentence_len: int = field(
        default=100,
        metadata={"help": "training sentences with more subwords than this on a side are dropped (XLM --max_len)"},
    )
    step_per_objective: bool = field(
        default=False,
        metadata={
            "help": "XLM's loop: every update trains one objective, so each objective gets its own optimiser step, "
            "--clip-norm and LR-schedule step (XLM: --clip-norm 5); "
            "default: one update = one step on the mean of all objectives"
        },
    )


class XLMTask(FairseqTask):
    """Base of ``cross_lingual_lm`` and ``translation_lm``.

    Objectives are scheduled in XLM *iterations*: ``iteration_objectives(i)`` lists the objective
    steps of iteration i in XLM's order. By default one fairseq update is one iteration (every
    listed objective's mean loss back-propagated, one optimiser step on their mean); with
    ``--step-per-objective`` one update is one objective step of the current iteration, exactly
    XLM's loop, and iteration = update // ``iteration_length()``.
    """

    criterion_name = "xlm_cross_entropy"
    model_kind = "lm"  # what xlm_transformer builds for the task: "lm", "translation" or "classifier"

    def __init__(self, cfg, dictionary: Optional[Dictionary]):
        super().__init__(cfg)
        self._dictionary = dictionary
        self.set_langs(cfg.langs)
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

    @property
    def dictionary(self) -> Dictionary:
        if self._dictionary is None:  # no dict.txt in DATA: the loaded checkpoint's, if it carries one
            if not self.state.state_dict.get("dictionary"):
                load_data_bin_dictionary(self.cfg.data)  # raises: names DATA's dict.txt
            self._dictionary = dictionary_from_state(self.state.dictionary)
        return self._dictionary

    def _subword_model_state(self) -> Optional[dict]:
        try:
            pipeline = self.text_pipeline()
        except UserError:  # a data-bin without its subword model: the checkpoint carries none either
            return None
        return subword_model_state(pipeline) if pipeline is not None else None

    def build_model(self, cfg, from_checkpoint=False):
        source = getattr(self.dictionary, "source_file", None) or os.path.join(self.data_dir, DICT_FILE)
        if from_checkpoint and "dictionary_sha256" not in self.state.state_dict:
            logger.warning(
                f"{source}: the checkpoint records no digest of its dictionary (an older xlm-fairseq made it), so "
                "this dictionary is checked by its size only: use the data-bin the model was trained with"
            )
        if self.state.dictionary_sha256 != dictionary_digest(self.dictionary):
            raise XLMUserError(
                f"{source}: not the dictionary the model was trained with ({len(self.dictionary)} types, other "
                "symbols or order); give the data-bin it was trained on, or a model dir made by xlm-fairseq-export"
            )
        self.state.dictionary, self.state.subword_model  # computed now, so that checkpoints carry them
        model = super().build_model(cfg, from_checkpoint)
        # fairseq-train casts the model for --bf16, fairseq-generate/-interactive only for --fp16
        return model.to(torch.bfloat16) if getattr(self.cfg, "bf16", False) else model

    @property
    def mask_idx(self) -> int:
        return self.dictionary.index(MASK_SYMBOL)

    @property
    def data_dir(self) -> str:
        return self.cfg.data.split(os.pathsep)[0]

    def _data_pipeline_settings(self) -> Optional[dict]:
        settings = read_settings(self.data_dir) if os.path.isdir(self.data_dir) else None
        return settings.to_dict() if settings is not None else None

    def text_pipeline(self, model_dirs: Sequence[str] = ()) -> Optional[TextPipeline]:
        """The model's text pipeline (``preprocess/pipeline.py``), its subword model looked up in
        ``model_dirs``, then the data-bin; None for a data-bin that describes none."""
        stored = self.state.text_pipeline
        key = (repr(stored), tuple(model_dirs))
        if self._pipeline_cache is None or self._pipeline_cache[0] != key:
            settings = PipelineSettings.from_dict(stored, "the checkpoint's text pipeline") if stored else None
            carried = self.state.state_dict.get("subword_model")  # a loaded checkpoint's (never a factory call)
            if carried:
                model_dirs = [*model_dirs, restore_subword_model(carried, "the checkpoint")]
            self._pipeline_cache = (key, load_pipeline([*model_dirs, self.data_dir], settings))
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

    def set_langs(self, langs: str):
        self.langs: List[str] = parse_langs(langs or "", "--langs")
        self.lang2id = {lang: i for i, lang in enumerate(self.langs)}

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        dictionary = None
        if not dictionary_may_come_later(cfg.data):
            dictionary = load_data_bin_dictionary(cfg.data)
            logger.info(f"dictionary: {len(dictionary)} types")
        task = cls(cfg, dictionary)
        task.state.text_pipeline  # read now: a bad text_pipeline.json fails before training starts
        return task

    @property
    def source_dictionary(self):
        return self.dictionary

    @property
    def target_dictionary(self):
        return self.dictionary

    def _path(self, split, name):
        return os.path.join(self.data_dir, f"{split}.{name}")

    def _load(self, path):
        return data_utils.load_indexed_dataset(path, self.dictionary, combine=False)

    def _pair_datasets(self, split, a, b):
        """Parallel data of a and b, stored as {split}.{x}-{y}.{lang} in either order."""
        for x, y in sorted({(a, b), (b, a)}):
            prefix = self._path(split, f"{x}-{y}")
            if indexed_dataset.dataset_exists(f"{prefix}.{a}", impl="mmap"):
                return self._load(f"{prefix}.{a}"), self._load(f"{prefix}.{b}"), f"{prefix}.{a}"
        return None, None, self._path(split, f"{min(a, b)}-{max(a, b)}.{a}")

    # ---- objective schedule ----------------------------------------------------------------

    def iteration_objectives(self, iteration: int) -> List[str]:
        raise NotImplementedError

    def iteration_length(self, iteration: int) -> int:
        """Objective steps of an iteration: those with a weight (XLM's steps of weight 0 return at once)."""
        raise NotImplementedError

    def weight_breaks(self) -> List[int]:
        """Iterations at which an objective's weight may become or stop being 0 (``iteration_length``
        is constant between them)."""
        return []

    def objective_weight(self, key: str, iteration: int) -> float:
        return 1.0

    def iteration_rng(self, iteration: int) -> np.random.RandomState:
        """The same draws on every worker and after a resume."""
        return np.random.RandomState((self.cfg.seed * 1000003 + iteration) % (2**32))

    def locate_update(self, update_num: int) -> Tuple[int, int]:
        """--step-per-objective: (iteration, objective step within it) of an update. Iterations are
        as long as their objectives with a weight, so they shorten when a lambda reaches 0."""
        starts = sorted({0, *(b for b in self.weight_breaks() if b > 0)})
        first_update, idle_from = 0, None
        for start, end in zip(starts, starts[1:] + [None]):
            length = self.iteration_length(start)
            idle_from = (start if idle_from is None else idle_from) if length == 0 else None
            span = None if end is None else (end - start) * length
            if span is None or update_num < first_update + span:
                if length == 0:
                    raise XLMUserError(f"every objective's weight is 0 from iteration {idle_from} on: nothing to train")
                iteration, slot = divmod(update_num - first_update, length)
                return start + iteration, slot
            first_update += span
        raise AssertionError("unreachable")

    def update_objectives(self, update_num: int) -> Tuple[List[str], int]:
        """(objective keys the update trains, in order; its iteration). Objectives of weight 0 are
        left out, as XLM's steps of weight 0 return at once: by default one update is one iteration;
        with --step-per-objective one update is one step of an objective with a weight."""
        if not self.cfg.step_per_objective:
            plan = self.iteration_objectives(update_num)
            return [k for k in plan if self.objective_weight(k, update_num) > 0], update_num
        iteration, slot = self.locate_update(update_num)
        plan = [k for k in self.iteration_objectives(iteration) if self.objective_weight(k, iteration) > 0]
        return plan[slot : slot + 1], iteration

    def build_criterion(self, cfg):
        """The task brings its own loss: ``--criterion`` may be left out (fairseq then passes its
        default, cross_entropy); anything else is refused rather than silently ignored."""
        from xlm_fairseq.criterions import build_task_criterion

        return build_task_criterion(self, cfg)

    def run_objectives(
        self, sample, model, criterion, keys, weights=None, optimizer=None, ignore_grad=False, batch_fn=None
    ):
        """Loss of each objective ``key`` of ``sample`` (times its weight), back-propagated one by one
        when training (so only one objective's graph is alive at a time).

        Objectives weigh the same whatever their batch holds (XLM's mean token loss per objective),
        while what is back-propagated is a *summed* loss, fairseq's convention, which keeps fp16
        gradients where fairseq's loss scaler expects them: each objective's mean loss times one
        size S shared by the update (the first objective's predicted tokens), and S per objective
        returned as the sample size that fairseq divides the gradient by. One objective: exactly
        fairseq's summed loss over its tokens. Under ``--amp`` the forward passes (back-translation
        included) run in autocast, as fairseq's own ``train_step`` does. Under PyTorch's DDP an
        update all-reduces once, in the last objective's backward pass. Data-parallel ranks agree
        whether any objective failed before gradients are all-reduced, so a rank-local failure is a
        ``RankFailure`` on every rank, never a hang."""
        totals = {"loss": 0.0, "size": 0, "common_size": None, "logs": {}}
        amp = isinstance(optimizer, AMPOptimizer)
        device = next(model.parameters()).device
        training = optimizer is not None
        distributed = training and distributed_utils.get_data_parallel_world_size() > 1

        def forward(key):
            batch = sample[key]
            with torch.autocast(device_type=device.type, enabled=amp):
                if batch_fn is not None:
                    batch = batch_fn(key, batch)
                loss, ntokens, log = criterion(model, batch, key=key)
            ntokens = ntokens.clamp(min=1)
            common_size = totals["common_size"] = ntokens if totals["common_size"] is None else totals["common_size"]
            loss = loss * (common_size / ntokens)
            if weights is not None:
                loss = loss * weights[key]
            totals["loss"] += loss.detach()
            totals["size"] += common_size
            for k, v in log.items():
                totals["logs"][k] = totals["logs"].get(k, 0) + v
            return loss

        def backward(loss):
            if training:
                optimizer.backward(loss * 0 if ignore_grad else loss)

        def attempt(work, key):  # under data parallelism a failure waits for the agreement
            try:
                return work(key), None
            except Exception as e:
                if not distributed:
                    raise
                return None, (key, e)

        keys = [key for key in keys if sample.get(key)]
        # PyTorch's DDP all-reduces in the backward pass of a forward run outside no_sync: the
        # gradients of all but the last objective accumulate locally, one all-reduce per update,
        # after the ranks agree. fairseq's legacy_ddp all-reduces after train_step: all runs first.
        reduces_in_backward = training and hasattr(model, "no_sync")
        failure, last_loss = None, None
        with model.no_sync() if reduces_in_backward else contextlib.nullcontext():
            for key in keys[:-1]:
                _, failure = attempt(lambda k: backward(forward(k)), key)
                if failure:
                    break
        if keys and not failure:
            last_loss, failure = attempt(forward, keys[-1])
            if not failure and not reduces_in_backward:
                _, failure = attempt(lambda _: backward(last_loss), keys[-1])
        if distributed:  # no rank enters a gradient all-reduce while another has failed
            agree_on_failure(failure, device)
        if last_loss is not None and reduces_in_backward:
            backward(last_loss)
        return totals["loss"], totals["size"], totals["logs"]
