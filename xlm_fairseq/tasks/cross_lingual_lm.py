"""``--task cross_lingual_lm``: XLM pretraining with MLM, TLM and CLM objectives.

Objectives are named like XLM's options: ``--mlm-steps en,de,en-de`` (a language: MLM on its
monolingual stream ``{split}.{lang}``; a pair: TLM on ``{split}.{src}-{tgt}.*``) and
``--clm-steps en``. Every update takes one batch of each objective (after language sampling, see
``--lg-sampling-factor``) and back-propagates each objective's mean token loss, so objectives weigh
equally, as in XLM where each is its own optimiser step.
"""

import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Dict, List

import numpy as np
import torch
from omegaconf import II

from fairseq.data import Dictionary
from fairseq.dataclass import FairseqDataclass

from xlm_fairseq.data import (
    LMObjectiveDataset,
    MaskedLMConfig,
    ObjectiveZipDataset,
    TLMPairDataset,
    mask_scores_from_counts,
    stream_dataset,
)
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.tasks import parse_lang_list, register_task_replacing
from xlm_fairseq.tasks.base import XLMTask

logger = logging.getLogger(__name__)



@dataclass
class CrossLingualLMConfig(FairseqDataclass):
    data: str = field(default="", metadata={"help": "data-bin made by preprocess/ (dict.txt, {split}.{lang}, {split}.{src}-{tgt}.{lang})"})
    langs: str = field(default="", metadata={"help": "comma-separated languages; their order fixes the language ids (XLM --lgs)"})
    mlm_steps: str = field(default="", metadata={"help": "MLM on languages (en,de) and TLM on pairs (en-de), comma-separated"})
    clm_steps: str = field(default="", metadata={"help": "causal LM on these languages, comma-separated"})
    tokens_per_sample: int = field(default=256, metadata={"help": "tokens per stream block (XLM --bptt); TLM pairs longer than this are dropped"})
    mask_prob: float = field(default=0.15, metadata={"help": "fraction of tokens predicted (XLM --word_pred)"})
    mask_keep_rand: str = field(default="0.8,0.1,0.1", metadata={"help": "of predicted tokens: masked, kept, random (XLM --word_mask_keep_rand)"})
    sample_alpha: float = field(default=0.0, metadata={"help": "predict tokens with weight count^-alpha (XLM --sample_alpha); 0 = uniform"})
    lg_sampling_factor: float = field(default=-1.0, metadata={"help": "sample languages with probability p^alpha (p: share of data); -1 = every language every update (XLM)"})
    pretrained_xlm_checkpoint: str = field(default="", metadata={"help": "start from this checkpoint (our .pt, or a converter OUT_DIR)"})
    seed: int = II("common.seed")


def parse_steps(value: str, langs: List[str], option: str):
    """'en,de,en-de' -> [('en', None), ('de', None), ('en', 'de')], each language checked."""
    steps = []
    for item in parse_lang_list(value, option):
        parts = item.split("-")
        if len(parts) > 2 or not all(parts):
            raise XLMUserError(f"{option}: cannot parse '{item}' (expected a language or a pair like en-de)")
        for lang in parts:
            if lang not in langs:
                raise XLMUserError(f"{option}: language '{lang}' is not in --langs {','.join(langs)}")
        steps.append((parts[0], parts[1] if len(parts) == 2 else None))
    return steps


def sampling_probs(sizes: Dict[str, float], alpha: float) -> Dict[str, float]:
    """XLM's ``set_sampling_probs``: p_l = n_l / N, then p_l^alpha renormalised."""
    keys = list(sizes)
    p = np.array([float(sizes[k]) for k in keys])
    p = p / p.sum()
    p = p ** alpha
    p = p / p.sum()
    return dict(zip(keys, p))


