#!/usr/bin/env python3
"""What does cross-lingual pretraining buy? Equal CPU budgets, real text, held-out documents.

    bash recipes/ablation.sh [--budget 2h] [--test PREFIX] [--runs NAME,...] [--quick]

Data: a larger draw of the shipped sample's rules (``recipes/data/make_sample.py``) from
``../shared/data/en-de/docs.natural``: monolingual en and de from different documents (never
translations of each other), 5,000 parallel pairs, valid and test blocks of consecutive lines
(documents) whose sentences occur in no training file. One joint sentencepiece vocabulary.
``--test PREFIX`` scores on your own held-out text instead (``PREFIX.de``, ``PREFIX.en``, raw,
line-aligned), encoded with the same vocabulary; the table then holds the runs scored on it (those of
``--runs``), not those an earlier invocation scored on another test set.

Model and settings: the CPU configuration that ``recipes/scale.sh`` found (``recipes/README.md``).
Runs, each bounded by its share of ``--budget`` (wall-clock, ``--stop-time-hours``):
  pretrain_mlm, pretrain_mlm_tlm        cross_lingual_lm, MLM on en+de (+ TLM on the pairs)
  unmt_{random,mlm,mlm_tlm}             translation_lm AE + online BT on the monolingual data
  sup_{random,mlm}                      translation_lm supervised MT on the pairs, both directions
  sup_random_de-en                      ours, de->en only (the per-minute comparison with ...)
  fairseq_transformer_de-en             fairseq's --task translation --arch transformer, same dims
  *_summed (not run by default)         the same with the default summed loop instead of XLM's
Every MT run uses XLM's loop (``--step-per-objective``) unless ``_summed``.

Each model is scored on the test set in both directions: BLEU (sacreBLEU on detokenised output vs
the raw reference, beam 5) beside the BLEU of copying the source sentence, and the reference
log-probability per token (``fairseq-generate --score-reference``, log2), which moves long before
BLEU does. Each LM gets XLM's validation perplexity beside the unigram model of the training text,
and the alignment probe (``xlm-fairseq-lexicon``) beside the same architecture at random init.
Results: WORK/results.{md,json}; finished runs are skipped on a re-run (``--fresh`` redoes all).
"""

import hashlib
import shutil
import sys
import time
from pathlib import Path

from preprocess.errors import ArgumentParser
from preprocess.files import file_sha256, staged_dir
from recipes.experiments import figures
from recipes.experiments.ablation.report import report
from recipes.experiments.ablation.runs import DEFAULT_RUNS, FULL, LANGS, MT_SHARE, PRETRAIN_SHARE, QUICK, runs_table
from recipes.experiments.driver import ROOT, Driver, add_shared_data_option, check_shared_data
from recipes.experiments.measure import (
    BIN,
    Measure,
    copy_bleu,
    model_args,
    parse_budget,
    read_lines,
    train_args,
)
from recipes.train.stages import copy_file, write_json
from recipes.train.trained import checkpoint_updates


