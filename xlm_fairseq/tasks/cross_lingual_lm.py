"""``--task cross_lingual_lm``: XLM pretraining with MLM, TLM and CLM objectives (and MASS's span masking).

Objectives are named like XLM's options: ``--mlm-steps en,de,en-de`` (a language: MLM on its
monolingual stream ``{split}.{lang}``; a pair: TLM on ``{split}.{src}-{tgt}.*``), ``--clm-steps en``
and ``--span-steps en`` (:mod:`xlm_fairseq.objectives`). Each XLM iteration draws its objectives as
XLM's ``shuf_order`` does (see ``--lg-sampling-factor``); how an iteration maps to fairseq updates
and optimiser steps is ``--step-per-objective`` (see ``objectives/schedule.py``).
"""

import logging
import pickle
from dataclasses import dataclass, field

import numpy as np
import torch
from fairseq import metrics
from fairseq.data import Dictionary
from fairseq.tasks import register_task

from xlm_fairseq.data import MaskedLMConfig
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.objectives.base import OBJECTIVES, with_objective_options
from xlm_fairseq.objectives.keys import ObjectiveKey
from xlm_fairseq.objectives.lm import MaskedLM
from xlm_fairseq.tasks.objective_task import XLMTask, XLMTaskConfig
from xlm_fairseq.tasks.step import run_objectives

logger = logging.getLogger(__name__)


@dataclass
class CrossLingualLMTaskOptions(XLMTaskConfig):
    """Options of ``cross_lingual_lm``; its objectives' own (``--mlm-steps``, ``--tokens-per-sample``, ...)
    come from their classes (``xlm_fairseq/objectives/``)."""

    mask_prob: float = field(default=0.15, metadata={"help": "fraction of tokens predicted (XLM --word_pred)"})
    mask_keep_rand: str = field(
        default="0.8,0.1,0.1",
        metadata={"help": "of predicted tokens: masked, kept, random (XLM --word_mask_keep_rand)"},
    )
    sample_alpha: float = field(
        default=0.0, metadata={"help": "predict tokens with weight count^-alpha (XLM --sample_alpha); 0 = uniform"}
    )
    init_embeddings: str = field(
        default="",
        metadata={
            "help": "a torch file of initial token embeddings [dictionary size x --encoder-embed-dim] for a model "
            "trained from scratch, e.g. from cross-lingual word vectors (rows of NaN keep the random init)"
        },
    )
    lg_sampling_factor: float = field(
        default=-1.0,
        metadata={
            "help": "XLM's language sampling: each iteration draws min(5, n) objectives with replacement per family "
            "(CLM, MLM, TLM), with probability p^alpha (p: share of training sentences); -1 = uniform"
        },
    )


CrossLingualLMConfig = with_objective_options(CrossLingualLMTaskOptions, "cross_lingual_lm", "CrossLingualLMConfig")


