#!/usr/bin/env python3
"""Which model and settings learn most per CPU-minute on this machine? A scaling sweep.

    bash recipes/scale.sh [--quick] [--phase pretrain|translate|all] [--runs NAME,...] [--budgets 15,60]

Data: a larger draw of the shipped sample's rules (``recipes/data/make_sample.py``) from
``../shared/data/en-de/docs.natural``: 18,000 monolingual sentences per language (en and de from
different documents), 12,000 parallel pairs, 500 valid and 1,000 test sentences of held-out
documents. One joint sentencepiece vocabulary per vocabulary size of the sweep.

Pretraining runs (MLM on en and de + TLM on the pairs, XLM's loop ``--step-per-objective``, the
shared optimiser of ``recipes/train/optim.flags``: Adam (0.9, 0.98), clip 5, inverse-sqrt decay; dropout
0.1) vary one thing at a time around the base ``d128_l3`` (128 dims, 3 layers, 4 heads, FFN 512,
vocabulary 4,000, 128-token streams, 2,048 tokens per step, lr 1e-3, 1,000 warm-up steps), and the
model size along a ladder. Each is
bounded by wall-clock minutes (``--stop-time-hours``, cumulative over resumes): at every budget of
the run its checkpoint is kept and scored — XLM's validation perplexity (every predicted position
shown as the mask) per language beside the unigram model of the training text, and the alignment
probe (``xlm-fairseq-lexicon``: word translation P@1 on ``../shared/data/bli/de-en.dev.txt``) —
then training resumes to the next budget. Inverse-sqrt decay does not depend on the budget, so one
run gives every budget's point. A pretraining budget is counted in updates: each run's speed is
measured alone first (75 s of its own command), and m minutes are m x 60 x that many updates per
second, so that what else the machine does later cannot change what a budget buys.

Translation runs start from one LM of the sweep (default ``stream64_dropout0@60``, or random
initialisation) and train ``translation_lm`` on the same data, dropout 0.1 whatever the LM ran with:
supervised (``--mt-steps`` on the 12,000 pairs), semi-supervised (MT + AE + online BT on the
monolingual text) and unsupervised (AE + BT only), lr 1e-3 with 500 warm-up steps and 2,000 tokens
per batch, each varied; each is scored at every budget on the test set in both directions
(beam 5): BLEU and reference log-probability, beside the BLEU of copying the source.

Translation budgets are wall-clock minutes (back-translation's speed changes as the model learns):
run nothing else on the machine meanwhile. Results: WORK/results.{md,json}; finished budgets are
skipped on a re-run (``--fresh`` redoes all).
"""

import shutil
import sys
from pathlib import Path

from preprocess.errors import ArgumentParser
from recipes.experiments import figures
from recipes.experiments.driver import ROOT, Driver, add_shared_data_option, check_shared_data
from recipes.experiments.measure import (
    BIN,
    CALIBRATION_SECONDS,
    Measure,
    copy_bleu,
    measure_speed,
    minutes_list,
    model_args,
    train_args,
)
from recipes.experiments.scale.report import report
from recipes.experiments.scale.runs import (
    DATA,
    EMBEDDING_TENSORS,
    LANGS,
    MODES,
    PRETRAIN_BASE,
    PRETRAIN_RUNS,
    QUICK_CALIBRATION_SECONDS,
    QUICK_DATA,
    QUICK_PRETRAIN,
    TIED,
    TRANSLATION_BASE,
    TRANSLATION_RUNS,
)
from recipes.train.stages import copy_file, write_json
from recipes.train.trained import checkpoint_updates