class Ablation(Driver):
    name = "ablation"

    def __init__(self, args):
        super().__init__()
        self.args = args
        self.p = dict(QUICK if args.quick else FULL)
        if args.budget:
            self.p["budget"] = args.budget
        budget = parse_budget(self.p["budget"])
        self.p["pretrain_minutes"] = args.pretrain_minutes or round(PRETRAIN_SHARE * budget, 2)
        self.p["mt_minutes"] = args.mt_minutes or round(MT_SHARE * budget, 2)
        for key in ("beam", "mt_lr"):
            if getattr(args, key) is not None:
                self.p[key] = getattr(args, key)
        default = "runs/ablation-quick" if args.quick else "runs/ablation"
        self.work = Path(args.work_dir or ROOT / default).resolve()
        self.data = self.work / "data-bin"
        self.results_path = self.work / "results.json"
        self.raw = self.work / "raw" / "en-de"

    # ---- data ------------------------------------------------------------------------------

    def prepare(self):
        if not (self.data / "dict.txt").exists():
            self.prepare_data_bin()
        # fairseq's translation task reads dict.{src,tgt}.txt beside the same binarised files; built
        # again on every run, so a run killed half-way through it leaves nothing half-built behind
        peer = self.work / "peer-bin"
        peer.mkdir(exist_ok=True)
        for lang in LANGS:
            copy_file(self.data / "dict.txt", peer / f"dict.{lang}.txt")
        for f in self.data.glob("*.de-en.*"):
            target = peer / f.name
            if not target.is_symlink():
                target.symlink_to(f)

    def prepare_data_bin(self):
        p, d = self.p, self.raw
        self.log(
            f"data: {p['mono']} mono lines per language, {p['train']} pairs, valid {p['valid']}, "
            f"test {p['test']} (held-out documents)"
        )
        self.run(
            [
                sys.executable,
                ROOT / "recipes/data/make_sample.py",
                self.args.shared_data,
                "--out",
                d.parent,
                "--pairs",
                "en-de",
                "--xcls-train",
                "0",
                "--mono",
                p["mono"],
                "--train",
                p["train"],
                "--valid",
                p["valid"],
                "--test",
                p["test"],
            ],
            self.work / "make_sample.log",
        )
        self.run(
            [
                BIN / "xlm-fairseq-prepare",
                self.data,
                "--langs",
                ",".join(LANGS),
                "--vocab-size",
                p["vocab"],
                "--quiet",
                "--mono",
                f"train:en={d}/mono.en",
                "--mono",
                f"train:de={d}/mono.de",
                "--para",
                f"train:en-de={d}/train.en-de",
                "--para",
                f"valid:en-de={d}/valid.en-de",
                "--para",
                f"test:en-de={d}/test.en-de",
            ],
            self.work / "prepare.log",
        )

    def test_set(self):
        """(data-bin whose test split is scored, raw prefix of its references): the drawn test set, or
        --test PREFIX binarised with the data-bin's vocabulary (a data-bin of its own)."""
        if not self.args.test:
            return self.data, self.raw / "test.en-de"
        prefix = Path(self.args.test).resolve()
        out = self.work / f"test-bin-{self.test_key()}"
        if not out.exists():
            self.log(f"test set: {prefix}.{{de,en}} with the data-bin's vocabulary")
            with staged_dir(str(out)) as staging:
                self.run(
                    [
                        BIN / "xlm-fairseq-prepare",
                        staging,
                        "--force",
                        "--langs",
                        ",".join(LANGS),
                        "--quiet",
                        "--spm-model",
                        self.data / "spm.model",
                        "--dict",
                        self.data / "dict.txt",
                        "--mono",
                        f"train:de={prefix}.de",
                        "--mono",
                        f"train:en={prefix}.en",
                        "--para",
                        f"test:de-en={prefix}",
                    ],
                    self.work / "prepare-test.log",
                )
        return out, prefix

    def test_key(self) -> str:
        """What the scores of a model depend on besides the model: the test files' contents."""
        if not self.args.test:
            return "drawn"
        return hashlib.sha256("".join(file_sha256(f"{self.args.test}.{lang}") for lang in LANGS).encode()).hexdigest()[
            :12
        ]

    # ---- runs ------------------------------------------------------------------------------

    def train(self, name, spec):
        kind, init, loop, steps = spec
        p = self.p
        save = self.work / "checkpoints" / name
        info = self.finished(save)
        if info is not None:
            return info
        minutes = p["pretrain_minutes"] if kind == "pretrain" else p["mt_minutes"]
        if kind == "pretrain":
            cmd = [
                BIN / "fairseq-train",
                self.data,
                "--task",
                "cross_lingual_lm",
                "--langs",
                ",".join(LANGS),
                "--mlm-steps",
                steps,
                "--tokens-per-sample",
                p["stream"],
                *model_args(dict(p, dropout=p["pretrain_dropout"])),
                *train_args(save, p["pretrain_lr"], p["pretrain_warmup"], p["pretrain_batch"], minutes),
            ]
        elif kind in ("unmt", "sup"):
            cmd = [
                BIN / "fairseq-train",
                self.data,
                "--task",
                "translation_lm",
                "--langs",
                ",".join(LANGS),
                *model_args(p),
                "--max-sentence-len",
                "100",
                *train_args(save, p["mt_lr"], p["mt_warmup"], p["mt_batch"], minutes, step_per_objective=loop == "xlm"),
            ]
            if kind == "unmt":
                cmd += ["--ae-steps", "en,de", "--bt-steps", "en-de-en,de-en-de"]
            else:
                cmd += ["--mt-steps", steps]
            if init != "random":
                cmd += [
                    "--pretrained-xlm-checkpoint",
                    self.work / "checkpoints" / f"pretrain_{init}" / "checkpoint_last.pt",
                ]
        else:  # fairseq's own transformer, the same dimensions and optimiser
            src, tgt = steps.split("-")
            cmd = [
                BIN / "fairseq-train",
                self.work / "peer-bin",
                "--task",
                "translation",
                "-s",
                src,
                "-t",
                tgt,
                "--arch",
                "transformer",
                *model_args(p)[2:],
                "--share-decoder-input-output-embed",
                "--criterion",
                "cross_entropy",
                *train_args(save, p["mt_lr"], p["mt_warmup"], p["mt_batch"], minutes, step_per_objective=False),
            ]
        self.log(f"train {name}: {minutes:g} min")
        start = time.time()
        self.run(cmd, save / "stdout.log")
        info = {
            "minutes": minutes,
            "wall_s": round(time.time() - start, 1),
            "updates": checkpoint_updates(save / "checkpoint_last.pt"),
        }
        write_json(save / "done.json", info)
        return info

    def evaluate(self, name, spec):
        kind, _, _, steps = spec
        save = self.work / "checkpoints" / name
        checkpoint = save / "checkpoint_last.pt"
        out = save / ("eval.json" if kind == "pretrain" or not self.args.test else f"eval-{self.test_key()}.json")
        if out.exists():
            import json

            return json.loads(out.read_text())
        if kind == "pretrain":
            measure = Measure(self, self.data, LANGS, tokens_per_sample=self.p["stream"])
            bli = Path(self.args.shared_data) / "bli" / "de-en.dev.txt"
            result = {
                "lm": measure.lm(checkpoint, save / "validate.log"),
                "probe": measure.probe(checkpoint, bli, save / "probe.json", save / "probe.log"),
                "probe_random": measure.probe(
                    checkpoint, bli, save / "probe_random.json", save / "probe_random.log", random_init=True
                ),
            }
            write_json(out, result)
            return result
        data, reference = self.test_set()
        directions = ["de-en", "en-de"] if steps is None or "," in steps else [steps]
        result = {}
        measure = Measure(self, data if kind != "peer" else self.peer_test_bin(data), LANGS)
        task = "translation_lm" if kind != "peer" else "translation"
        for direction in directions:
            src, tgt = direction.split("-")
            result[direction] = measure.mt(
                checkpoint, src, tgt, f"{reference}.{tgt}", save, beam=self.p["beam"], task=task
            )
        write_json(out, result)
        return result

    def peer_test_bin(self, data: Path) -> Path:
        """fairseq's translation task reads dict.{src,tgt}.txt: the test split of ``data`` beside them."""
        if data == self.data:
            return self.work / "peer-bin"
        peer = data.parent / f"{data.name}-peer"
        peer.mkdir(exist_ok=True)
        for lang in LANGS:
            copy_file(self.data / "dict.txt", peer / f"dict.{lang}.txt")
        for f in data.glob("test.de-en.*"):
            if not (peer / f.name).is_symlink():
                (peer / f.name).symlink_to(f)
        return peer

    def main(self):
        table = runs_table()
        wanted = DEFAULT_RUNS if not self.args.runs else self.args.runs.split(",")
        unknown = [w for w in wanted if w not in table]
        if unknown:
            self.fail(f"--runs: unknown run '{unknown[0]}' (known: {', '.join(table)})")
        if self.args.fresh and self.work.exists():
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True, exist_ok=True)
        self.prepare()
        # pretraining runs the MT runs need come first
        needed = {
            f"pretrain_{table[w][1]}" for w in wanted if table[w][0] in ("unmt", "sup") and table[w][1] != "random"
        }
        order = [n for n in table if n in needed or n in wanted]
        results = self.load_results(self.results_path)
        if results.get("test_key", "drawn") != self.test_key():
            # the runs of an earlier invocation were scored on another test set: the table holds this one's
            results = {}
        results["test_key"] = self.test_key()
        _, reference = self.test_set()
        results["copy_bleu"] = {
            f"{s}-{t}": copy_bleu(f"{reference}.{s}", f"{reference}.{t}") for s, t in (("de", "en"), ("en", "de"))
        }
        results["test_lines"] = len(read_lines(f"{reference}.de"))
        for name in order:
            spec = table[name]
            results[name] = {"train": self.train(name, spec), "eval": self.evaluate(name, spec)}
            write_json(self.results_path, results, indent=1)
        self.publish(self.work, report(self.p, self.args.test, results))
        figure = figures.ablation(self.work, results)
        if figure is not None:
            self.log(f"figure: {figure}")


