#!/usr/bin/env python3
"""Cross-lingual classification, XNLI-style, offline: pretrain, fine-tune on English, predict German.

    bash recipes/xcls.sh [--tiny] [--experiment] [--inits random,mlm,mlm_tlm] [--lm-minutes 15,30]
    bash recipes/xcls.sh --experiment --device cuda --size 256x4 --pretrain-max-tokens 16384 \
        --lm-minutes 3 --lm-clock time --jobs 3     # one GPU: the three inits side by side

Task: the Debian package-description topics of ``recipes/data/xcls`` (9 labels; English training rows,
English and German validation rows of the same packages; ``--experiment``: the whole set in
``../shared/data/xcls``). German is never trained on: its accuracy is zero-shot transfer.

Runs, one per ``--inits`` entry:
  random    the classifier from random initialisation (the vocabulary and pipeline of the data-bin)
  mlm       pretrained with MLM on the en and de monolingual streams
  mlm_tlm   pretrained with MLM on them and TLM on the en-de pairs (the same sentences, aligned)
Pretraining text (``recipes/lib/xcls/corpus.py``, ``--corpus``; its subwords: ``--vocab-size``) has no
description of a package of the set: none at all, or (``shared+ddtp``) those of the packages outside its
topics. Each LM trains to each of its budgets — updates (``--pretrain-updates``) or CPU-minutes
(``--lm-minutes``, counted in updates from the LM's speed measured alone, as ``recipes/scale.py`` does) —
and is scored at each: XLM's perplexity, the lexicon probe, en-de sentence retrieval, and a classifier
fine-tuned on English (the epoch of best *English* accuracy kept; ``--finetune-budgets last``: the last
budget only), which scores German with German's language id (XLM) and with English's (``--lang-id en``).
The row of best German accuracy (English id) is fine-tuned again with ``--seeds``, each seed then self-trained
with ``--self-train ROUNDS`` on the German descriptions of the training packages, their labels never read
(``recipes/lib/xcls/self_training.py``). TF-IDF + logistic regression and the majority class are the
references (``recipes/lib/xcls/baselines.py``; recipes/README.md).

On a GPU (``--device cuda``) a small model's step is bound by launches, not arithmetic: ``--jobs N`` runs N inits
(then N seeds) side by side, ``--lm-clock time`` gives each LM its minutes of training time as they go.

Results: WORK/results.{md,json}, WORK/figures/xcls.png (``--self-train``: and xcls-self-training.png); a re-run
skips finished runs (``--fresh`` redoes all).
"""

import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from preprocess.errors import ArgumentParser
from recipes.lib import experiments, figures
from recipes.lib.driver import Driver
from recipes.lib.experiments import CALIBRATION_SECONDS, Measure, measure_speed
from recipes.lib.optim import optim_flags
from recipes.lib.stages import copy_file, write_json, write_text
from recipes.lib.trained import checkpoint_updates
from recipes.lib.xcls import baselines as xcls_baselines
from recipes.lib.xcls import corpus as xcls_corpus
from recipes.lib.xcls import report as xcls_report
from recipes.lib.xcls import self_training as xcls_self_training
from recipes.lib.xcls.report import FINETUNE_LANG
from recipes.lib.xcls.scoring import ClassifierScoring

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
INITS = ("random", "mlm", "mlm_tlm")
CORPORA = ("sample", "shared", "shared+ddtp")  # recipes/lib/xcls/corpus.py
PRETRAIN_STEPS = {"mlm": "en,de", "mlm_tlm": "en,de,de-en"}
BLI = ("bli", "de-en.dev.txt")  # under --shared-data: the probe's dictionary

# model and budgets. Pretraining is bounded by updates (wall time only as a guard), so that the runs
# compare at equal compute whatever else the machine does; the classifier: Adam, warm-up then
# inverse-sqrt decay, batches of 32 rows, dropout 0.1, validation after every epoch
SAMPLE = dict(corpus="sample", vocab=4000, dim=128, layers=3, heads=4, pretrain_updates=2500, lm_minutes=None,
              pretrain_minutes=10.0, pretrain_lr=1e-3, pretrain_warmup=200, tokens_per_sample=128,
              pretrain_dropout=0.1, pretrain_max_tokens=2048, finetune_epochs=8, finetune_lr=5e-4, batch=32,
              truncate_len=128, train_rows=0, inits="random,mlm_tlm", seeds=1,
              calibration_seconds=CALIBRATION_SECONDS, calibration_interval=20)  # fmt: skip
# the scaling sweep's CPU configuration (recipes/README.md): 64-token streams, no dropout in pretraining
EXPERIMENT = dict(SAMPLE, corpus="shared", pretrain_updates=None, lm_minutes=(15.0, 30.0), pretrain_warmup=1000,
                  tokens_per_sample=64, pretrain_dropout=0.0, finetune_epochs=6, inits="random,mlm,mlm_tlm",
                  seeds=3)  # fmt: skip
