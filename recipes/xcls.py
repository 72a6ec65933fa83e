#!/usr/bin/env python3
"""Cross-lingual classification, XNLI-style, offline: pretrain, fine-tune on English, predict German.

    bash recipes/xcls.sh [--tiny] [--experiment] [--inits random,mlm,mlm_tlm] [--pretrain-updates N]

Task: the Debian package-description topics of ``recipes/data/xcls`` (9 labels; English training
rows, English and German validation rows of the same packages; ``--experiment``: the whole set in
``../shared/data/xcls``). The German rows are never trained on: their accuracy is zero-shot transfer.

Runs, one per ``--inits`` entry:
  random    the classifier from random initialisation (the vocabulary and pipeline of the data-bin)
  mlm       pretrained with MLM on the en and de monolingual streams
  mlm_tlm   pretrained with MLM on them and TLM on the en-de pairs (the same sentences, aligned)
Pretraining text (``recipes/lib/xcls_corpus.py``) has no package description: the shipped manuals
sample, or with ``--experiment`` the shared man pages, manuals and interface strings without ddtp,
every line that is a sentence of a classification text left out. Each LM trains for the same number
of updates (the same compute); each classifier for the same number of epochs with the same
hyper-parameters, and the checkpoint with the best *English* validation accuracy is kept (no German
label is used for any choice). Each model is then scored on both validation files
(``xlm_fairseq.inference.classify``), and every encoder (the pretrained LMs and the classifiers) by sentence
retrieval between the English and German validation texts (``xlm_fairseq.evaluation.retrieval``, mean-pooled
last layer, cosine, accuracy@1). A TF-IDF + logistic-regression classifier on the same English
training rows is the reference the task's README gives.

Results: WORK/results.{md,json}; finished runs are skipped on a re-run (``--fresh`` redoes all).
"""

import json
import os
import shutil
import sys
import time
from pathlib import Path

from preprocess.errors import ArgumentParser
from recipes.lib import xcls_corpus
from recipes.lib.driver import Driver
from recipes.lib.experiments import checkpoint_updates
from recipes.lib.optim import optim_flags
from recipes.lib.stages import copy_file, write_json

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
INITS = ("random", "mlm", "mlm_tlm")
PRETRAIN_STEPS = {"mlm": "en,de", "mlm_tlm": "en,de,de-en"}

# model and budgets. Pretraining is bounded by updates (wall time only as a guard), so that the runs
# compare at equal compute whatever else the machine does; the classifier: Adam, warm-up then
# inverse-sqrt decay, batches of 32 rows, validation after every epoch
SAMPLE = dict(corpus="sample", vocab=4000, dim=128, layers=3, heads=4, pretrain_updates=2500, pretrain_minutes=10.0,
              pretrain_lr=1e-3, pretrain_warmup=200, tokens_per_sample=128, pretrain_max_tokens=2048,
              finetune_epochs=8, finetune_lr=5e-4, batch=32, truncate_len=128, train_rows=0,
              inits="random,mlm_tlm")
EXPERIMENT = dict(SAMPLE, corpus="shared", vocab=8000, pretrain_updates=16000, pretrain_minutes=45.0,
                  pretrain_warmup=1000, finetune_epochs=6, inits="random,mlm,mlm_tlm")
TINY = dict(SAMPLE, vocab=1000, dim=64, layers=2, pretrain_updates=60, pretrain_minutes=2.0, pretrain_warmup=10,
            tokens_per_sample=64, pretrain_max_tokens=1024, finetune_epochs=1, truncate_len=64, train_rows=600,
            corpus_lines=1500)