def main(argv=None):
    p = ArgumentParser(name="ablation", prog="recipes/ablation.sh", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--budget",
        help="CPU time for all runs, e.g. 4h or 90m (default 2h; --quick 2.4m): each LM "
        f"{PRETRAIN_SHARE:.0%} of it, each MT run {MT_SHARE:.1%}".replace("%", "%%"),
    )
    p.add_argument("--test", metavar="PREFIX", help="score on PREFIX.de / PREFIX.en (raw, line-aligned) instead")
    p.add_argument("--quick", action="store_true", help="tiny data, model and budgets (a pipeline check, what CI runs)")
    p.add_argument("--pretrain-minutes", type=float, help="minutes of each pretraining run (instead of the share)")
    p.add_argument("--mt-minutes", type=float, help="minutes of each MT run (instead of the share)")
    p.add_argument("--mt-lr", type=float, help="peak learning rate of the MT runs")
    p.add_argument("--beam", type=int, help="beam size of the BLEU runs (default 5; --quick 1)")
    p.add_argument("--runs", help="comma-separated subset of the runs (their pretraining comes along)")
    p.add_argument("--work-dir", help="where everything goes (default runs/ablation[-quick])")
    add_shared_data_option(p)
    p.add_argument("--fresh", action="store_true", help="delete the work directory first")
    args = p.parse_args(argv)
    check_shared_data(p, args)
    if args.budget:
        try:
            parse_budget(args.budget)
        except ValueError as e:
            p.error(f"--budget: {e}")
    if args.test:
        for lang in LANGS:
            if not Path(f"{args.test}.{lang}").is_file():
                p.error(f"--test: {args.test}.{lang} not found")
        n = {lang: len(read_lines(f"{args.test}.{lang}")) for lang in LANGS}
        if len(set(n.values())) != 1:
            p.error(f"--test: {args.test}.de has {n['de']} lines, {args.test}.en {n['en']}: not line-aligned")
    Ablation(args).main()


if __name__ == "__main__":
    main()