@register_task_replacing("cross_lingual_lm", dataclass=CrossLingualLMConfig)
class XLMCrossLingualLMTask(XLMTask):
    """XLM pretraining (MLM / TLM / CLM). Replaces fairseq's legacy task of the same name."""

    cfg: CrossLingualLMConfig
    builds_decoder = False

    def __init__(self, cfg: CrossLingualLMConfig, dictionary: Dictionary):
        super().__init__(cfg, dictionary)
        if not self.langs:
            raise XLMUserError("--langs is required, e.g. --langs en,de")
        self.mlm_steps = parse_steps(cfg.mlm_steps, self.langs, "--mlm-steps")
        self.clm_steps = parse_steps(cfg.clm_steps, self.langs, "--clm-steps")
        if any(tgt is not None for _, tgt in self.clm_steps):
            raise XLMUserError("--clm-steps takes languages only")
        keep_rand = [float(x) for x in cfg.mask_keep_rand.split(",")]
        if len(keep_rand) != 3 or abs(sum(keep_rand) - 1) > 1e-6 or min(keep_rand) < 0:
            raise XLMUserError(f"--mask-keep-rand must be three non-negative numbers summing to 1, got {cfg.mask_keep_rand}")
        self.mask_cfg = MaskedLMConfig(
            mask_idx=self.mask_idx,
            pad_idx=dictionary.pad(),
            vocab_size=len(dictionary),
            mask_prob=cfg.mask_prob,
            mask_keep_rand=tuple(keep_rand),
            mask_scores=mask_scores_from_counts(dictionary.count, dictionary.pad(), cfg.sample_alpha),
        )
        self.train_sizes: Dict[str, int] = {}  # objective key -> amount of training data (sampling)

    def objective_keys(self) -> List[str]:
        keys = [f"mlm_{a}" if b is None else f"tlm_{a}-{b}" for a, b in self.mlm_steps]
        return keys + [f"clm_{a}" for a, _ in self.clm_steps]

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        if not self.objective_keys():
            raise XLMUserError("nothing to train: give --mlm-steps and/or --clm-steps")
        pad, eos = self.dictionary.pad(), self.dictionary.eos()
        datasets = OrderedDict()
        missing = []
        for (a, b), key in zip(self.mlm_steps + self.clm_steps, self.objective_keys()):
            objective = "clm" if key.startswith("clm") else "mlm"
            if b is None:
                path = self._path(split, a)
                mono = self._load(path)
                if mono is None:
                    missing.append(path)
                    continue
                stream = stream_dataset(mono, self.cfg.tokens_per_sample, pad, eos)
                datasets[key] = LMObjectiveDataset(stream, objective, pad, self.lang2id[a], self.mask_cfg, self.cfg.seed)
                size = int(mono.sizes.sum())
            else:
                d1, d2, path = self._pair_datasets(split, a, b)
                if d1 is None or d2 is None:
                    missing.append(path)
                    continue
                pairs = TLMPairDataset(d1, d2, self.lang2id[a], self.lang2id[b], eos, self.cfg.tokens_per_sample)
                if pairs.n_dropped:
                    logger.warning(f"{key} {split}: {pairs.n_dropped} pairs longer than --tokens-per-sample dropped")
                datasets[key] = LMObjectiveDataset(pairs, objective, pad, None, self.mask_cfg, self.cfg.seed)
                size = int(pairs.sizes.sum())
            if split == "train":
                self.train_sizes[key] = size
            logger.info(f"{split} {key}: {len(datasets[key])} samples from {path}")
        if missing and split == "train":
            raise XLMUserError(f"missing training data: {', '.join(p + '.bin' for p in missing)}")
        for path in missing:
            logger.warning(f"no {split} data at {path}.bin; that objective is not validated")
        if not datasets:
            raise XLMUserError(f"no {split} data for any objective in {self.cfg.data}")
        self.datasets[split] = ObjectiveZipDataset(datasets)

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        if self.cfg.pretrained_xlm_checkpoint and not from_checkpoint:
            from xlm_fairseq.pretrained import load_pretrained_lm_state

            state = load_pretrained_lm_state(self.cfg.pretrained_xlm_checkpoint, self.dictionary, self.langs)
            model.load_state_dict(state, strict=True)
            logger.info(f"initialised from {self.cfg.pretrained_xlm_checkpoint}")
        return model

    # ---- language sampling ---------------------------------------------------------------

    def sampled_keys(self, available: List[str], update_num: int) -> List[str]:
        """Objectives this update trains on. alpha = -1: all (XLM's default); otherwise, per family
        (mlm, tlm, clm), as many draws (with replacement) as the family has languages, with
        probability p^alpha (XLM's ``shuf_order``). A key drawn twice counts twice."""
        if self.cfg.lg_sampling_factor == -1:
            return list(available)
        rng = np.random.RandomState((self.cfg.seed * 1000003 + update_num) % (2 ** 32))
        chosen = []
        for family in ("mlm", "tlm", "clm"):
            keys = [k for k in available if k.startswith(family + "_") and k in self.train_sizes]
            if not keys:
                continue
            probs = sampling_probs({k: self.train_sizes[k] for k in keys}, self.cfg.lg_sampling_factor)
            chosen += list(rng.choice(keys, size=len(keys), replace=True, p=[probs[k] for k in keys]))
        return chosen

    # ---- steps ---------------------------------------------------------------------------

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        model.train()
        model.set_num_updates(update_num)
        keys = self.sampled_keys(list(sample.keys()), update_num)
        return self.run_objectives(sample, model, criterion, keys, optimizer=optimizer, ignore_grad=ignore_grad)

    def valid_step(self, sample, model, criterion):
        model.eval()
        with torch.no_grad():
            return self.run_objectives(sample, model, criterion, list(sample.keys()))

    def max_positions(self):
        return self.cfg.tokens_per_sample