class Recipe(Driver):
    name = "xcls"

    def __init__(self, args):
        super().__init__()
        self.args = args
        mode = "tiny" if args.tiny else "experiment" if args.experiment else "sample"
        self.p = dict({"tiny": TINY, "experiment": EXPERIMENT, "sample": SAMPLE}[mode])
        for key in ("pretrain_updates", "finetune_epochs", "finetune_lr", "inits"):
            if getattr(args, key) is not None:
                self.p[key] = getattr(args, key)
        self.inits = [i for i in self.p["inits"].split(",") if i]
        unknown = [i for i in self.inits if i not in INITS]
        if unknown:
            self.fail(f"--inits: unknown init '{unknown[0]}' (known: {', '.join(INITS)})")
        self.mode = mode
        self.work = Path(args.work_dir or ROOT / "runs" / f"xcls-{mode}").resolve()
        shared = Path(args.shared_data)
        self.source = shared if self.p["corpus"] == "shared" else ROOT / "recipes" / "data"
        self.xcls_source = shared / "xcls" if mode == "experiment" else ROOT / "recipes" / "data" / "xcls"
        self.data = self.work / "data-bin"
        self.xcls = self.work / "xcls"

    # ---- helpers -----------------------------------------------------------------------

    def model_args(self):
        p = self.p
        return ["--arch", "xlm_tiny", "--encoder-embed-dim", p["dim"], "--encoder-layers", p["layers"],
                "--encoder-attention-heads", p["heads"], "--encoder-ffn-embed-dim", 4 * p["dim"],
                "--dropout", "0.1", "--attention-dropout", "0.1"]

    def common(self, save, log, lr, warmup):
        """What every run shares: CPU, seed 1, JSON logs, the shared optimiser at ``lr`` after ``warmup``."""
        return ["--user-dir", ROOT / "xlm_fairseq", "--cpu", "--num-workers", "0", "--seed", "1",
                "--log-format", "json", "--log-interval", "50", "--no-epoch-checkpoints", "--save-dir", save,
                "--log-file", log, *optim_flags(lr=lr, warmup_updates=warmup)]

    # ---- stages ------------------------------------------------------------------------

    def prepare(self):
        """The classification files (the random init's directory gets the data-bin's vocabulary and
        pipeline beside them), the pretraining text and its data-bin."""
        if (self.data / "dict.txt").exists():
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
        self.run([sys.executable, "-m", "preprocess.prepare", self.data, "--langs", "de,en", "--vocab-size",
                  self.p["vocab"], "--quiet", "--workers", "2",
                  "--mono", f"train:en={raw}/mono.en", "--mono", f"train:de={raw}/mono.de",
                  "--para", f"train:de-en={raw}/train.de-en", "--para", f"valid:de-en={raw}/valid.de-en",
                  "--mono", f"valid:en={raw}/valid.de-en.en", "--mono", f"valid:de={raw}/valid.de-en.de"],
                 self.work / "prepare.log")

    def random_init_dir(self):
        """The classification files with the data-bin's vocabulary and text pipeline beside them:
        what --task xlm_classification reads without a pretrained model."""
        out = self.work / "xcls-random"
        out.mkdir(exist_ok=True)
        vocabulary = [self.data / n for n in ("dict.txt", "text_pipeline.json", "spm.model")]
        for f in list(self.xcls.glob("*.tsv")) + vocabulary:
            copy_file(f, out / f.name)  # every time: a copy cut short by a kill is never kept
        return out

    def pretrain(self, init):
        save = self.work / "checkpoints" / f"pretrain_{init}"
        info = self.finished(save)
        if info is not None:
            return info
        p, log = self.p, save / "train.log"
        self.log(f"pretrain {init} ({PRETRAIN_STEPS[init]}): {p['pretrain_updates']} updates")
        start = time.time()
        self.run([BIN / "fairseq-train", self.data, *self.common(save, log, p["pretrain_lr"], p["pretrain_warmup"]),
                  *self.model_args(), "--task", "cross_lingual_lm", "--langs", "de,en", "--mlm-steps",
                  PRETRAIN_STEPS[init], "--step-per-objective", "--tokens-per-sample", p["tokens_per_sample"],
                  "--max-tokens", p["pretrain_max_tokens"], "--max-update", p["pretrain_updates"],
                  "--stop-time-hours", f"{p['pretrain_minutes'] / 60:.6f}", "--validate-interval-updates", 1000,
                  "--save-interval-updates", 10**7],
                 save / "stdout.log")
        info = {"updates": checkpoint_updates(save / "checkpoint_last.pt"), "wall_s": round(time.time() - start, 1)}
        valid = [json.loads(line) for line in log.read_text(errors="replace").splitlines()
                 if line.startswith("{") and '"valid_mlm_en_fullmask_ppl"' in line]
        if valid:  # XLM's validation perplexity (every predicted position masked), at the last validation
            info["valid"] = {k: float(valid[-1][f"valid_mlm_{k}_fullmask_ppl"]) for k in ("en", "de")}
        write_json(save / "done.json", info)
        return info

    def finetune(self, init):
        save = self.work / "checkpoints" / f"classify_{init}"
        info = self.finished(save)
        if info is not None:
            return info
        p, log = self.p, save / "train.log"
        if init == "random":
            data, start_from = self.random_init_dir(), []
        else:
            pretrained = self.work / "checkpoints" / f"pretrain_{init}" / "checkpoint_last.pt"
            data, start_from = self.xcls, ["--pretrained-xlm-checkpoint", pretrained]
        self.log(f"fine-tune {init} on English: {p['finetune_epochs']} epochs")
        start = time.time()
        self.run([BIN / "fairseq-train", data, *self.common(save, log, p["finetune_lr"], 100), *self.model_args(),
                  *start_from, "--task", "xlm_classification", "--train-langs", "en", "--valid-langs", "en,de",
                  "--truncate-len", p["truncate_len"], "--batch-size", p["batch"],
                  "--max-epoch", p["finetune_epochs"], "--best-checkpoint-metric", "acc_en",
                  "--maximize-best-checkpoint-metric"], save / "stdout.log")
        info = {"updates": checkpoint_updates(save / "checkpoint_last.pt"), "wall_s": round(time.time() - start, 1)}
        write_json(save / "done.json", info)
        return info

    def evaluate(self, init):
        save = self.work / "checkpoints" / f"classify_{init}"
        out = save / "eval.json"
        if out.exists():
            return json.loads(out.read_text())
        files = [self.xcls / "valid.en.tsv", self.xcls / "valid.de.tsv"]
        self.run([sys.executable, "-m", "xlm_fairseq.inference.classify", save, *files, "--checkpoint-file",
                  "checkpoint_best.pt", "--out-dir", save / "predictions", "--json", save / "accuracy.json"],
                 save / "classify.log")
        accuracy = json.loads((save / "accuracy.json").read_text())
        result = {"acc_en": accuracy["valid.en.tsv"]["accuracy"], "acc_de": accuracy["valid.de.tsv"]["accuracy"],
                  "retrieval_classifier": self.retrieval(save, "checkpoint_best.pt")}
        if init != "random":
            lm = self.work / "checkpoints" / f"pretrain_{init}"
            result["retrieval_lm"] = self.retrieval(lm, "checkpoint_last.pt", data=self.data)
        write_json(out, result)
        return result

    def retrieval(self, model_dir, checkpoint, data=None):
        texts = self.work / "retrieval"
        texts.mkdir(exist_ok=True)
        for lang in ("en", "de"):
            rows = (self.xcls / f"valid.{lang}.tsv").read_text(encoding="utf-8").splitlines()[1:]
            (texts / f"valid.{lang}").write_text("".join(r.split("\t")[2] + "\n" for r in rows), encoding="utf-8")
        result = model_dir / f"retrieval.{checkpoint}.json"
        self.run([sys.executable, "-m", "xlm_fairseq.evaluation.retrieval", model_dir / checkpoint,
                  "--data", data or ".", "--src", f"en={texts}/valid.en", "--tgt", f"de={texts}/valid.de",
                  "--json", result],
                 model_dir / "retrieval.log")
        return json.loads(result.read_text())

    def tfidf_baseline(self):
        """TF-IDF (words, 1-2 grams) + logistic regression on the English training rows, the
        reference of the task's README; None without scikit-learn."""
        try:
            from sklearn.feature_extraction.text import TfidfVectorizer
            from sklearn.linear_model import LogisticRegression
        except ImportError:
            return None

        def rows(name):
            lines = (self.xcls / name).read_text(encoding="utf-8").splitlines()[1:]
            return [r.split("\t")[2] for r in lines], [r.split("\t")[1] for r in lines]

        texts, labels = rows("train.en.tsv")
        vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2)
        model = LogisticRegression(max_iter=2000, C=10).fit(vectorizer.fit_transform(texts), labels)
        result = {}
        for lang in ("en", "de"):
            t, gold = rows(f"valid.{lang}.tsv")
            predicted = model.predict(vectorizer.transform(t))
            result[f"acc_{lang}"] = round(100 * sum(p == g for p, g in zip(predicted, gold)) / len(gold), 2)
        return result

    # ---- report ------------------------------------------------------------------------

    def report(self, results):
        p = self.p
        lines = [
            f"Date {time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPU cores, torch {__import__('torch').__version__}; "
            f"mode {self.mode}; model {p['dim']} dims, {p['layers']} layers, {p['heads']} heads, vocabulary "
            f"{p['vocab']}; pretraining {p['pretrain_updates']} updates per LM (`--step-per-objective`, lr "
            f"{p['pretrain_lr']:g}, {p['tokens_per_sample']}-token streams, {p['pretrain_max_tokens']} tokens a step); "
            f"fine-tuning {p['finetune_epochs']} epochs on English, lr {p['finetune_lr']:g}, "
            f"batches of {p['batch']}, the checkpoint of best English accuracy; validation: "
            f"{results.get('rows', '?')} packages in English and German.",
            "",
            "| init | LM updates | LM perplexity en / de | classifier updates | accuracy en | accuracy de "
            "| retrieval en→de / de→en (LM) | retrieval en→de / de→en (classifier) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for init in INITS:
            r = results.get(init)
            if not r:
                continue
            pre, ev = r.get("pretrain") or {}, r["eval"]
            ppl = pre.get("valid")
            lm = ev.get("retrieval_lm")
            cl = ev["retrieval_classifier"]
            lines.append(
                f"| {init} | {pre.get('updates', '—')} | "
                + (f"{ppl['en']:.0f} / {ppl['de']:.0f}" if ppl else "—")
                + f" | {r['finetune']['updates']} | {ev['acc_en']:.2f} | **{ev['acc_de']:.2f}** | "
                + (f"{lm['en-de']:.1f} / {lm['de-en']:.1f}" if lm else "—")
                + f" | {cl['en-de']:.1f} / {cl['de-en']:.1f} |"
            )
        tfidf = results.get("tfidf")
        if tfidf:
            lines.append(f"| TF-IDF + logistic regression (words) | — | — | — | {tfidf['acc_en']:.2f} | "
                         f"{tfidf['acc_de']:.2f} | — | — |")
        lines.append(f"| majority class | — | — | — | {results['majority']['acc_en']:.2f} | "
                     f"{results['majority']['acc_de']:.2f} | — | — |")
        return "\n".join(lines) + "\n"

    def majority(self):
        result = {}
        train = [r.split("\t")[1] for r in (self.xcls / "train.en.tsv").read_text().splitlines()[1:]]
        top = max(set(train), key=train.count)
        for lang in ("en", "de"):
            gold = [r.split("\t")[1] for r in (self.xcls / f"valid.{lang}.tsv").read_text().splitlines()[1:]]
            result[f"acc_{lang}"] = round(100 * gold.count(top) / len(gold), 2)
        return result, len(gold)

    def main(self):
        if self.args.fresh and self.work.exists():
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True, exist_ok=True)
        self.prepare()
        results_path = self.work / "results.json"
        results = self.load_results(results_path)
        results["majority"], results["rows"] = self.majority()
        results["tfidf"] = self.tfidf_baseline()
        for init in self.inits:
            entry = {"pretrain": None if init == "random" else self.pretrain(init), "finetune": self.finetune(init)}
            entry["eval"] = self.evaluate(init)
            results[init] = entry
            write_json(results_path, results, indent=1)
            self.log(f"{init}: accuracy en {entry['eval']['acc_en']:.2f} %, de {entry['eval']['acc_de']:.2f} %")
        self.publish(self.work, self.report(results))


