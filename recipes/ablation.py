#!/usr/bin/env python3
"""What does cross-lingual pretraining buy? Equal CPU budgets, real text, held-out documents.

    bash recipes/ablation.sh [--quick] [--pretrain-minutes P] [--mt-minutes M] [--runs NAME,...]

Data: a larger draw of the shipped sample's rules (`recipes/data/make_sample.py`) from
``../shared/data/en-de/docs.natural``: monolingual en and de from different documents (never
translations of each other), 5,000 parallel pairs, valid and test blocks of consecutive lines
(documents) whose sentences occur in no training file. One joint sentencepiece vocabulary.

Runs, each bounded by the same wall-clock budget (``--stop-time-hours``) on this machine:
  pretrain_mlm, pretrain_mlm_tlm        cross_lingual_lm, MLM on en+de (+ TLM on the pairs)
  unmt_{random,mlm,mlm_tlm}_{summed,xlm}   translation_lm AE + online BT on the monolingual data
  sup_{random,mlm}_{summed,xlm}          translation_lm supervised MT on the pairs, both directions
  sup_random_de-en                       ours, de->en only (the per-minute comparison with ...)
  fairseq_transformer_de-en              fairseq's --task translation --arch transformer, same dims
``summed`` is the default loop (one update = all objectives, one optimiser step), ``xlm`` is
``--step-per-objective`` (one Adam step, clip and LR step per objective: XLM's loop).

Each model is scored on the test set in both directions: BLEU (sacrebleu on detokenised output vs
the raw reference, beam 5) and the reference log-probability per token (``fairseq-generate
--score-reference``, log2, mean over every target token), which moves long before BLEU does.
Each pretrained LM is scored with XLM's validation metric (perplexity and accuracy with 100 % of
the predicted positions masked) next to the unigram model of the training text: an LM that has not
left that level has nothing to give the MT runs yet.
Results: WORK/results.{md,json}; finished runs are skipped on a re-run (``--fresh`` redoes all).
"""

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "lib"))

from driver import Driver, copy_file, write_json  # noqa: E402

from preprocess.errors import ArgumentParser  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
LR = 5e-4  # Adam's peak learning rate in every run; --mt-lr replaces it for the MT runs

FULL = dict(mono=12000, train=5000, valid=300, test=400, vocab=6000, dim=256, layers=4, heads=4, ffn=1024,
            pretrain_minutes=10.0, mt_minutes=6.0, beam=5, mt_lr=LR, tokens_per_sample=128,
            pretrain_max_tokens=4096, mt_max_tokens=2000)
QUICK = dict(mono=1500, train=600, valid=60, test=60, vocab=800, dim=64, layers=2, heads=4, ffn=256,
             pretrain_minutes=0.15, mt_minutes=0.1, beam=1, mt_lr=LR, tokens_per_sample=64,
             pretrain_max_tokens=1024, mt_max_tokens=1000)


def runs_table():
    """name -> (kind, init, loop, steps). kind: pretrain / ours / peer."""
    runs = {
        "pretrain_mlm": ("pretrain", None, "summed", "en,de"),
        "pretrain_mlm_tlm": ("pretrain", None, "summed", "en,de,de-en"),
    }
    for init in ("random", "mlm"):
        for loop in ("summed", "xlm"):
            runs[f"sup_{init}_{loop}"] = ("sup", init, loop, "de-en,en-de")
    runs["sup_random_de-en"] = ("sup", "random", "summed", "de-en")
    runs["fairseq_transformer_de-en"] = ("peer", "random", "-", "de-en")
    for init in ("random", "mlm", "mlm_tlm"):
        for loop in ("summed", "xlm"):
            runs[f"unmt_{init}_{loop}"] = ("unmt", init, loop, None)
    return runs


