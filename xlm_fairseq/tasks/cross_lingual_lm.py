"""``--task cross_lingual_lm``: XLM pretraining with MLM, TLM and CLM objectives.

Objectives are named like XLM's options: ``--mlm-steps en,de,en-de`` (a language: MLM on its
monolingual stream ``{split}.{lang}``; a pair: TLM on ``{split}.{src}-{tgt}.*``) and
``--clm-steps en``. Each XLM iteration draws its objectives as XLM's ``shuf_order`` does (see
``--lg-sampling-factor``); how an iteration maps to fairseq updates and optimiser steps is
``--step-per-objective`` (see ``XLMTask``).
"""

import logging
import pickle
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Dict, List

import numpy as np
import torch
from fairseq import metrics
from fairseq.data import Dictionary
from fairseq.tasks import register_task

from preprocess.langs import parse_steps
from xlm_fairseq.data import (
    LMObjectiveDataset,
    MaskedLMConfig,
    ObjectiveZipDataset,
    TLMPairDataset,
    stream_dataset,
)
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.objectives import MAX_DRAWS_PER_FAMILY, Objective
from xlm_fairseq.tasks.base import XLMTask, XLMTaskConfig

logger = logging.getLogger(__name__)


@dataclass
class CrossLingualLMConfig(XLMTaskConfig):
    mlm_steps: str = field(
        default="", metadata={"help": "MLM on languages (en,de) and TLM on pairs (en-de), comma-separated"}
    )
    clm_steps: str = field(default="", metadata={"help": "causal LM on these languages, comma-separated"})
    tokens_per_sample: int = field(default=256, metadata={"help": "tokens per stream block (XLM --bptt)"})
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


def objective_steps(value: str, langs: List[str], option: str):
    """'en,de,en-de' -> [('en', None), ('de', None), ('en', 'de')], each language checked."""
    return [(step[0], step[1] if len(step) == 2 else None) for step in parse_steps(value, option, (1, 2), langs)]


def sampling_probs(sizes: Dict[str, float], alpha: float) -> Dict[str, float]:
    """XLM's ``set_sampling_probs``: p_l = n_l / N, then p_l^alpha renormalised."""
    keys = list(sizes)
    p = np.array([float(sizes[k]) for k in keys])
    p = p / p.sum()
    p = p**alpha
    p = p / p.sum()
    return dict(zip(keys, p))


