"""The base of the pretraining and translation tasks: a data task that owns its objectives
(:mod:`xlm_fairseq.objectives`) and XLM's loop over them."""

import functools
import logging
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple, Type

from fairseq import metrics
from fairseq.dataclass import ChoiceEnum
from omegaconf import II

from preprocess.manifest import prepared_langs
from xlm_fairseq.data import ObjectiveZipDataset
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.modules.compiled import COMPILE_MODES
from xlm_fairseq.objectives.base import (
    Built,
    MissingData,
    Objective,
    loop_families,
    objective_options,
    objectives_from_options,
)
from xlm_fairseq.objectives.context import ObjectiveContext
from xlm_fairseq.objectives.keys import ObjectiveKey
from xlm_fairseq.objectives.schedule import XLMLoop
from xlm_fairseq.tasks.base import XLMDataConfig, XLMDataTask
from xlm_fairseq.tasks.step import run_objectives

logger = logging.getLogger(__name__)


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
    compile: bool = field(
        default=False,
        metadata={
            "help": "train the transformer stacks through torch.compile (each compile is logged; decoding, "
            "back-translation and validation stay eager). Pays on a GPU, not on a few CPU cores (bench/README)"
        },
    )
    compile_mode: ChoiceEnum(COMPILE_MODES) = field(
        default="default",
        metadata={"help": "torch.compile's mode with --compile; reduce-overhead adds CUDA graphs"},
    )
    # what fairseq-train will read from every validation: checked when the valid data loads, before training
    best_checkpoint_metric: str = II("checkpoint.best_checkpoint_metric")
    valid_subset: str = II("dataset.valid_subset")
    disable_validation: bool = II("dataset.disable_validation")