TINY = dict(SAMPLE, vocab=1000, dim=64, layers=2, pretrain_updates=60, pretrain_minutes=2.0, pretrain_warmup=10,
            tokens_per_sample=64, pretrain_max_tokens=1024, finetune_epochs=1, truncate_len=64, train_rows=600,
            corpus_lines=1500, calibration_seconds=10, calibration_interval=5)  # fmt: skip


class Recipe(Driver, ClassifierScoring):
    name = "xcls"

    def __init__(self, args):
        super().__init__()
        self.args = args
        mode = "tiny" if args.tiny else "experiment" if args.experiment else "sample"
        self.p = dict({"tiny": TINY, "experiment": EXPERIMENT, "sample": SAMPLE}[mode])
        self.default_text, mode_vocab = self.p["corpus"], self.p["vocab"]  # what a dir from before corpus.txt holds
        for key in ("finetune_epochs", "finetune_lr", "inits", "seeds", "pretrain_lr", "pretrain_max_tokens", "corpus",
                    "vocab"):
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
        return ["--arch", "xlm_tiny", "--encoder-embed-dim", p["dim"], "--encoder-layers", p["layers"],
                "--encoder-attention-heads", p["heads"], "--encoder-ffn-embed-dim", 4 * p["dim"],
                "--dropout", dropout, "--attention-dropout", dropout]  # fmt: skip

    def common(self, save, log, lr, warmup, seed=1):
        """What every run shares: CPU, JSON logs, the shared optimiser at ``lr`` after ``warmup``."""
        device = ["--cpu"] if self.p["device"] == "cpu" else []
        return ["--user-dir", ROOT / "xlm_fairseq", *device, "--num-workers", "0", "--seed", seed,
                "--log-format", "json", "--log-interval", "50", "--no-epoch-checkpoints", "--save-dir", save,
                "--log-file", log, *optim_flags(lr=lr, warmup_updates=warmup)]  # fmt: skip

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
            self.fail(f"--corpus/--vocab-size: {self.work} was prepared with '{made}', not '{self.text}'; name another "
                      "--work-dir, or add --fresh to redo it")  # fmt: skip
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
        self.run([BIN / "xlm-fairseq-prepare", self.data, "--langs", "de,en", "--vocab-size",
                  self.p["vocab"], "--quiet", "--workers", "2",
                  "--mono", f"train:en={raw}/mono.en", "--mono", f"train:de={raw}/mono.de",
                  "--para", f"train:de-en={raw}/train.de-en", "--para", f"valid:de-en={raw}/valid.de-en",
                  "--mono", f"valid:en={raw}/valid.de-en.en", "--mono", f"valid:de={raw}/valid.de-en.de"],
                 self.work / "prepare.log")  # fmt: skip
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
        return [BIN / "fairseq-train", self.data, *self.common(save, save / "train.log", p["pretrain_lr"],
                p["pretrain_warmup"]), *self.model_args(p["pretrain_dropout"]), "--task", "cross_lingual_lm",
                "--langs", "de,en", "--mlm-steps", PRETRAIN_STEPS[init], "--step-per-objective",
                "--tokens-per-sample", p["tokens_per_sample"], "--max-tokens", p["pretrain_max_tokens"],
                "--max-update", max_update, "--stop-time-hours", f"{minutes / 60:.6f}", "--disable-validation",
                "--save-interval-updates", 10**7]  # fmt: skip

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
            self.run([BIN / "fairseq-train", data, *self.common(save, log, p["finetune_lr"], 100, seed),
                      *self.model_args(), *start_from, "--task", "xlm_classification", "--train-langs", *train,
                      "--valid-langs", "en,de", "--truncate-len", p["truncate_len"], "--batch-size", p["batch"],
                      "--max-epoch", p["finetune_epochs"], "--best-checkpoint-metric", "acc_en",
                      "--maximize-best-checkpoint-metric"], save / "stdout.log")  # fmt: skip
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
            self.log(f"{row}: accuracy en {classifier['acc_en']:.2f} %, de {classifier['acc_de']:.2f} % (own id), "
                     f"{classifier['acc_de_en_id']:.2f} % (English id)")  # fmt: skip

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
            results["probe_random"] = self.measure.probe(first_lm, self.bli, save / "probe_random.json",
                                                         save / "probe_random.log", random_init=True)  # fmt: skip
        results["seeds"], results["self_training"] = self.best_row(results)
        write_json(results_path, results, indent=1)
        self.publish(self.work, xcls_report.table(self.p, self.mode, results))
        for figure in (figures.xcls(self.work, results), figures.xcls_self_training(self.work, results)):
            if figure is not None:
                self.log(f"figure: {figure}")