@register_task("cross_lingual_lm", dataclass=CrossLingualLMConfig)
class XLMCrossLingualLMTask(XLMTask):
    """XLM pretraining (MLM / TLM / CLM). Replaces fairseq's legacy task of the same name."""

    config_class = CrossLingualLMConfig

    def __init__(self, cfg, dictionary: Dictionary):
        super().__init__(cfg, dictionary)
        if not self.langs:
            raise XLMUserError("--langs is required, e.g. --langs en,de")
        try:
            keep_rand = [float(x) for x in cfg.mask_keep_rand.split(",")]
        except ValueError:
            keep_rand = []
        if len(keep_rand) != 3 or abs(sum(keep_rand) - 1) > 1e-6 or min(keep_rand) < 0:
            raise XLMUserError(
                f"--mask-keep-rand must be three non-negative numbers summing to 1, got {cfg.mask_keep_rand}"
            )
        if cfg.lg_sampling_factor != -1 and cfg.lg_sampling_factor <= 0:
            raise XLMUserError(f"--lg-sampling-factor must be -1 (uniform) or > 0, got {cfg.lg_sampling_factor}")
        if cfg.init_embeddings and cfg.pretrained_xlm_checkpoint:
            raise XLMUserError("--init-embeddings starts a model from scratch; --pretrained-xlm-checkpoint has its own")
        self._keep_rand = keep_rand
        self._mask_cfg = None

    @property
    def sampling_alpha(self) -> float:
        return self.cfg.lg_sampling_factor

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        path = self.cfg.init_embeddings
        if path and not from_checkpoint:
            where = f"--init-embeddings {path}"
            try:
                weights = torch.load(path, map_location="cpu", weights_only=True)
            except FileNotFoundError:
                raise XLMUserError(f"{where}: no such file")
            except (OSError, RuntimeError, pickle.UnpicklingError):
                raise XLMUserError(f"{where}: not a file of torch.save")
            if not isinstance(weights, torch.Tensor) or weights.dim() != 2 or not weights.is_floating_point():
                raise XLMUserError(f"{where}: expected one 2-D float tensor [dictionary size x embedding dim]")
            logger.info(f"token embeddings: {model.init_embeddings(weights, where)} rows from {path}")
        return model

    @property
    def mask_cfg(self) -> MaskedLMConfig:
        if self._mask_cfg is None:  # the dictionary may come with a checkpoint, after __init__
            cfg = self.cfg
            self._mask_cfg = MaskedLMConfig.from_dictionary(
                self.dictionary, self.mask_idx, cfg.mask_prob, self._keep_rand, cfg.sample_alpha
            )
        return self._mask_cfg

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        built, missing = self.build_objectives(split, epoch, self.objectives)
        if not built:
            raise XLMUserError(f"no {split} data for any objective in {self.cfg.data}")
        self.datasets[split] = self.zip_objectives(split, built, missing)

    def validation_metrics(self, validated):
        """Also each masked objective's full-mask figures, and XLM's mean ``mlm_fullmask_ppl`` when every
        MLM language is validated (:meth:`reduce_metrics`)."""
        names = super().validation_metrics(validated)
        masked = [k for k in validated if OBJECTIVES[ObjectiveKey.parse(k).family].full_mask_validation]
        names += [f"{k}_fullmask_{m}" for k in masked for m in ("loss", "ppl", "acc")]
        mlm = [o.key for o in self.objectives if o.family == MaskedLM.family]
        if mlm and all(k in validated for k in mlm):
            names.append("mlm_fullmask_ppl")
        return names

    # ---- steps ---------------------------------------------------------------------------

    def valid_step(self, sample, model, criterion, ema_model=None):
        """Our metrics (masking as in training) and XLM's validation perplexity (the same positions,
        all replaced by the mask token): ``mlm_en_ppl`` and ``mlm_en_fullmask_ppl``."""
        model = model if ema_model is None else ema_model  # --store-ema: the average is validated
        model.eval()
        with torch.no_grad():
            objectives = [self.objective(key) for key in sample]
            loss, sample_size, logs = run_objectives(sample, model, criterion, objectives)
            for key, batch in sample.items():
                if batch and "full_mask" in batch:
                    fm = batch["full_mask"]
                    net_input = dict(batch["net_input"], src_tokens=fm["src_tokens"], pred_mask=fm["pred_mask"])
                    full = dict(batch, net_input=net_input, target=fm["target"])
                    _, _, log = criterion(model, full, key=f"{key}_fullmask")
                    for k, v in log.items():
                        if ":" in k:
                            logs[k] = logs.get(k, 0) + v
        return loss, sample_size, logs

    def reduce_metrics(self, logging_outputs, criterion):
        """Also XLM's ``valid_mlm_ppl``: the mean over the MLM languages of their full-mask
        perplexity, logged as ``mlm_fullmask_ppl`` (what XLM selects and stops on)."""
        super().reduce_metrics(logging_outputs, criterion)
        keys = [f"{o.key}_fullmask" for o in self.objectives if o.family == MaskedLM.family]
        if keys and all(any(f"{k}:ntokens" in log for log in logging_outputs) for k in keys):
            metrics.log_derived("mlm_fullmask_ppl", lambda m: float(np.mean([2 ** m[f"{k}_loss"].avg for k in keys])))

    def max_positions(self):
        return None  # the model's: stream blocks are --tokens-per-sample long, TLM positions restart per half