def main(argv=None):
    p = ArgumentParser(name="xcls", prog="recipes/xcls.sh", description=__doc__.split("\n\n")[0])
    p.add_argument("--tiny", action="store_true", help="tiny data, model and budgets (a pipeline check; what CI runs)")
    p.add_argument("--experiment", action="store_true",
                   help="the shared corpora and the whole topic set, random, MLM, MLM+TLM, 16k-update LMs (~2 h)")
    p.add_argument("--inits", help="comma-separated: random, mlm, mlm_tlm (default random,mlm_tlm; --experiment all)")
    p.add_argument("--pretrain-updates", type=int,
                   help="updates of each pretraining (default 2500, about 5 minutes; --experiment 16000, about 30)")
    p.add_argument("--finetune-epochs", type=int, help="epochs of each fine-tuning (default 8; --experiment 6)")
    p.add_argument("--finetune-lr", type=float, help="peak learning rate of the fine-tuning (default 5e-4)")
    p.add_argument("--work-dir", help="where everything goes (default runs/xcls-{sample,tiny,experiment})")
    p.add_argument("--shared-data", default=str(ROOT.parent / "shared" / "data"),
                   help="the shared corpora, for --experiment (default ../shared/data)")
    p.add_argument("--fresh", action="store_true", help="delete the work directory first")
    args = p.parse_args(argv)
    if args.tiny and args.experiment:
        p.error("--tiny and --experiment exclude each other")
    if args.experiment and not (Path(args.shared_data) / "xcls" / "train.en.tsv").exists():
        p.error(f"--shared-data: {args.shared_data}/xcls/train.en.tsv not found")
    Recipe(args).main()


if __name__ == "__main__":
    main()