class XLMTask(XLMDataTask):
    """Base of ``cross_lingual_lm`` and ``translation_lm``: a data task that owns its objectives (one
    object each, made from the options of ``config_class`` that list them, :mod:`xlm_fairseq.objectives`)
    and XLM's loop over them (``self.loop``). An update: :meth:`train_step` asks the loop which
    objectives it trains, each objective prepares its batch and the criterion gives its loss
    (:func:`~xlm_fairseq.objectives.schedule.run_objectives`)."""

    config_class = XLMTaskConfig

    def langs_known(self):
        # the objectives name languages: known once the languages are (fairseq-generate: from the checkpoint)
        self.objectives: List[Objective] = []
        if self.langs:
            options = objective_options(self.config_class)
            self.objectives = objectives_from_options(self.make_objective, self.cfg, options, self.langs)
        self.loop = XLMLoop(
            self.objectives, loop_families(), self.cfg.seed, self.cfg.step_per_objective, self.sampling_alpha
        )

    @functools.cached_property
    def context(self) -> ObjectiveContext:
        """What the objectives may use of the task."""
        return ObjectiveContext(self)

    def make_objective(self, cls: Type[Objective], langs: Sequence[str], weight=None) -> Objective:
        """An objective of class ``cls`` over ``langs``, with its options from the task's config."""
        return cls(langs, self.context, cls.options_from(self.cfg), weight)

    @property
    def sampling_alpha(self) -> float:
        """XLM's --lg_sampling_factor for the loop's sampled families; -1: uniform."""
        return -1.0

    def objective(self, key: str) -> Objective:
        """The objective ``key`` names (a batch's, a metric's)."""
        return {o.key: o for o in self.objectives}[key]

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        task = super().setup_task(cfg, **kwargs)
        # a language the data-bin was not prepared for has no text: one line now, not a missing file later
        prepared = prepared_langs(task.data_dir) if cfg.data and os.path.isdir(task.data_dir) else None
        strangers = [lang for lang in task.langs if prepared is not None and lang not in prepared]
        if strangers:
            raise XLMUserError(
                f"--langs {','.join(task.langs)}: {task.data_dir} was prepared for {','.join(prepared)} "
                f"(its manifest.json), not {','.join(strangers)}; prepare the data with every language of --langs"
            )
        return task

    def build_objectives(
        self, split, epoch, objectives, quiet=False
    ) -> Tuple[Dict[str, Built], Dict[str, MissingData]]:
        """Each objective's dataset of ``split``: (key -> what it built, key -> the data it lacks).
        Training needs every objective's data; validation leaves out those without (``quiet``: the
        caller says so)."""
        if split == "train" and not objectives:
            flags = [f"--{option.replace('_', '-')}" for option in objective_options(self.config_class)]
            raise XLMUserError(f"nothing to train: give {', '.join(flags[:-1])} and/or {flags[-1]}")
        built, missing = OrderedDict(), {}
        for objective in objectives:
            try:
                made = built[objective.key] = objective.build(split, epoch)
            except MissingData as lack:
                if split == "train":
                    raise XLMUserError(str(lack)) from None
                if not quiet:
                    logger.warning(f"{lack}: {objective.key} is not validated")
                missing[objective.key] = lack
                continue
            if split == "train":
                objective.sentences = made.sentences
            logger.info(f"{split} {objective.key}: {len(made.dataset)} samples from {made.source}")
        return built, missing

    def zip_objectives(self, split, built: Dict[str, Built], missing: Dict[str, MissingData]) -> ObjectiveZipDataset:
        """The batches of every built objective zipped (``data/objective_zip.py``), once fairseq-train is
        sure to find its --best-checkpoint-metric among what ``split`` validates."""
        self.check_validation(split, list(built), {key: lack.path for key, lack in missing.items()})
        return ObjectiveZipDataset(
            OrderedDict((key, b.dataset) for key, b in built.items()),
            max_sizes={key: b.max_size for key, b in built.items() if b.max_size is not None},
            drawing={key: b.drawing for key, b in built.items() if b.drawing},
        )

    # ---- steps ---------------------------------------------------------------------------

    # with --store-ema fairseq-train hands train_step and valid_step its moving average of the weights; validation
    # scores it, so --best-checkpoint-metric chooses by the weights that checkpoints keep as extra_state["ema"]
    # (written out as a checkpoint of their own by xlm_fairseq.checkpoints.write_ema)
    uses_ema = True

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False, ema_model=None):
        model.train()
        model.set_num_updates(update_num)
        objectives, iteration = self.loop.update_objectives(update_num)
        objectives = [o for o in objectives if sample.get(o.key)]
        for family in sorted({o.family for o in self.objectives if o.weight_option and sample.get(o.key)}):
            weight = next(o.weight for o in self.objectives if o.family == family)
            metrics.log_scalar(f"lambda_{family}", weight(iteration), round=4)
        weights = {o.key: o.weight(iteration) for o in objectives}
        return run_objectives(sample, model, criterion, objectives, weights, optimizer, ignore_grad)

    def validation_metrics(self, validated: Sequence[str]) -> List[str]:
        """The names a validation of the objectives ``validated`` logs (what --best-checkpoint-metric may name)."""
        names = ["loss", "ppl"]
        for key in validated:
            names += [f"{key}_{m}" for m in ("loss", "ppl", "acc")]
        return names

    def check_validation(self, split: str, validated: Sequence[str], missing: Dict[str, str]) -> None:
        """fairseq-train reads ``--best-checkpoint-metric`` from the stats of every validation, and fails
        with a KeyError at the first one (an epoch, or hours, into training) when the metric is not among
        them: refused now, as the valid data loads, with one line naming the option and what is missing.
        ``missing``: objective key -> the data file it lacks on ``split``."""
        metric = getattr(self.cfg, "best_checkpoint_metric", None)
        subsets = str(getattr(self.cfg, "valid_subset", "") or "").split(",")
        if not metric or getattr(self.cfg, "disable_validation", False) or split not in subsets:
            return
        names = self.validation_metrics(validated)
        if metric in names:
            return
        lacking = [
            key
            for key in missing
            if metric.startswith(f"{key}_") or ("-" in key and ObjectiveKey.parse(key).direction in metric.split("_"))
        ]
        if lacking:
            why = f"no {split} data for {lacking[0]} ({missing[lacking[0]]}.bin)"
        elif missing:
            why = f"not among what '{split}' validates (its data lacks {', '.join(sorted(missing))})"
        else:
            why = f"not among what '{split}' validates"
        shown = ", ".join(n for n in names if not n.endswith(("_acc", "_loss")))
        raise XLMUserError(f"--best-checkpoint-metric {metric}: {why}; validated: {shown}")

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        if self.cfg.compile:
            for side, stack in model.stacks().items():
                stack.compile_stack(side, self.cfg.compile_mode)
        return model