class Sweep(Driver):
    name = "scale"

    def __init__(self, args):
        super().__init__()
        self.args = args
        self.quick = args.quick
        self.work = Path(args.work_dir or ROOT / ("runs/scale-quick" if args.quick else "runs/scale")).resolve()
        self.shared = Path(args.shared_data)
        self.bli = self.shared / "bli" / "de-en.dev.txt"
        self.raw = self.work / "raw" / "en-de"
        self.results_path = self.work / "results.json"

    # ---- data ------------------------------------------------------------------------------

    def data_bin(self, vocab) -> Path:
        """The data-bin of one vocabulary size (valid sides also as monolingual valid files)."""
        out = self.work / f"data-bin-{vocab}"
        if (out / "dict.txt").exists():
            return out
        if not (self.raw / "test.en-de.de").exists():
            sizes = QUICK_DATA if self.quick else DATA
            self.log(f"data: {sizes} (held-out documents) from {self.shared}")
            self.run(
                [
                    sys.executable,
                    ROOT / "recipes/data/make_sample.py",
                    self.shared,
                    "--out",
                    self.raw.parent,
                    "--pairs",
                    "en-de",
                    "--xcls-train",
                    "0",
                    *[x for k, v in sizes.items() for x in (f"--{k}", v)],
                ],
                self.work / "make_sample.log",
            )
        d = self.raw
        self.run(
            [
                BIN / "xlm-fairseq-prepare",
                out,
                "--langs",
                ",".join(LANGS),
                "--vocab-size",
                vocab,
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
            self.work / f"prepare-{vocab}.log",
        )
        return out

    # ---- pretraining -----------------------------------------------------------------------

    def pretrain_config(self, name):
        changes, budgets = PRETRAIN_RUNS[name]
        p = dict(PRETRAIN_BASE, **changes)
        if self.quick:
            p.update(QUICK_PRETRAIN)
            budgets = (0.2, 0.4)[: len(budgets)]
        return p, self.args.budgets or budgets

    def pretrain_command(self, name, save, minutes_, max_update=100000000):
        p, _ = self.pretrain_config(name)
        return [
            BIN / "fairseq-train",
            self.data_bin(p["vocab"]),
            "--task",
            "cross_lingual_lm",
            "--langs",
            ",".join(LANGS),
            "--mlm-steps",
            p["steps"],
            "--tokens-per-sample",
            p["stream"],
            *model_args(p),
            *train_args(save, p["lr"], p["warmup"], p["batch"], minutes_, max_update),
        ]

    def calibrate(self, name, results) -> float:
        """Updates per second of the run's very command on this machine, measured alone for
        ``CALIBRATION_SECONDS`` (the first log interval left out): pretraining runs are then bounded by
        updates, so that whatever else the machine does later cannot change what a budget buys."""
        speeds = results.setdefault("speed", {})
        if name not in speeds:
            seconds = QUICK_CALIBRATION_SECONDS if self.quick else CALIBRATION_SECONDS
            self.log(f"calibrate {name}: {seconds} s")
            save = self.work / "calibrate" / name
            # --quick's few seconds: windows of 5 updates, so that a busy machine still logs several
            interval = 5 if self.quick else 20
            speeds[name] = measure_speed(self, self.pretrain_command(name, save, seconds / 60), save, interval)
            write_json(self.results_path, results, indent=1)
        return speeds[name]

    def pretrain(self, name, results):
        p, budgets = self.pretrain_config(name)
        data = self.data_bin(p["vocab"])
        save = self.work / "pretrain" / name
        save.mkdir(parents=True, exist_ok=True)
        entry = results.setdefault("pretrain", {}).setdefault(name, {"config": p, "budgets": {}})
        measure = Measure(self, data, LANGS, tokens_per_sample=p["stream"])
        for budget, key, kept in self.pending(entry, save, budgets):
            if not kept.exists():
                updates = max(1, round(self.calibrate(name, results) * 60 * budget))
                self.log(f"pretrain {name}: to {budget:g} min = {updates} updates")
                cmd = self.pretrain_command(name, save, 10 * budget, max_update=updates)  # time: a guard only
                self.run(cmd, save / f"stdout_{key}.log")
                copy_file(save / "checkpoint_last.pt", kept)
            self.log(f"pretrain {name}: scoring the {budget:g}-min checkpoint")
            point = {"updates": checkpoint_updates(kept), "params": self.params(kept)}
            point["lm"] = measure.lm(kept, save / f"validate_{key}.log")
            point["probe"] = measure.probe(kept, self.bli, save / f"probe_{key}.json", save / f"probe_{key}.log")
            entry["budgets"][key] = point
            write_json(self.results_path, results, indent=1)
        random_probe = save / "probe_random.json"
        if "probe_random" not in entry:
            kept = save / f"budget_{budgets[0]:g}.pt"
            entry["probe_random"] = measure.probe(kept, self.bli, random_probe, save / "probe_random.log", True)
            write_json(self.results_path, results, indent=1)

    @staticmethod
    def pending(entry, save, budgets):
        """(budget, its key, the checkpoint kept at it) for each budget of a run not scored yet."""
        for budget in budgets:
            key = f"{budget:g}"
            if key not in entry["budgets"]:
                yield budget, key, save / f"budget_{key}.pt"

    @staticmethod
    def params(checkpoint) -> dict:
        from xlm_fairseq import checkpoints

        # parameters only: not the tied projection (the embeddings' tensor) nor the language list of older checkpoints
        state = {k: v for k, v in checkpoints.load(str(checkpoint))["model"].items() if not k.endswith("_extra_state")}
        state = {k: v for k, v in state.items() if not k.endswith(TIED)}
        total = sum(v.numel() for v in state.values())
        embedding = sum(v.numel() for k, v in state.items() if k.endswith(EMBEDDING_TENSORS))
        return {"total": total, "non_embedding": total - embedding}

    # ---- translation -----------------------------------------------------------------------

    def translation_config(self, name):
        changes, budgets = TRANSLATION_RUNS[name]
        p = dict(TRANSLATION_BASE, **changes)
        if self.args.lm:  # every run from this LM; random-init runs take its architecture
            lm_name = self.args.lm.partition("@")[0]
            p["init"] = f"random:{lm_name}" if p["init"].startswith("random:") else self.args.lm
        if self.quick:
            p["init"] = p["init"].replace("@60", "@0.4")
            budgets = (0.2, 0.4)[: len(budgets)]
        return p, self.args.budgets or budgets

    def translate(self, name, results):
        p, budgets = self.translation_config(name)
        random_init = p["init"].startswith("random:")
        lm_name, _, lm_budget = p["init"].removeprefix("random:").partition("@")
        lm, _ = self.pretrain_config(lm_name)
        data = self.data_bin(lm["vocab"])
        save = self.work / "translate" / name
        save.mkdir(parents=True, exist_ok=True)
        entry = results.setdefault("translate", {}).setdefault(name, {"config": p, "budgets": {}})
        measure = Measure(self, data, LANGS)
        steps = []
        for kind, value in MODES[p["mode"]].items():
            steps += [f"--{kind}-steps", value]
        init = []
        if not random_init:
            init = ["--pretrained-xlm-checkpoint", self.work / "pretrain" / lm_name / f"budget_{lm_budget}.pt"]
            if not init[1].exists():
                self.fail(f"{name} starts from {init[1]}: run the pretraining run {lm_name} first")
        for budget, key, kept in self.pending(entry, save, budgets):
            if not kept.exists():
                self.log(f"translate {name}: to {budget:g} min")
                cmd = [
                    BIN / "fairseq-train",
                    data,
                    "--task",
                    "translation_lm",
                    "--langs",
                    ",".join(LANGS),
                    *steps,
                    "--lambda-ae",
                    "0:1,100000:0.1,300000:0",
                    "--max-sentence-len",
                    "100",
                    *init,
                    *model_args(dict(lm, dropout=p["dropout"], lang_emb=True)),  # the decoder needs its target's
                    *train_args(save, p["lr"], p["warmup"], p["batch"], budget),
                ]
                self.run(cmd, save / f"stdout_{key}.log")
                copy_file(save / "checkpoint_last.pt", kept)
            self.log(f"translate {name}: scoring the {budget:g}-min checkpoint")
            point = {"updates": checkpoint_updates(kept)}
            out = save / f"eval_{key}"
            out.mkdir(exist_ok=True)
            for src, tgt in (("de", "en"), ("en", "de")):
                ref = self.raw / f"test.en-de.{tgt}"
                point[f"{src}-{tgt}"] = measure.mt(kept, src, tgt, ref, out, beam=1 if self.quick else 5)
            entry["budgets"][key] = point
            write_json(self.results_path, results, indent=1)

    def main(self):
        if self.args.fresh and self.work.exists():
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True, exist_ok=True)
        results = self.load_results(self.results_path)
        phases = ["pretrain", "translate"] if self.args.phase == "all" else [self.args.phase]
        tables = {"pretrain": PRETRAIN_RUNS, "translate": TRANSLATION_RUNS}
        wanted = self.args.runs.split(",") if self.args.runs else None
        for phase in phases:
            names = [n for n in tables[phase] if wanted is None or n in wanted]
            if phase == "pretrain":  # every speed first, in one stretch while the machine is quiet
                for name in names:
                    self.calibrate(name, results)
            for name in names:
                (self.pretrain if phase == "pretrain" else self.translate)(name, results)
        if "copy_bleu" not in results and (self.raw / "test.en-de.de").exists():
            results["copy_bleu"] = {
                f"{s}-{t}": copy_bleu(self.raw / f"test.en-de.{s}", self.raw / f"test.en-de.{t}")
                for s, t in (("de", "en"), ("en", "de"))
            }
            results["test_lines"] = len((self.raw / "test.en-de.de").read_text(encoding="utf-8").splitlines())
            write_json(self.results_path, results, indent=1)
        self.publish(self.work, report(results))
        figure = figures.scale(self.work, results)
        if figure is not None:
            self.log(f"figure: {figure}")


