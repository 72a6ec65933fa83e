"""``--task translation_lm``: XLM's (un)supervised NMT, both stacks initialised from one pretrained LM.

Objectives (XLM's names): ``--ae-steps en,de`` denoising auto-encoding on monolingual data,
``--bt-steps en-de-en`` online back-translation (translate en->de greedily with the current model in
eval mode and without gradient, then train de->en to give back the original), ``--mt-steps en-de``
supervised steps on parallel data. Each has a weight ``--lambda-ae/-bt/-mt``, a constant or XLM's
piecewise-linear schedule ``0:1,100000:0.1,300000:0``; an objective whose weight is 0 is skipped.

An XLM iteration runs the AE, MT and BT objectives with a weight (AE and BT each once in random
order, MT min(5, n) draws with replacement: XLM's ``shuf_order``). By
default one fairseq update is one iteration: each objective with a non-zero weight back-propagates
``lambda * mean token loss`` and the optimiser takes one step on their mean (fairseq's online-BT
style). ``--step-per-objective`` is XLM's loop: one update per objective, so each gets its own Adam
step, gradient clipping and LR-schedule step. Lambda schedules count iterations in both modes.
Training sentences with a side over ``--max-sentence-len`` (100) subwords are dropped (XLM --max_len).

With ``-s SRC -t TGT`` (fairseq-generate / fairseq-interactive) the task serves that one direction.
"""

import logging
from argparse import Namespace
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Optional

import torch
from fairseq.data import LanguagePairDataset
from fairseq.tasks import register_task

from preprocess.langs import parse_steps
from preprocess.segment import check_bleu
from xlm_fairseq.data.translation import LangTagDataset, cut_to_positions
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.evaluation.bleu import ROUNDTRIP_METRICS, batch_bleu_stats, reduce_bleu
from xlm_fairseq.generation import XLMSequenceGenerator
from xlm_fairseq.models.base import bare_model
from xlm_fairseq.objectives.base import MissingData, with_objective_options
from xlm_fairseq.objectives.keys import ObjectiveKey
from xlm_fairseq.objectives.translation import BackTranslation, MachineTranslation
from xlm_fairseq.tasks.objective_task import XLMTask, XLMTaskConfig
from xlm_fairseq.tasks.step import run_objectives

logger = logging.getLogger(__name__)


@dataclass
class TranslationLMTaskOptions(XLMTaskConfig):
    """Options of ``translation_lm``; its objectives' own (``--ae-steps``, ``--lambda-bt``, the AE noise,
    ...) come from their classes (``xlm_fairseq/objectives/translation.py``)."""

    valid_lang_pairs: str = field(
        default="",
        metadata={"help": "directions validated (loss and BLEU) on valid parallel data; default: all trained ones"},
    )
    valid_roundtrip: bool = field(
        default=False,
        metadata={
            "help": "also validate the round trip of each validated direction src-tgt on monolingual valid text "
            "({valid}.{src}: src -> tgt -> src, greedy), as a direction without parallel valid data always is: "
            "roundtrip_bleu, roundtrip_copy and roundtrip_score, for choosing a checkpoint without parallel text"
        },
    )
    # on by default: a bool field defaulting to True would make --eval-bleu a flag that turns it off
    no_eval_bleu: bool = field(
        default=False,
        metadata={
            "help": "skip validation BLEU, by default bleu_{src}-{tgt} (sacrebleu, detokenised) and "
            "bleu_tok_{src}-{tgt} (tokenised, like XLM's multi-bleu.perl), and their means over the directions, "
            "bleu_mean and bleu_tok_mean (e.g. for --best-checkpoint-metric)"
        },
    )
    eval_bleu_print_samples: bool = field(default=False, metadata={"help": "log a hypothesis/reference per direction"})
    source_lang: Optional[str] = field(default=None, metadata={"help": "source language", "argparse_alias": "-s"})
    target_lang: Optional[str] = field(default=None, metadata={"help": "target language", "argparse_alias": "-t"})


TranslationLMConfig = with_objective_options(TranslationLMTaskOptions, "translation_lm", "TranslationLMConfig")


