"""The classification recipe's runs (``python -m recipes.experiments.xcls``; its options and what it does: ``cli.py``):
the data-bin, each LM pretrained and scored at its budgets, the classifiers fine-tuned, the seeds and self-training."""

import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from recipes.experiments import figures
from recipes.experiments.driver import ROOT, Driver
from recipes.experiments.measure import BIN, Measure, measure_speed
from recipes.experiments.xcls import baselines as xcls_baselines
from recipes.experiments.xcls import corpus as xcls_corpus
from recipes.experiments.xcls import report as xcls_report
from recipes.experiments.xcls import self_training as xcls_self_training
from recipes.experiments.xcls.report import FINETUNE_LANG
from recipes.experiments.xcls.scoring import ClassifierScoring
from recipes.experiments.xcls.settings import BLI, EXPERIMENT, INITS, PRETRAIN_STEPS, SAMPLE, TINY
from recipes.train.optim import optim_flags
from recipes.train.stages import copy_file, write_json, write_text
from recipes.train.trained import checkpoint_updates


class Recipe(Driver, ClassifierScoring):
    name = "xcls"

    def __init__(self, args):
        super().__init__()
        self.args = args
        mode = "tiny" if args.tiny else "experiment" if args.experiment else "sample"
        self.p = dict({"tiny": TINY, "experiment": EXPERIMENT, "sample": SAMPLE}[mode])
        self.default_text, mode_vocab = self.p["corpus"], self.p["vocab"]  # what a dir from before corpus.txt holds
        for key in (
            "finetune_epochs",
            "finetune_lr",
            "inits",
            "seeds",
            "pretrain_lr",
            "pretrain_max_tokens",
            "corpus",
            "vocab",
        ):
            if getattr(args, key) is not None:
                self.p[key] = getattr(args, key)
        if args.pretrain_updates is not None:  # one budget or the other
            self.p.update(pretrain_updates=args.pretrain_updates, lm_minutes=None)
        if args.lm_minutes is not None:
            self.p.update(pretrain_updates=None, lm_minutes=args.lm_minutes)
        if args.size is not None:
            self.p.update(dim=args.size[0], layers=args.size[1], heads=max(4, args.size[0] // 64))
        self.p["device"] = args.device
        self.lock = threading.Lock()  # --jobs: one writer of results.json at a time
        if args.jobs > 1 and self.p["lm_minutes"] and args.lm_clock == "updates":
            self.fail("--jobs: LMs side by side need --lm-clock time or --pretrain-updates (speeds measured alone)")
        self.inits = [i for i in self.p["inits"].split(",") if i]
        unknown = [i for i in self.inits if i not in INITS]
        if unknown:
            self.fail(f"--inits: unknown init '{unknown[0]}' (known: {', '.join(INITS)})")
        self.mode = mode
        corpus = "" if args.corpus is None else "-" + args.corpus.replace("+", "-")  # another text, another dir
        corpus += "" if self.p["vocab"] == mode_vocab else f"-vocab{self.p['vocab']}"
        self.work = Path(args.work_dir or ROOT / "runs" / f"xcls-{mode}{corpus}").resolve()
        self.text = self.p["corpus"] + ("" if self.p["vocab"] == mode_vocab else f", vocabulary {self.p['vocab']}")
        self.shared = shared = Path(args.shared_data)
        self.source = shared if self.p["corpus"].startswith("shared") else ROOT / "recipes" / "data"
        self.xcls_source = shared / "xcls" if mode == "experiment" else ROOT / "recipes" / "data" / "xcls"
        self.bli = shared.joinpath(*BLI)
        self.data = self.work / "data-bin"
        self.xcls = self.work / "xcls"
        self.measure = Measure(self, self.data, ("de", "en"), tokens_per_sample=self.p["tokens_per_sample"])

    # ---- helpers -----------------------------------------------------------------------

    def model_args(self, dropout=0.1):
        p = self.p
        return [
            "--arch",
            "xlm_tiny",
            "--encoder-embed-dim",
            p["dim"],
            "--encoder-layers",
            p["layers"],
            "--encoder-attention-heads",
            p["heads"],
            "--encoder-ffn-embed-dim",
            4 * p["dim"],
            "--dropout",
            dropout,
            "--attention-dropout",
            dropout,
        ]

    def common(self, save, log, lr, warmup, seed=1):
        """What every run shares: CPU, JSON logs, the shared optimiser at ``lr`` after ``warmup``."""
        device = ["--cpu"] if self.p["device"] == "cpu" else []
        return [
            "--user-dir",
            ROOT / "xlm_fairseq",
            *device,
            "--num-workers",
            "0",
            "--seed",
            seed,
            "--log-format",
            "json",
            "--log-interval",
            "50",
            "--no-epoch-checkpoints",
            "--save-dir",
            save,
            "--log-file",
            log,
            *optim_flags(lr=lr, warmup_updates=warmup),
        ]

    def budgets(self):
        """[(key, minutes or None, updates or None)]: the LM budgets of every pretraining run."""
        if self.p["lm_minutes"]:
            return [(f"{m:g}min", m, None) for m in self.p["lm_minutes"]]
        return [(f"{self.p['pretrain_updates']}u", None, self.p["pretrain_updates"])]

    # ---- stages ------------------------------------------------------------------------

    def prepare(self):
        """The classification files (the random init's directory gets the data-bin's vocabulary and
        pipeline beside them), the pretraining text and its data-bin."""
        prepared, done = self.work / "corpus.txt", (self.data / "dict.txt").exists()  # records self.text
        made = prepared.read_text().strip() if prepared.exists() else self.default_text if done else None
        if made not in (None, self.text):
            self.fail(
                f"--corpus/--vocab-size: {self.work} was prepared with '{made}', not '{self.text}'; name another "
                "--work-dir, or add --fresh to redo it"
            )
        if done:
            return
        raw = self.work / "raw"
        self.xcls.mkdir(parents=True, exist_ok=True)
        for name in ("train.en.tsv", "valid.en.tsv", "valid.de.tsv"):
            lines = (self.xcls_source / name).read_text(encoding="utf-8").splitlines(keepends=True)
            if self.p["train_rows"] and name.startswith("train."):
                lines = lines[: self.p["train_rows"] + 1]
            (self.xcls / name).write_text("".join(lines), encoding="utf-8")
        held_out = xcls_corpus.classification_sentences(sorted(self.xcls_source.glob("*.tsv")))
        counts = xcls_corpus.build(self.p["corpus"], self.source, raw, held_out, self.p.get("corpus_lines", 0))
        self.log(f"pretraining text ({self.p['corpus']}): {counts}")
        self.run(
            [
                BIN / "xlm-fairseq-prepare",
                self.data,
                "--langs",
                "de,en",
                "--vocab-size",
                self.p["vocab"],
                "--quiet",
                "--workers",
                "2",
                "--mono",
                f"train:en={raw}/mono.en",
                "--mono",
                f"train:de={raw}/mono.de",
                "--para",
                f"train:de-en={raw}/train.de-en",
                "--para",
                f"valid:de-en={raw}/valid.de-en",
                "--mono",
                f"valid:en={raw}/valid.de-en.en",
                "--mono",
                f"valid:de={raw}/valid.de-en.de",
            ],
            self.work / "prepare.log",
        )
        write_text(prepared, self.text + "\n")

    def random_init_dir(self):
        """The classification files with the data-bin's vocabulary and text pipeline beside them:
        what --task xlm_classification reads without a pretrained model."""
        out = self.work / "xcls-random"
        out.mkdir(exist_ok=True)
        vocabulary = [self.data / n for n in ("dict.txt", "text_pipeline.json", "spm.model")]
        for f in list(self.xcls.glob("*.tsv")) + vocabulary:
            copy_file(f, out / f.name)  # every time: a copy cut short by a kill is never kept
        return out

    def pretrain_command(self, init, save, minutes, max_update):
        p = self.p
        return [
            BIN / "fairseq-train",
            self.data,
            *self.common(save, save / "train.log", p["pretrain_lr"], p["pretrain_warmup"]),
            *self.model_args(p["pretrain_dropout"]),
            "--task",
            "cross_lingual_lm",
            "--langs",
            "de,en",
            "--mlm-steps",
            PRETRAIN_STEPS[init],
            "--step-per-objective",
            "--tokens-per-sample",
            p["tokens_per_sample"],
            "--max-tokens",
            p["pretrain_max_tokens"],
            "--max-update",
            max_update,
            "--stop-time-hours",
            f"{minutes / 60:.6f}",
            "--disable-validation",
            "--save-interval-updates",
            10**7,
        ]

    def speed(self, init, results):
        """The LM's updates per second, measured alone before its first budget (cached in results)."""
        speeds = results.setdefault("speed", {})
        if init not in speeds:
            seconds = self.p["calibration_seconds"]
            self.log(f"measure the speed of pretraining {init}: {seconds} s")
            save = self.work / "calibrate" / init
            cmd = self.pretrain_command(init, save, seconds / 60, 10**8)
            speeds[init] = measure_speed(self, cmd, save, self.p["calibration_interval"])
            write_json(self.work / "results.json", results, indent=1)
        return speeds[init]

    def pretrain(self, init, results):
        """Train ``init``'s LM to each budget in turn (a resumed run continues the same schedule);
        yields (budget key, the checkpoint kept at it)."""
        save = self.work / "checkpoints" / f"pretrain_{init}"
        save.mkdir(parents=True, exist_ok=True)
        for key, minutes, updates in self.budgets():
            kept = save / f"budget_{key}.pt"
            if not kept.exists():
                timed = minutes is not None and self.args.lm_clock == "time"  # training time, cumulative over budgets
                if updates is None and not timed:
                    updates = max(1, round(self.speed(init, results) * 60 * minutes))
                guard = minutes if timed else 10 * minutes if minutes else self.p["pretrain_minutes"]  # else a guard
                to = f"{minutes:g} minutes of training" if timed else f"{updates} updates"
                self.log(f"pretrain {init} ({PRETRAIN_STEPS[init]}): to {key} = {to}")
                self.run(self.pretrain_command(init, save, guard, updates or 10**9), save / f"stdout_{key}.log")
                copy_file(save / "checkpoint_last.pt", kept)
            yield key, kept

    def score_lm(self, key, kept):
        """XLM's validation perplexity, the lexicon probe and sentence retrieval of one kept LM."""
        save = kept.parent
        out = {"updates": checkpoint_updates(kept), "lm": self.measure.lm(kept, save / f"validate_{key}.log")}
        if self.bli.exists():
            out["probe"] = self.measure.probe(kept, self.bli, save / f"probe_{key}.json", save / f"probe_{key}.log")
        out["retrieval"] = self.retrieval(save, kept.name, data=self.data)
        return out

    def classifier_dir(self, row, seed=1):
        return self.work / "checkpoints" / (f"classify_{row}" + (f"_seed{seed}" if seed != 1 else ""))

    def finetune(self, row, pretrained=None, seed=1, data=None):
        """``row``'s classifier on English (``data``: a directory with German pseudo-labelled rows too, every
        row read with English's id: --self-train) from ``pretrained`` or random init."""
        save = self.classifier_dir(row, seed)
        train = [FINETUNE_LANG] if data is None else [f"{FINETUNE_LANG},de", "--lang-id", FINETUNE_LANG]
        info = self.finished(save)
        if info is None:
            p, log = self.p, save / "train.log"
            if pretrained is None:
                data, start_from = self.random_init_dir(), []
            else:
                data, start_from = data or self.xcls, ["--pretrained-xlm-checkpoint", pretrained]
            rows = "English" if train == [FINETUNE_LANG] else "English and pseudo-labelled German"
            self.log(f"fine-tune {row} on {rows} (seed {seed}): {p['finetune_epochs']} epochs")
            start = time.time()
            self.run(
                [
                    BIN / "fairseq-train",
                    data,
                    *self.common(save, log, p["finetune_lr"], 100, seed),
                    *self.model_args(),
                    *start_from,
                    "--task",
                    "xlm_classification",
                    "--train-langs",
                    *train,
                    "--valid-langs",
                    "en,de",
                    "--truncate-len",
                    p["truncate_len"],
                    "--batch-size",
                    p["batch"],
                    "--max-epoch",
                    p["finetune_epochs"],
                    "--best-checkpoint-metric",
                    "acc_en",
                    "--maximize-best-checkpoint-metric",
                ],
                save / "stdout.log",
            )
            info = {"updates": checkpoint_updates(save / "checkpoint_last.pt"), "wall_s": round(time.time() - start, 1)}
            write_json(save / "done.json", info)
        return dict(info, **self.evaluate(save))

    # ---- main --------------------------------------------------------------------------

    def best_row(self, results):
        """The row of best German accuracy (English id) fine-tuned again with seeds 2..N (its spread), and
        with ``--self-train``, each seed's rounds of self-training: (seeds, self_training) summaries."""
        rows = {k: r for k, r in results["runs"].items() if r.get("lm") and r.get("classifier")}
        if not rows or (self.p["seeds"] < 2 and not self.args.self_train):
            return None, None
        best = max(rows, key=lambda k: rows[k]["classifier"]["acc_de_en_id"])
        seeds, lm, rounds = list(range(1, self.p["seeds"] + 1)), rows[best]["checkpoint"], self.args.self_train
        with ThreadPoolExecutor(self.args.jobs) as pool:
            runs = [rows[best]["classifier"], *pool.map(lambda seed: self.finetune(best, lm, seed), seeds[1:])]
        summary = {"row": best, "seeds": seeds, **xcls_report.spreads(runs)} if len(seeds) > 1 else None
        if not rounds:
            return summary, None
        unlabelled = xcls_self_training.make_pool(self) / xcls_self_training.POOL  # once, before the seeds' threads
        with ThreadPoolExecutor(self.args.jobs) as pool:
            trained = list(pool.map(lambda seed: xcls_self_training.run(self, best, lm, seed, rounds), seeds))
        tfidf = xcls_baselines.tfidf(self.xcls, unlabelled, xcls_self_training.STEP)  # the reference's round 1
        return summary, dict(xcls_self_training.summary(best, seeds, runs, trained), tfidf=tfidf)

    def save_results(self, results, update=None):
        """``update()`` applied to the results, then written (one thread at a time: --jobs)."""
        with self.lock:
            if update is not None:
                update()
            write_json(self.work / "results.json", results, indent=1)

    def train_init(self, init, results):
        """``init``'s LM at each budget, scored, and its classifier (random: the classifier alone)."""
        runs, last = results["runs"], self.budgets()[-1][0]
        kept_lms = [(None, None)] if init == "random" else self.pretrain(init, results)
        for key, kept in kept_lms:
            row = init if key is None else f"{init}@{key}"
            entry = runs.get(row) or {"init": init, "budget": key}
            scored = {"checkpoint": str(kept), "lm": self.score_lm(key, kept)} if kept and "lm" not in entry else {}
            self.save_results(results, lambda: runs.__setitem__(row, dict(entry, **scored)))
            entry = runs[row]
            if key not in (None, last) and self.args.finetune_budgets == "last":
                continue  # the LM scored, its classifier later
            classifier = self.finetune(row, kept)
            self.save_results(results, lambda: entry.__setitem__("classifier", classifier))
            self.log(
                f"{row}: accuracy en {classifier['acc_en']:.2f} %, de {classifier['acc_de']:.2f} % (own id), "
                f"{classifier['acc_de_en_id']:.2f} % (English id)"
            )

    def main(self):
        if self.args.fresh and self.work.exists():
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True, exist_ok=True)
        self.prepare()
        results_path = self.work / "results.json"
        results = self.load_results(results_path)
        results["majority"], results["rows"] = xcls_baselines.majority(self.xcls)
        results["tfidf"] = xcls_baselines.tfidf(self.xcls)
        results.setdefault("runs", {})
        results["budget_unit"] = f"LM {'GPU' if self.p['device'] == 'cuda' else 'CPU'}-minutes"
        self.measure.valid_mono(), self.retrieval_texts()  # made once, before any --jobs run in parallel
        with ThreadPoolExecutor(self.args.jobs) as pool:
            list(pool.map(lambda init: self.train_init(init, results), self.inits))
        runs = results["runs"]
        first_lm = next((r["checkpoint"] for r in runs.values() if r.get("checkpoint")), None)
        if first_lm and self.bli.exists() and "probe_random" not in results:
            save = self.work / "checkpoints"
            results["probe_random"] = self.measure.probe(
                first_lm, self.bli, save / "probe_random.json", save / "probe_random.log", random_init=True
            )
        results["seeds"], results["self_training"] = self.best_row(results)
        write_json(results_path, results, indent=1)
        self.publish(self.work, xcls_report.table(self.p, self.mode, results))
        for figure in (figures.xcls(self.work, results), figures.xcls_self_training(self.work, results)):
            if figure is not None:
                self.log(f"figure: {figure}")