class Ablation(Driver):
    name = "ablation"

    def __init__(self, args):
        super().__init__()
        self.args = args
        self.p = dict(QUICK if args.quick else FULL)
        for key in ("pretrain_minutes", "mt_minutes", "beam", "mt_lr"):
            if getattr(args, key) is not None:
                self.p[key] = getattr(args, key)
        default = "runs/ablation-quick" if args.quick else "runs/ablation"
        self.work = Path(args.work_dir or ROOT / default).resolve()
        self.data = self.work / "data-bin"
        self.results_path = self.work / "results.json"

    # ---- helpers -----------------------------------------------------------------------

    def model_args(self, prefix=("encoder", "decoder")):
        p = self.p
        out = []
        for side in prefix:
            out += [f"--{side}-embed-dim", p["dim"], f"--{side}-layers", p["layers"],
                    f"--{side}-attention-heads", p["heads"], f"--{side}-ffn-embed-dim", p["ffn"]]
        return out + ["--dropout", "0.1", "--attention-dropout", "0.1"]

    def common(self, save, minutes, lr):
        return ["--cpu", "--num-workers", "0", "--seed", "1", "--log-format", "json", "--log-interval", "50",
                "--no-epoch-checkpoints", "--disable-validation", "--save-dir", save, "--max-update", "1000000",
                "--stop-time-hours", f"{minutes / 60:.6f}", "--clip-norm", "5",
                "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--lr", f"{lr:g}",
                "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "200" if not self.args.quick else "10"]

    # ---- stages ------------------------------------------------------------------------

    def prepare(self):
        if not (self.data / "dict.txt").exists():
            self.prepare_data_bin()
        # fairseq's translation task reads dict.{src,tgt}.txt beside the same binarised files; built
        # again on every run, so a run killed half-way through it leaves nothing half-built behind
        peer = self.work / "peer-bin"
        peer.mkdir(exist_ok=True)
        for lang in ("de", "en"):
            copy_file(self.data / "dict.txt", peer / f"dict.{lang}.txt")
        for f in self.data.glob("*.de-en.*"):
            target = peer / f.name
            if not target.is_symlink():
                target.symlink_to(f)

    def prepare_data_bin(self):
        p, raw = self.p, self.work / "raw"
        self.log(f"data: {p['mono']} mono lines per language, {p['train']} pairs, valid {p['valid']}, "
                 f"test {p['test']} (held-out documents)")
        self.run([sys.executable, ROOT / "recipes/data/make_sample.py", self.args.shared_data, "--out", raw,
                  "--pairs", "en-de", "--mono", p["mono"], "--train", p["train"], "--valid", p["valid"],
                  "--test", p["test"]], self.work / "make_sample.log")
        d = raw / "en-de"
        self.run([sys.executable, "-m", "preprocess.prepare", self.data, "--langs", "de,en",
                  "--vocab-size", p["vocab"], "--quiet",
                  "--mono", f"train:en={d}/mono.en", "--mono", f"train:de={d}/mono.de",
                  "--para", f"train:en-de={d}/train.en-de", "--para", f"valid:en-de={d}/valid.en-de",
                  "--para", f"test:en-de={d}/test.en-de"], self.work / "prepare.log")

    def train(self, name, spec):
        kind, init, loop, steps = spec
        save = self.work / "checkpoints" / name
        info = self.finished(save)
        if info is not None:
            return info
        minutes = self.p["pretrain_minutes"] if kind == "pretrain" else self.p["mt_minutes"]
        log = save / "train.log"
        lr = LR if kind == "pretrain" else self.p["mt_lr"]
        cmd = [BIN / "fairseq-train", self.data, "--user-dir", ROOT / "xlm_fairseq", "--arch", "xlm_tiny",
               *self.model_args(), *self.common(save, minutes, lr), "--log-file", log]
        if kind == "pretrain":
            cmd += ["--task", "cross_lingual_lm", "--langs", "de,en", "--mlm-steps", steps,
                    "--tokens-per-sample", self.p["tokens_per_sample"], "--max-tokens", self.p["pretrain_max_tokens"]]
        elif kind in ("unmt", "sup"):
            cmd += ["--task", "translation_lm", "--langs", "de,en", "--max-tokens", self.p["mt_max_tokens"]]
            if kind == "unmt":
                cmd += ["--ae-steps", "en,de", "--bt-steps", "en-de-en,de-en-de", "--lambda-ae", "1"]
            else:
                cmd += ["--mt-steps", steps]
            if init != "random":
                pretrained = self.work / "checkpoints" / f"pretrain_{init}" / "checkpoint_last.pt"
                cmd += ["--pretrained-xlm-checkpoint", pretrained]
            if loop == "xlm":
                cmd += ["--step-per-objective"]
        else:  # fairseq's own transformer
            src, tgt = steps.split("-")
            cmd = [BIN / "fairseq-train", self.work / "peer-bin", "--task", "translation", "-s", src, "-t", tgt,
                   "--arch", "transformer", *self.model_args(), "--share-decoder-input-output-embed",
                   "--criterion", "cross_entropy", "--max-tokens", self.p["mt_max_tokens"],
                   *self.common(save, minutes, lr), "--log-file", log]
        self.log(f"train {name}: {minutes:g} min")
        start = time.time()
        self.run(cmd, save / "stdout.log")
        updates, wps = 0, []
        for line in log.read_text(errors="replace").splitlines():
            m = re.search(r'num_updates": "(\d+)"', line)
            if m:
                updates = max(updates, int(m.group(1)))
            m = re.search(r'"train_wps": "([0-9.]+)"', line)  # per epoch: target tokens per second
            if m:
                wps.append(float(m.group(1)))
        info = {"minutes": minutes, "wall_s": round(time.time() - start, 1), "updates": updates,
                "train_wps": round(sorted(wps)[len(wps) // 2], 1) if wps else None}
        write_json(save / "done.json", info)
        return info

    def evaluate(self, name, spec):
        kind, _, _, steps = spec
        save = self.work / "checkpoints" / name
        out = save / "eval.json"
        if out.exists():
            return json.loads(out.read_text())
        if kind == "pretrain":
            result = self.evaluate_lm(save)
            write_json(out, result)
            return result
        directions = ["de-en", "en-de"] if steps is None or "," in steps else [steps]
        result = {}
        for direction in directions:
            src, tgt = direction.split("-")
            if kind == "peer":  # the plugin only lets torch >= 2.6 load fairseq checkpoints (safe_load)
                base = [BIN / "fairseq-generate", self.work / "peer-bin", "--user-dir", ROOT / "xlm_fairseq",
                        "--task", "translation", "-s", src, "-t", tgt]
            else:
                base = [BIN / "fairseq-generate", self.data, "--user-dir", ROOT / "xlm_fairseq",
                        "--task", "translation_lm", "-s", src, "-t", tgt]
            # --required-batch-size-multiple 1: fairseq-fixed's batching drops n % multiple sentences
            # (our datasets put them back; fairseq's translation task does not)
            base += ["--gen-subset", "test", "--path", save / "checkpoint_last.pt", "--max-tokens", "4000", "--cpu",
                     "--remove-bpe", "sentencepiece", "--required-batch-size-multiple", "1"]
            gen_log, ref_log = save / f"gen.{direction}.txt", save / f"score_ref.{direction}.txt"
            self.run([*base, "--beam", self.p["beam"]], gen_log)
            self.run([*base, "--score-reference"], ref_log)
            result[direction] = {"bleu": self.bleu(gen_log, tgt), "ref_logprob": self.ref_logprob(ref_log)}
        write_json(out, result)
        return result

    def evaluate_lm(self, save):
        """XLM's validation metric of a pretrained LM: perplexity and accuracy with 100 % of the
        predicted positions masked, per language, on the valid sentences (each side of the valid
        pairs read as monolingual text); beside it the unigram model of the training text, the level
        an LM that has learnt nothing from context stays at."""
        mono = self.work / "valid-mono"
        mono.mkdir(exist_ok=True)
        for name in ["dict.txt"] + [f"valid.{lang}.{ext}" for lang in ("de", "en") for ext in ("bin", "idx")]:
            source = self.data / ("dict.txt" if name == "dict.txt" else name.replace("valid.", "valid.de-en.", 1))
            if not (mono / name).exists():
                (mono / name).symlink_to(source)
        log = save / "validate.log"  # fairseq-validate does not honour --log-file: its stdout
        self.run([BIN / "fairseq-validate", mono, "--user-dir", ROOT / "xlm_fairseq", "--task", "cross_lingual_lm",
                  "--langs", "de,en", "--mlm-steps", "en,de", "--tokens-per-sample", self.p["tokens_per_sample"],
                  "--max-tokens", self.p["pretrain_max_tokens"], "--path", save / "checkpoint_last.pt", "--cpu",
                  "--valid-subset", "valid", "--log-format", "json"], log)
        found = re.findall(r'\{"valid_.*\}', log.read_text(errors="replace"))
        if not found:
            sys.exit(f"ablation: error: no validation result in {log}")
        metrics = json.loads(found[-1])
        return {lang: {"fullmask_ppl": float(metrics[f"valid_mlm_{lang}_fullmask_ppl"]),
                       "fullmask_acc": float(metrics[f"valid_mlm_{lang}_fullmask_acc"]),
                       **self.unigram_baseline(lang)} for lang in ("en", "de")}

    def unigram_baseline(self, lang):
        """Perplexity on the valid text of the add-one unigram model of the training text (words only),
        and the accuracy of always guessing the most frequent word."""
        import numpy as np
        from fairseq.data import Dictionary, data_utils

        dictionary = Dictionary.load(str(self.data / "dict.txt"))

        def tokens(prefix):
            dataset = data_utils.load_indexed_dataset(str(prefix), dictionary)
            ids = np.concatenate([dataset[i].numpy() for i in range(len(dataset))])
            return ids[ids >= dictionary.nspecial]

        counts = np.bincount(tokens(self.data / f"train.{lang}"), minlength=len(dictionary)) + 1.0
        valid = tokens(self.data / f"valid.de-en.{lang}")
        return {"unigram_ppl": round(float(np.exp(-np.log(counts[valid] / counts.sum()).mean())), 1),
                "unigram_acc": round(100 * float((valid == counts.argmax()).mean()), 2)}

    def bleu(self, gen_log, tgt):
        import sacrebleu

        from preprocess.text import detokenize

        hyps = {}
        for line in Path(gen_log).read_text().splitlines():
            if line.startswith("H-"):
                idx, _, text = line[2:].split("\t")
                hyps[int(idx)] = detokenize(text, tgt)
        refs = (self.work / "raw" / "en-de" / f"test.en-de.{tgt}").read_text(encoding="utf-8").splitlines()
        if len(hyps) != len(refs):
            sys.exit(f"ablation: error: {gen_log} has {len(hyps)} hypotheses for {len(refs)} references")
        return round(sacrebleu.corpus_bleu([hyps[i] for i in range(len(refs))], [refs]).score, 2)

    @staticmethod
    def ref_logprob(score_log):
        """Mean log2-probability per reference token (the P- lines of --score-reference)."""
        total, n = 0.0, 0
        for line in Path(score_log).read_text().splitlines():
            if line.startswith("P-"):
                values = [float(v) for v in line.split("\t")[1].split()]
                total, n = total + sum(values), n + len(values)
        return round(total / max(n, 1), 3)

    # ---- report ------------------------------------------------------------------------

    def report(self, results):
        p = self.p
        lines = [
            f"Date {time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPU cores, torch {__import__('torch').__version__}; "
            f"model {p['dim']} dims, {p['layers']}+{p['layers']} layers, {p['heads']} heads, FFN {p['ffn']}, "
            f"vocabulary {p['vocab']}; budget {p['pretrain_minutes']:g} min per pretraining run, "
            f"{p['mt_minutes']:g} min per MT run (wall clock, `--stop-time-hours`); Adam, inverse-sqrt, "
            f"lr {LR:g} pretraining / {p['mt_lr']:g} MT; test: {p['test']} held-out sentences, beam {p['beam']}.",
            "",
            "| run | init | loop | updates | target tokens/s | BLEU de→en | BLEU en→de "
            "| log2 p/token de→en | log2 p/token en→de |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for name, (kind, init, loop, _) in runs_table().items():
            if name not in results or kind == "pretrain":
                continue
            r = results[name]
            cells = []
            for metric in ("bleu", "ref_logprob"):
                for d in ("de-en", "en-de"):
                    cells.append(str(r["eval"].get(d, {}).get(metric, "—")))
            wps = r["train"].get("train_wps") or "—"
            lines.append(f"| {name} | {init} | {loop} | {r['train']['updates']} | {wps} | " + " | ".join(cells) + " |")
        pre = [n for n in ("pretrain_mlm", "pretrain_mlm_tlm") if n in results]
        if pre:
            lines += ["", "Pretraining, XLM's validation metric (100 % of the predicted positions masked) "
                      "on the valid sentences:", "",
                      "| LM | updates | perplexity en | perplexity de | accuracy en | accuracy de |",
                      "|---|---:|---:|---:|---:|---:|"]
            for n in pre:
                ev = results[n].get("eval", {})
                cells = [str(ev.get(lang, {}).get(metric, "—"))
                         for metric in ("fullmask_ppl", "fullmask_acc") for lang in ("en", "de")]
                lines.append(f"| {n} | {results[n]['train']['updates']} | " + " | ".join(cells) + " |")
            ev = results[pre[0]].get("eval", {})
            cells = [str(ev.get(lang, {}).get(metric, "—"))
                     for metric in ("unigram_ppl", "unigram_acc") for lang in ("en", "de")]
            lines.append("| unigram model of the training text | — | " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"

    def main(self):
        table = runs_table()
        wanted = list(table) if not self.args.runs else self.args.runs.split(",")
        unknown = [w for w in wanted if w not in table]
        if unknown:
            sys.exit(f"ablation: error: --runs: unknown run '{unknown[0]}' (known: {', '.join(table)})")
        if self.args.fresh and self.work.exists():
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True, exist_ok=True)
        self.prepare()
        # pretraining runs the MT runs need come first
        needed = {f"pretrain_{table[w][1]}" for w in wanted
                  if table[w][0] in ("unmt", "sup") and table[w][1] != "random"}
        order = [n for n in table if n in needed or n in wanted]
        results = self.load_results(self.results_path)
        for name in order:
            spec = table[name]
            results[name] = {"train": self.train(name, spec), "eval": self.evaluate(name, spec)}
            write_json(self.results_path, results, indent=1)
        self.publish(self.work, self.report(results))


def main(argv=None):
    p = ArgumentParser(name="ablation", prog="recipes/ablation.sh", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny data, model and budgets (a pipeline check, what CI runs)")
    p.add_argument("--pretrain-minutes", type=float, help="budget of each pretraining run (default 10; --quick 0.15)")
    p.add_argument("--mt-minutes", type=float, help="budget of each MT run (default 6; --quick 0.1)")
    p.add_argument("--mt-lr", type=float,
                   help=f"peak learning rate of the MT runs (default {LR:g}; pretraining keeps {LR:g})")
    p.add_argument("--beam", type=int, help="beam size of the BLEU runs (default 5; --quick 1)")
    p.add_argument("--runs", help="comma-separated subset of the runs (their pretraining comes along)")
    p.add_argument("--work-dir", help="where everything goes (default runs/ablation[-quick])")
    p.add_argument("--shared-data", default=str(ROOT.parent / "shared" / "data"),
                   help="the shared corpora (default ../shared/data)")
    p.add_argument("--fresh", action="store_true", help="delete the work directory first")
    args = p.parse_args(argv)
    if not (Path(args.shared_data) / "en-de" / "docs.natural.en").exists():
        p.error(f"--shared-data: {args.shared_data}/en-de/docs.natural.en not found")
    Ablation(args).main()


if __name__ == "__main__":
    main()
