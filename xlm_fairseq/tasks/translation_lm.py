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
from typing import List, Optional

import torch
from fairseq import metrics
from fairseq.data import LanguagePairDataset, PrependTokenDataset
from fairseq.tasks import register_task

from preprocess.langs import parse_steps
from preprocess.segment import check_bleu
from xlm_fairseq.data import ObjectiveZipDataset
from xlm_fairseq.data.translation import LangTagDataset, NoisyDataset, cut_to_positions
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.evaluation.bleu import batch_bleu_stats, reduce_bleu
from xlm_fairseq.generation import XLMSequenceGenerator
from xlm_fairseq.objectives import MAX_DRAWS_PER_FAMILY, Objective, bare_model, lambda_schedule
from xlm_fairseq.tasks.back_translation import BackTranslation
from xlm_fairseq.tasks.base import XLMTask, XLMTaskConfig

logger = logging.getLogger(__name__)


@dataclass
class TranslationLMConfig(XLMTaskConfig):
    ae_steps: str = field(default="", metadata={"help": "denoising auto-encoding on these languages, e.g. en,de"})
    bt_steps: str = field(default="", metadata={"help": "online back-translation, e.g. en-de-en,de-en-de"})
    mt_steps: str = field(default="", metadata={"help": "supervised translation on parallel data, e.g. en-ro,ro-en"})
    lambda_ae: str = field(
        default="1", metadata={"help": "AE weight: a number or a schedule like 0:1,100000:0.1,300000:0"}
    )
    lambda_bt: str = field(default="1", metadata={"help": "BT weight (number or schedule)"})
    lambda_mt: str = field(default="1", metadata={"help": "MT weight (number or schedule)"})
    word_shuffle: float = field(default=3.0, metadata={"help": "AE noise: local shuffle distance k (0: off)"})
    word_dropout: float = field(default=0.1, metadata={"help": "AE noise: token dropout probability"})
    word_blank: float = field(default=0.1, metadata={"help": "AE noise: token blanking probability"})
    bt_max_len_a: float = field(
        default=1.3,
        metadata={"help": "back-translation length limit int(a * L + b), L and the limit counting both </s> (XLM's)"},
    )
    bt_max_len_b: int = field(default=5, metadata={"help": "back-translation length limit: see --bt-max-len-a"})
    valid_lang_pairs: str = field(
        default="",
        metadata={"help": "directions validated (loss and BLEU) on valid parallel data; default: all trained ones"},
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


@register_task("translation_lm", dataclass=TranslationLMConfig)
class TranslationLMTask(BackTranslation, XLMTask):
    cfg: TranslationLMConfig
    model_kind = "translation"

    def __init__(self, cfg: TranslationLMConfig, dictionary):
        super().__init__(cfg, dictionary)
        self.max_source_positions = None  # the model's, known once it is built
        self.lambdas = {
            "ae": lambda_schedule(cfg.lambda_ae, "lambda-ae"),
            "bt": lambda_schedule(cfg.lambda_bt, "lambda-bt"),
            "mt": lambda_schedule(cfg.lambda_mt, "lambda-mt"),
        }
        self._valid_generator = None
        if self.langs:
            self._check_steps()

    # parsing needs the language list, which generate may only learn from the checkpoint
    def _check_steps(self):
        self.ae_steps = self._langs_of(self.cfg.ae_steps, "--ae-steps", 1)
        self.bt_steps = self._langs_of(self.cfg.bt_steps, "--bt-steps", 3)
        self.mt_steps = self._langs_of(self.cfg.mt_steps, "--mt-steps", 2)
        for a, b, c in self.bt_steps:
            if a != c or a == b:
                raise XLMUserError(f"--bt-steps: '{a}-{b}-{c}' must go out and back (like en-de-en)")
        for a, b in self.mt_steps:
            if a == b:
                raise XLMUserError(f"--mt-steps: '{a}-{b}' translates a language into itself")
        if self.cfg.valid_lang_pairs:
            self.valid_directions = self._langs_of(self.cfg.valid_lang_pairs, "--valid-lang-pairs", 2)
        else:
            directions = list(self.mt_steps) + [(a, b) for a, b, _ in self.bt_steps]
            self.valid_directions = list(OrderedDict.fromkeys(directions))
        for lang in (self.cfg.source_lang, self.cfg.target_lang):
            if lang is not None and lang not in self.lang2id:
                raise XLMUserError(f"-s/-t: language '{lang}' is not in --langs {','.join(self.langs)}")

    def _langs_of(self, value, option, n):
        return parse_steps(value, option, (n,), self.langs)

    def set_langs(self, langs: str):
        super().set_langs(langs)
        if self.langs and hasattr(self, "lambdas"):
            self._check_steps()

    # ---- data ----------------------------------------------------------------------------

    def _mono(self, split, lang, epoch=1):
        ds = self._load(self._path(split, lang, epoch))
        if ds is None:
            raise XLMUserError(f"missing monolingual data {self._path(split, lang, epoch)}.bin")
        return ds

    def _noisy(self, ds) -> NoisyDataset:
        """``ds`` with XLM's denoising noise: its draws depend on the zip's round (``drawing``)."""
        cfg = self.cfg
        return NoisyDataset(
            ds, self.dictionary.eos(), self.mask_idx, cfg.word_shuffle, cfg.word_dropout, cfg.word_blank, cfg.seed
        )

    def _pair(self, src, tgt, src_ds, tgt_ds, src_id=None, tgt_id=None):
        eos = self.dictionary.eos()
        src_ds = PrependTokenDataset(src_ds, eos)  # XLM's encoder input: </s> w1 .. wn </s>
        pair = LanguagePairDataset(
            src_ds,
            src_ds.sizes,
            self.dictionary,
            tgt_ds,
            tgt_ds.sizes if tgt_ds is not None else None,
            self.dictionary,
            left_pad_source=False,
            left_pad_target=False,
            shuffle=True,
        )
        return LangTagDataset(
            pair, self.lang2id[src] if src_id is None else src_id, self.lang2id[tgt] if tgt_id is None else tgt_id
        )

    def direction_dataset(self, split, src, tgt, epoch=1):
        d_src, d_tgt, path = self._pair_datasets(split, src, tgt, epoch)
        if d_src is None:
            raise XLMUserError(f"no parallel {split} data for {src}-{tgt} (looked for {path}.bin)")
        return self._pair(src, tgt, d_src, d_tgt)

    def load_dataset(self, split, epoch=1, combine=False, task_cfg=None, **kwargs):
        if not self.langs and task_cfg is not None and task_cfg.get("langs"):
            self.set_langs(task_cfg.langs)  # fairseq-generate: languages from the checkpoint
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
        datasets, drawing = OrderedDict(), {}
        if split == "train":
            for lang in OrderedDict.fromkeys(step[0] for step in self.ae_steps):
                mono = self._mono(split, lang, epoch)
                key = Objective("ae", (lang,)).key
                noisy = drawing[key] = self._noisy(mono)
                datasets[key] = self._pair(lang, lang, noisy, mono)
            for a, b, c in self.bt_steps:
                mono = self._mono(split, a, epoch)  # generation batch: a -> b; the training batch is built later
                datasets[Objective("bt", (a, b, a)).key] = self._pair(a, a, mono, mono, tgt_id=self.lang2id[b])
            for a, b in self.mt_steps:
                datasets[Objective("mt", (a, b)).key] = self.direction_dataset(split, a, b, epoch)
            if not datasets:
                raise XLMUserError("nothing to train: give --ae-steps, --bt-steps and/or --mt-steps")
        else:
            missing = {}
            for a, b in self.valid_directions:
                d_src, d_tgt, path = self._pair_datasets(split, a, b)
                if d_src is None:
                    logger.warning(f"no {split} parallel data for {a}-{b} ({path}.bin): not validated")
                    missing[f"{a}-{b}"] = path
                    continue
                datasets[Objective("mt", (a, b)).key] = self._pair(a, b, d_src, d_tgt)
            if not datasets:
                raise XLMUserError(
                    f"no {split} parallel data for any of "
                    f"{', '.join(f'{a}-{b}' for a, b in self.valid_directions) or 'the trained directions'}"
                    f" (validation needs {split}.{{src}}-{{tgt}}.*; use --disable-validation to train without)"
                )
            self.check_validation(split, list(datasets), missing)
            if not self.cfg.no_eval_bleu:
                for key in datasets:
                    check_bleu(Objective.parse(key).target, f"validation BLEU of {key}")
        for key, ds in datasets.items():
            logger.info(f"{split} {key}: {len(ds)} sentences")
        max_sizes = None
        if split == "train":  # XLM --max_len, per side; sizes count the </s> (and the source's leading </s>)
            n = self.cfg.max_sentence_len
            max_sizes = {key: (n + 2, n + 1) for key in datasets}
        self.datasets[split] = ObjectiveZipDataset(
            datasets, max_sizes=max_sizes, drawing={key: [ds] for key, ds in drawing.items()}
        )

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

    # ---- objective schedule ----------------------------------------------------------------

    def objective_keys(self) -> List[str]:
        """AE, MT, BT: the order of an XLM iteration."""
        ae = [Objective("ae", (lang,)) for lang in OrderedDict.fromkeys(lang for (lang,) in self.ae_steps)]
        mt = [Objective("mt", step) for step in self.mt_steps]
        return [o.key for o in ae + mt + [Objective("bt", step) for step in self.bt_steps]]

    def family(self, family: str) -> List[str]:
        return [k for k in self.objective_keys() if Objective.parse(k).family == family]

    def iteration_length(self, iteration: int) -> int:
        """AE and BT objectives with a weight, and min(5, n) MT draws if MT has one."""
        n = 0
        for family in ("ae", "mt", "bt"):
            keys = self.family(family)
            if keys and self.lambdas[family](iteration) > 0:
                n += min(MAX_DRAWS_PER_FAMILY, len(keys)) if family == "mt" else len(keys)
        return n

    def weight_breaks(self) -> List[int]:
        """Each schedule point and the iteration after it: between them every lambda is linear
        between two non-negative values, so it is 0 throughout or at one end only."""
        return sorted({x + d for fn in self.lambdas.values() for x, _ in fn.pieces for d in (0, 1)})

    def iteration_objectives(self, iteration: int) -> List[str]:
        """XLM's ``shuf_order`` per family, in its order: AE and BT each objective once in random
        order; MT min(5, n) draws with replacement (XLM samples parallel steps like its LM steps)."""
        rng = self.iteration_rng(iteration)
        plan = []
        for family in ("ae", "mt", "bt"):
            keys = self.family(family)
            if family == "mt" and keys:
                plan += [
                    keys[i] for i in rng.choice(len(keys), size=min(MAX_DRAWS_PER_FAMILY, len(keys)), replace=True)
                ]
            else:
                plan += [keys[i] for i in rng.permutation(len(keys))]
        return plan

    def objective_weight(self, key: str, iteration: int) -> float:
        return self.lambdas[Objective.parse(key).family](iteration)

    # ---- steps ---------------------------------------------------------------------------

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        model.train()
        model.set_num_updates(update_num)
        keys, iteration = self.update_objectives(update_num)
        keys = [k for k in keys if sample.get(k)]
        weights = {key: self.objective_weight(key, iteration) for key in keys}
        for family in sorted({Objective.parse(key).family for key in sample}):
            metrics.log_scalar(f"lambda_{family}", self.lambdas[family](iteration), round=4)

        def prepare(key, batch):
            objective = Objective.parse(key)
            if objective.family != "bt":
                return batch
            a, b, _ = objective.langs
            return self.back_translate(model, batch, self.lang2id[a], self.lang2id[b])

        return self.run_objectives(sample, model, criterion, keys, weights, optimizer, ignore_grad, batch_fn=prepare)

    def valid_step(self, sample, model, criterion):
        model.eval()
        with torch.no_grad():
            loss, sample_size, logs = self.run_objectives(sample, model, criterion, list(sample.keys()))
            if not self.cfg.no_eval_bleu:
                for key, batch in sample.items():
                    if batch:
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
        return batch_bleu_stats(
            key, hypos, batch["target"], self.dictionary, self.text_pipeline(), self.cfg.eval_bleu_print_samples
        )

    def reduce_metrics(self, logging_outputs, criterion):
        super().reduce_metrics(logging_outputs, criterion)
        reduce_bleu(logging_outputs)

    def validation_metrics(self, validated):
        """Also each validated direction's BLEU and their means (:mod:`xlm_fairseq.evaluation.bleu`)."""
        names = super().validation_metrics(validated)
        if not self.cfg.no_eval_bleu and validated:
            directions = ["-".join(Objective.parse(k).langs) for k in validated]
            names += [f"bleu{t}_{d}" for d in directions for t in ("", "_tok")] + ["bleu_mean", "bleu_tok_mean"]
        return names

    def max_positions(self):
        return None  # the model's; training data is filtered by --max-sentence-len in load_dataset