@register_task("translation_lm", dataclass=TranslationLMConfig)
class TranslationLMTask(XLMTask):
    config_class = TranslationLMConfig
    model_kind = "translation"

    def __init__(self, cfg, dictionary):
        super().__init__(cfg, dictionary)
        self.max_source_positions = None  # the model's, known once it is built
        self._valid_generator = None

    def langs_known(self):
        """Also the validated directions, and -s/-t checked (once the languages are known)."""
        super().langs_known()
        self.valid_objectives, self.roundtrip_objectives = [], []
        if not self.langs:
            return
        if self.cfg.valid_lang_pairs:
            pairs = parse_steps(self.cfg.valid_lang_pairs, "--valid-lang-pairs", (2,), self.langs)
        else:
            mt = [o.langs for o in self.objectives if isinstance(o, MachineTranslation)]
            bt = [o.langs[:2] for o in self.objectives if isinstance(o, BackTranslation)]
            pairs = list(OrderedDict.fromkeys(mt + bt))
        self.valid_objectives = [self.make_objective(MachineTranslation, pair) for pair in pairs]
        # without parallel valid text (or with --valid-roundtrip): back-translation's round trip a -> b -> a
        self.roundtrip_objectives = [self.make_objective(BackTranslation, (a, b, a)) for a, b in pairs]
        for lang in (self.cfg.source_lang, self.cfg.target_lang):
            if lang is not None and lang not in self.lang2id:
                raise XLMUserError(f"-s/-t: language '{lang}' is not in --langs {','.join(self.langs)}")

    def objective(self, key: str):
        """Also the validated directions' (``mt_{src}-{tgt}``)."""
        return {o.key: o for o in self.valid_objectives + self.roundtrip_objectives + self.objectives}[key]

    # ---- data ----------------------------------------------------------------------------

    def direction_dataset(self, split, src, tgt, epoch=1):
        try:
            return self.make_objective(MachineTranslation, (src, tgt)).build(split, epoch).dataset
        except MissingData as lack:
            raise XLMUserError(str(lack)) from None

    def load_dataset(self, split, epoch=1, combine=False, task_cfg=None, **kwargs):
        if not self.langs:
            raise XLMUserError("--langs is required, e.g. --langs en,de")
        if task_cfg is not None and not (self.cfg.source_lang and self.cfg.target_lang):
            # only fairseq-generate passes the checkpoint's task config
            raise XLMUserError(
                f"fairseq-generate translates one direction: give -s SRC -t TGT (of {','.join(self.langs)})"
            )
        if self.cfg.source_lang and self.cfg.target_lang:
            self.datasets[split] = self.direction_dataset(split, self.cfg.source_lang, self.cfg.target_lang)
            return
        if split == "train":
            built, missing = self.build_objectives(split, epoch, self.objectives)
        else:
            built, missing = self.build_objectives(split, 1, self.valid_objectives, quiet=True)
            # each validated direction's round trip, which validates it where it has no parallel data
            trip_of = {d.key: trip.key for d, trip in zip(self.valid_objectives, self.roundtrip_objectives)}
            pairs = zip(self.valid_objectives, self.roundtrip_objectives)
            trips = [trip for d, trip in pairs if self.cfg.valid_roundtrip or d.key in missing]
            trips_built, trips_missing = self.build_objectives(split, 1, trips, quiet=True)
            built.update(trips_built)
            missing.update(trips_missing)
            for key, lack in missing.items():
                if trip_of.get(key) in trips_built:
                    logger.info(f"{lack}: {key} is validated by its round trip {trip_of[key]}")
                else:
                    logger.warning(f"{lack}: {key} is not validated")
            if not built:
                directions = ", ".join(o.name.direction for o in self.valid_objectives)
                raise XLMUserError(
                    f"no {split} data for any of {directions or 'the trained directions'}: validation needs "
                    f"parallel {split}.{{src}}-{{tgt}}.* or, for round trips, monolingual {split}.{{src}}"
                    " (use --disable-validation to train without)"
                )
            if not self.cfg.no_eval_bleu:
                for key in built:
                    check_bleu(ObjectiveKey.parse(key).target, f"validation BLEU of {key}")
        self.datasets[split] = self.zip_objectives(split, built, missing)

    def build_dataset_for_inference(self, src_tokens, src_lengths, constraints=None):
        if not (self.cfg.source_lang and self.cfg.target_lang):
            raise XLMUserError("give the direction with -s SRC -t TGT")
        eos = self.dictionary.eos()
        src = [torch.cat([torch.LongTensor([eos]), t]) for t in src_tokens]
        src = cut_to_positions(src, self.max_source_positions)
        pair = LanguagePairDataset(
            src,
            [len(t) for t in src],
            self.dictionary,
            tgt_dict=self.dictionary,
            left_pad_source=False,
            constraints=constraints,
        )
        return LangTagDataset(pair, self.lang2id[self.cfg.source_lang], self.lang2id[self.cfg.target_lang])

    def build_generator(self, models, args, seq_gen_cls=None, extra_gen_cls_kwargs=None, **kwargs):
        # fairseq's generator, with its plain beam search run by our own loop (generation.py)
        if seq_gen_cls is None and not getattr(args, "print_alignment", False):
            seq_gen_cls = XLMSequenceGenerator
        return super().build_generator(models, args, seq_gen_cls, extra_gen_cls_kwargs, **kwargs)

    def inference_step(self, generator, models, sample, prefix_tokens=None, constraints=None):
        # fairseq-interactive rebuilds net_input from src_tokens/src_lengths only: restore the
        # languages of the -s/-t direction
        net_input = sample["net_input"]
        if "tgt_langs" not in net_input:
            if not (self.cfg.source_lang and self.cfg.target_lang):
                raise XLMUserError("give the direction with -s SRC -t TGT")
            bsz = net_input["src_tokens"].size(0)
            device = net_input["src_tokens"].device
            net_input["src_langs"] = torch.full(
                (bsz,), self.lang2id[self.cfg.source_lang], dtype=torch.long, device=device
            )
            net_input["tgt_langs"] = torch.full(
                (bsz,), self.lang2id[self.cfg.target_lang], dtype=torch.long, device=device
            )
        self.follow_idle_cores(models[0])
        # decoding keeps no autograd bookkeeping at all (inference mode, bench/README.md);
        # callers get ordinary tensors back (fairseq-generate divides the scores in place)
        with torch.inference_mode():
            hypos = super().inference_step(generator, models, sample, prefix_tokens, constraints)
        return [[{k: v.clone() if torch.is_tensor(v) else v for k, v in h.items()} for h in nbest] for nbest in hypos]

    # ---- model ---------------------------------------------------------------------------

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        self.max_source_positions = model.encoder.max_positions()  # inputs to translate are cut to it
        return model

    # ---- steps ---------------------------------------------------------------------------

    def valid_step(self, sample, model, criterion, ema_model=None):
        model = model if ema_model is None else ema_model  # --store-ema: the average is validated
        model.eval()
        with torch.no_grad():
            objectives = [self.objective(key) for key in sample]
            prepared = {}  # the batches scored: a round trip's are its back-translations
            loss, sample_size, logs = run_objectives(sample, model, criterion, objectives, prepared=prepared)
            if not self.cfg.no_eval_bleu:
                for key, batch in prepared.items():
                    logs.update(self._bleu_stats(model, key, batch))
        return loss, sample_size, logs

    def _bleu_stats(self, model, key, batch):
        raw = bare_model(model)
        if self._valid_generator is None or self._valid_generator.model.single_model is not raw:
            # XLM's evaluator: greedy, int(1.5 L + 10) tokens with both </s> (so 1.5 L + 8 words), empty allowed
            self._valid_generator = self.build_generator(
                [raw], Namespace(beam=1, max_len_a=1.5, max_len_b=8, min_len=0)
            )
        hypos = self._valid_generator.generate([raw], batch)
        # a round trip's source is the translation into the middle language: how much of it is copied
        sources = batch["net_input"]["src_tokens"] if key.startswith(f"{BackTranslation.family}_") else None
        return batch_bleu_stats(
            key,
            hypos,
            batch["target"],
            self.dictionary,
            self.text_pipeline(),
            self.cfg.eval_bleu_print_samples,
            sources,
        )

    def reduce_metrics(self, logging_outputs, criterion):
        super().reduce_metrics(logging_outputs, criterion)
        reduce_bleu(logging_outputs)

    def validation_metrics(self, validated):
        """Also each validated direction's BLEU and their means (:mod:`xlm_fairseq.evaluation.bleu`)."""
        names = super().validation_metrics(validated)
        if not self.cfg.no_eval_bleu and validated:
            keys = [ObjectiveKey.parse(k) for k in validated]
            translations = [k.direction for k in keys if k.family == MachineTranslation.family]
            trips = [k.direction for k in keys if k.family == BackTranslation.family]
            names += [f"bleu{t}_{d}" for d in translations for t in ("", "_tok")]
            names += ["bleu_mean", "bleu_tok_mean"] if translations else []
            names += [f"bleu{t}_{d}" for d in trips for t in ("", "_tok", "_copy")]
            names += list(ROUNDTRIP_METRICS) if trips else []
        return names

    def check_validation(self, split, validated, missing):
        try:
            super().check_validation(split, validated, missing)
        except XLMUserError as e:
            metric = self.cfg.best_checkpoint_metric
            if metric in ROUNDTRIP_METRICS and not any(k.startswith(f"{BackTranslation.family}_") for k in validated):
                raise XLMUserError(
                    f"{e}; round trips are validated for directions without parallel {split} data, or with "
                    "--valid-roundtrip"
                ) from None
            raise

    def max_positions(self):
        return None  # the model's; training data is filtered by --max-sentence-len in load_dataset