def main(argv=None):
    p = ArgumentParser(name="xcls", prog="recipes/xcls.sh", description=__doc__.split("\n\n")[0])
    p.add_argument("--tiny", action="store_true", help="tiny data, model and budgets (a pipeline check; what CI runs)")
    p.add_argument("--experiment", action="store_true",
                   help="the shared corpora, the whole topic set, random, MLM, MLM+TLM, LMs of 15 and 30 CPU-minutes")
    p.add_argument("--inits", help="comma-separated: random, mlm, mlm_tlm (default random,mlm_tlm; --experiment all)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--lm-minutes", type=experiments.minutes_list,
                        help="LM budgets in CPU-minutes, e.g. 30,60: each LM scored and fine-tuned at each "
                             "(--experiment default 15,30)")  # fmt: skip
    budget.add_argument("--pretrain-updates", type=int, help="one LM budget in updates (default 2500; --tiny 60)")
    p.add_argument("--finetune-budgets", choices=("every", "last"), default="every",
                   help="fine-tune the LM of every budget (default) or of the last only (the others scored as LMs; "
                        "a re-run with 'every' adds their classifiers)")  # fmt: skip
    p.add_argument("--lm-clock", choices=("updates", "time"), default="updates",
                   help="--lm-minutes as updates from the LM's speed measured alone (default: equal compute "
                        "whatever else the machine does), or as minutes of training time (a GPU, --jobs)")  # fmt: skip
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where training runs: cpu (fairseq's --cpu; the tables' machine) or cuda (TF32 matmuls)")
    p.add_argument("--size", type=experiments.model_size, help="the model as DIMSxLAYERS (default 128x3)")
    p.add_argument("--pretrain-max-tokens", type=int, help="tokens of one pretraining step (default 2048)")
    p.add_argument("--pretrain-lr", type=float, help="peak learning rate of pretraining (default 1e-3)")
    p.add_argument("--jobs", type=int, default=1,
                   help="inits, then seeds, trained this many at a time (default 1; a GPU: 3, with --lm-clock time "
                        "or --pretrain-updates)")  # fmt: skip
    p.add_argument("--seeds", type=int, help="fine-tuning seeds of the best row (default 1; --experiment 3)")
    p.add_argument("--finetune-epochs", type=int, help="epochs of each fine-tuning (default 8; --experiment 6)")
    p.add_argument("--finetune-lr", type=float, help="peak learning rate of the fine-tuning (default 5e-4)")
    p.add_argument("--self-train", type=int, default=0, metavar="ROUNDS",
                   help="then self-train the best row's seeds this many rounds on unlabelled German descriptions of "
                        "the training packages (default 0; recipes/lib/xcls/self_training.py)")  # fmt: skip
    p.add_argument("--corpus", choices=CORPORA, help="pretraining text: sample (shipped manuals; default), shared "
                   "(no descriptions; --experiment's), shared+ddtp (and non-topic packages' descriptions)")  # fmt: skip
    p.add_argument("--vocab-size", dest="vocab", type=int, metavar="N",
                   help="subwords of the sentencepiece model of the pretraining text (default 4000; --tiny 1000)")
    p.add_argument("--work-dir", help="where everything goes (default runs/xcls-{sample,tiny,experiment})")
    p.add_argument("--shared-data", default=str(ROOT.parent / "shared" / "data"),
                   help="the Debian corpora (a folder recipes/data/debian.py wrote), for --experiment, --corpus "
                        "shared*, the probe and --self-train's pool (default ../shared/data)")
    p.add_argument("--fresh", action="store_true", help="delete the work directory first")
    args = p.parse_args(argv)
    if args.tiny and args.experiment:
        p.error("--tiny and --experiment exclude each other")
    if args.experiment and not (Path(args.shared_data) / "xcls" / "train.en.tsv").exists():
        p.error(f"--shared-data: {args.shared_data}/xcls/train.en.tsv not found")
    need = {"shared": "en-de/docs.natural.en", "shared+ddtp": "en-de/ddtp.en"}.get(args.corpus)  # what each reads
    if need and not (Path(args.shared_data) / need).exists():
        p.error(f"--corpus {args.corpus}: {args.shared_data}/{need} not found (see --shared-data)")
    if args.self_train < 0:
        p.error(f"--self-train: expected 0 or more rounds, got {args.self_train}")
    if args.self_train and not (Path(args.shared_data) / "en-de" / "ddtp.de").exists():
        p.error(f"--self-train: {args.shared_data}/en-de/ddtp.de not found (its pool; see --shared-data)")
    for name, value in (("--seeds", args.seeds), ("--jobs", args.jobs), ("--vocab-size", args.vocab)):
        if value is not None and value < 1:
            p.error(f"{name}: expected 1 or more, got {value}")
    if args.device == "cuda" and not __import__("torch").cuda.is_available():
        p.error("--device cuda: torch sees no GPU here (run without it for the CPU)")
    Recipe(args).main()


if __name__ == "__main__":
    main()