@register_task("cross_lingual_lm", dataclass=CrossLingualLMConfig)
class XLMCrossLingualLMTask(XLMTask):
    """XLM pretraining (MLM / TLM / CLM). Replaces fairseq's legacy task of the same name."""

    cfg: CrossLingualLMConfig

    def __init__(self, cfg: CrossLingualLMConfig, dictionary: Dictionary):
        super().__init__(cfg, dictionary)
        if not self.langs:
            raise XLMUserError("--langs is required, e.g. --langs en,de")
        self.mlm_steps = objective_steps(cfg.mlm_steps, self.langs, "--mlm-steps")
        self.clm_steps = objective_steps(cfg.clm_steps, self.langs, "--clm-steps")
        if any(tgt is not None for _, tgt in self.clm_steps):
            raise XLMUserError("--clm-steps takes languages only")
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
        self.train_sizes: Dict[str, int] = {}  # objective key -> training sentences (language sampling)

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

    def objective_keys(self) -> List[str]:
        lm = [Objective("mlm", (a,)) if b is None else Objective("tlm", (a, b)) for a, b in self.mlm_steps]
        return [o.key for o in lm + [Objective("clm", (a,)) for a, _ in self.clm_steps]]

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        if not self.objective_keys():
            raise XLMUserError("nothing to train: give --mlm-steps and/or --clm-steps")
        pad, eos = self.dictionary.pad(), self.dictionary.eos()
        datasets = OrderedDict()
        missing: Dict[str, str] = {}  # objective key -> the data it lacks
        for (a, b), key in zip(self.mlm_steps + self.clm_steps, self.objective_keys()):
            objective = "clm" if Objective.parse(key).family == "clm" else "mlm"
            if b is None:
                path = self._path(split, a, epoch)
                mono = self._load(path)
                if mono is None:
                    missing[key] = path
                    continue
                stream = stream_dataset(mono, self.cfg.tokens_per_sample, pad, eos)
                datasets[key] = LMObjectiveDataset(
                    stream, objective, pad, self.lang2id[a], self.mask_cfg, self.cfg.seed, evaluation=split != "train"
                )
                size = len(mono)
            else:
                d1, d2, path = self._pair_datasets(split, a, b, epoch)
                if d1 is None or d2 is None:
                    missing[key] = path
                    continue
                pairs = TLMPairDataset(d1, d2, self.lang2id[a], self.lang2id[b], eos, self.cfg.max_sentence_len)
                if pairs.n_dropped:
                    logger.info(
                        f"{key} {split}: {pairs.n_dropped} pairs with a side over "
                        f"--max-sentence-len {self.cfg.max_sentence_len} dropped"
                    )
                if not len(pairs):
                    raise XLMUserError(
                        f"{key} {split}: no pair within --max-sentence-len {self.cfg.max_sentence_len} in {path}"
                    )
                datasets[key] = LMObjectiveDataset(
                    pairs, objective, pad, None, self.mask_cfg, self.cfg.seed, evaluation=split != "train"
                )
                size = len(pairs)
            if split == "train":
                self.train_sizes[key] = size
            logger.info(f"{split} {key}: {len(datasets[key])} samples from {path}")
        if missing and split == "train":
            raise XLMUserError(f"missing training data: {', '.join(p + '.bin' for p in missing.values())}")
        for path in missing.values():
            logger.warning(f"no {split} data at {path}.bin; that objective is not validated")
        if not datasets:
            raise XLMUserError(f"no {split} data for any objective in {self.cfg.data}")
        self.check_validation(split, list(datasets), missing)
        # each objective's LMObjectiveDataset draws its masks
        self.datasets[split] = ObjectiveZipDataset(datasets, drawing={key: [ds] for key, ds in datasets.items()})

    def validation_metrics(self, validated):
        """Also each masked objective's full-mask figures, and XLM's mean ``mlm_fullmask_ppl`` when every
        MLM language is validated (:meth:`reduce_metrics`)."""
        names = super().validation_metrics(validated)
        masked = [k for k in validated if Objective.parse(k).family in ("mlm", "tlm")]
        names += [f"{k}_fullmask_{m}" for k in masked for m in ("loss", "ppl", "acc")]
        mlm = [f"mlm_{a}" for a, b in self.mlm_steps if b is None]
        if mlm and all(k in validated for k in mlm):
            names.append("mlm_fullmask_ppl")
        return names

    # ---- objective schedule (XLM's shuf_order) ---------------------------------------------

    def families(self) -> List[List[str]]:
        """CLM, MLM (monolingual) and TLM (parallel) objectives: XLM samples each family apart."""
        keys = self.objective_keys()
        return [[k for k in keys if Objective.parse(k).family == family] for family in ("clm", "mlm", "tlm")]

    def iteration_length(self, iteration: int = 0) -> int:
        return sum(min(MAX_DRAWS_PER_FAMILY, len(f)) for f in self.families())

    def iteration_objectives(self, iteration: int) -> List[str]:
        """XLM's ``shuf_order`` per family: min(5, n) draws with replacement, uniform at
        ``--lg-sampling-factor -1``, else p^alpha with p the share of training sentences."""
        rng = self.iteration_rng(iteration)
        plan = []
        for keys in self.families():
            if not keys:
                continue
            p = None
            if self.cfg.lg_sampling_factor != -1:
                if any(k not in self.train_sizes for k in keys):
                    raise XLMUserError("--lg-sampling-factor needs the training data loaded")
                probs = sampling_probs({k: self.train_sizes[k] for k in keys}, self.cfg.lg_sampling_factor)
                p = [probs[k] for k in keys]
            plan += [
                keys[i] for i in rng.choice(len(keys), size=min(MAX_DRAWS_PER_FAMILY, len(keys)), replace=True, p=p)
            ]
        return plan

    # ---- steps ---------------------------------------------------------------------------

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        model.train()
        model.set_num_updates(update_num)
        keys, _ = self.update_objectives(update_num)
        return self.run_objectives(sample, model, criterion, keys, optimizer=optimizer, ignore_grad=ignore_grad)

    def valid_step(self, sample, model, criterion):
        """Our metrics (masking as in training) and XLM's validation perplexity (the same positions,
        all replaced by the mask token): ``mlm_en_ppl`` and ``mlm_en_fullmask_ppl``."""
        model.eval()
        with torch.no_grad():
            loss, sample_size, logs = self.run_objectives(sample, model, criterion, list(sample.keys()))
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
        keys = [f"mlm_{a}_fullmask" for a, b in self.mlm_steps if b is None]
        if keys and all(any(f"{k}:ntokens" in log for log in logging_outputs) for k in keys):
            metrics.log_derived("mlm_fullmask_ppl", lambda m: float(np.mean([2 ** m[f"{k}_loss"].avg for k in keys])))

    def max_positions(self):
        return None  # the model's: stream blocks are --tokens-per-sample long, TLM positions restart per half