def main(argv=None):
    p = ArgumentParser(name="scale", prog="recipes/scale.sh", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny data, models and budgets (a pipeline check)")
    p.add_argument("--phase", choices=("pretrain", "translate", "all"), default="all")
    p.add_argument("--runs", help="comma-separated subset of the runs of the phase(s)")
    p.add_argument("--budgets", type=minutes_list, help="budgets in minutes for the runs chosen, e.g. 15,60,240")
    p.add_argument(
        "--lm",
        help=f"translation runs start from this LM, RUN@MINUTES (default {TRANSLATION_BASE['init']})",
    )
    p.add_argument("--work-dir", help="where everything goes (default runs/scale[-quick])")
    add_shared_data_option(p)
    p.add_argument("--fresh", action="store_true", help="delete the work directory first")
    args = p.parse_args(argv)
    check_shared_data(p, args)
    if args.runs:
        known = set(PRETRAIN_RUNS) | set(TRANSLATION_RUNS)
        unknown = [r for r in args.runs.split(",") if r not in known]
        if unknown:
            p.error(f"--runs: unknown run '{unknown[0]}' (known: {', '.join(known)})")
    if args.lm:
        run, _, budget = args.lm.partition("@")
        if run not in PRETRAIN_RUNS or not budget:
            p.error(f"--lm: expected RUN@MINUTES with RUN one of the pretraining runs, got '{args.lm}'")
    Sweep(args).main()


if __name__ == "__main__":
    main()
