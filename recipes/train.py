"""One command for any languages: raw text files in, a scored and exported translator out.

    bash recipes/train.sh --pairs en-ro=PREFIX [--pairs en-de=PREFIX ...] [--mono ro=FILE ...]
                          [--valid en-ro=PREFIX] [--test en-ro=PREFIX] [--score NAME:en-ro=PREFIX]
                          [--unsupervised] [--minutes 30] [--dict de-en=FILE] --work-dir DIR

Raw UTF-8 text, one sentence a line; ``PREFIX`` names line-aligned ``PREFIX.SRC`` and ``PREFIX.TGT``. It
does what the quickstart does (the quickstart is this command on the bundled en-de sample), for any
languages: valid and test sets split off the pairs where none are given (blocks of consecutive lines; no
sentence in two splits; with ``--unsupervised`` no line whose translation is on the other side), preprocessing
(Moses or a segmenter for scripts without spaces, one joint sentencepiece vocabulary), pretraining
(``cross_lingual_lm``: MLM on every language, + TLM on the pairs), translation (``translation_lm``: AE +
back-translation, + MT on the pairs), the checkpoint of the best validation BLEU scored in every direction
with sacreBLEU beside copying the source, the lexicon probe with ``--dict``, ``DIR/model`` exported for
fairseq, the hub and CTranslate2, a figure and a report (``DIR/report.md``, ``report.json``).

Every input is read and checked before anything trains: a bad one is one line naming the option and the
file, exit status 2. Re-running skips finished stages and resumes an interrupted one; ``--fresh`` starts
over. The engine: ``recipes/lib/`` (``corpus`` the text, ``plan`` the sizes, ``stages`` the markers)."""

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Tuple

from preprocess.errors import ArgumentParser, UserError
from preprocess.segment import check_bleu, corpus_bleu, parse_segmenters, segmenter
from recipes.lib import corpus, figures, stages
from recipes.lib.corpus import Pairs
from recipes.lib.experiments import generated
from recipes.lib.plan import TINY, make_plan
from recipes.lib.progress import Progress
from recipes.lib.trained import scored as scored_line
from recipes.lib.trained import summary as trained_summary
from recipes.lib.trained import trained_objectives

ROOT = Path(__file__).resolve().parents[1]
STAGE_IDS = ("preprocess", "pretrain", "translate")
BEAM = 5


def build_parser(name: str = "train") -> argparse.ArgumentParser:
    p = ArgumentParser(
        name=name,
        prog=f"bash recipes/{name}.sh",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Outputs in DIR: raw/ (the text each split got), data-bin/, checkpoints/, logs/, out/ (generated "
        "and scored text per test set), model/ (the exported translator), figures/, report.md, report.json.",
    )
    add = p.add_argument
    add("--langs", help="the languages, comma-separated, in the order of their ids (default: as the files name them)")
    add(
        "--pairs",
        action="append",
        default=[],
        metavar="SRC-TGT=PREFIX",
        help="parallel text PREFIX.SRC / PREFIX.TGT (repeatable; files of one pair are joined)",
    )
    add(
        "--mono",
        action="append",
        default=[],
        metavar="LANG=FILE",
        help="monolingual text (repeatable); a language without: its sides of the pairs (with --unsupervised: "
        "its unpaired halves, always added)",
    )
    add(
        "--valid",
        action="append",
        default=[],
        metavar="SRC-TGT=PREFIX",
        help="a pair's validation set (default: blocks of its pairs, 2.5 %% up to 500 lines)",
    )
    add(
        "--test",
        action="append",
        default=[],
        metavar="SRC-TGT=PREFIX",
        help="a pair's held-out test set (default: blocks of its pairs, 5 %% up to 1,000 lines); training text "
        "keeps none of the sentences of valid and test sets",
    )
    add(
        "--score",
        action="append",
        default=[],
        metavar="NAME:SRC-TGT=PREFIX",
        help="also score this parallel text after training (changes nothing in training; a re-run only scores)",
    )
    add(
        "--dict",
        action="append",
        default=[],
        metavar="SRC-TGT=FILE",
        help="a bilingual dictionary ('src tgt' a line) for the lexicon probe of the pretrained LM",
    )
    add(
        "--unsupervised",
        action="store_true",
        help="no pair is seen: MLM pretraining (no TLM) and AE + back-translation on unpaired halves of the pairs "
        "and the monolingual text (default: semi-supervised: MLM+TLM, then MT + AE + BT)",
    )
    add("--minutes", type=float, default=30.0, help="the whole run's budget on this machine (default 30)")
    add("--vocab-size", type=int, help="subword vocabulary (default: from the text's size)")
    add(
        "--segment",
        action="append",
        default=[],
        metavar="LANG=NAME",
        help="word segmenter of a script without spaces (default: zh jieba, ja mecab, th pythainlp; none: Moses)",
    )
    add(
        "--precision",
        choices=("auto", "fp32", "bf16"),
        default="auto",
        help="pretraining's number format (auto: bf16 where the CPU multiplies it in hardware); translation "
        "trains in fp32 with pairs, in this format without",
    )
    add(
        "--tiny",
        action="store_true",
        help="a pipeline check in a few minutes (what CI runs): short inputs, capped updates",
    )
    add("--fresh", action="store_true", help="delete the work directory's previous results first")
    add("--plan", action="store_true", help="check the inputs, print the split and the plan, and stop (writes nothing)")
    add("--work-dir", required=True, help="where everything goes")
    add("--recipe", default="train", help=argparse.SUPPRESS)  # the quickstart's name in its messages
    return p


# ------------------------------------------------------------------------------------------------
# inputs: read and checked before anything runs
# ------------------------------------------------------------------------------------------------


class Inputs:
    """The user's text, read whole and checked, and what each split gets."""

    def __init__(self, args):
        tiny = TINY if args.tiny else {}
        self.langs: List[str] = []
        self.pairs: Dict[Tuple[str, str], Pairs] = {}
        self.mono: Dict[str, List[str]] = defaultdict(list)
        self.held: Dict[str, Dict[Tuple[str, str], Pairs]] = {"valid": {}, "test": {}}
        self.scores: List[Tuple[str, Pairs, str]] = []  # (name, pairs, prefix)
        self.dicts: List[Tuple[str, str, str]] = []
        known = corpus.parse_langs(args.langs, "--langs") if args.langs else None
        self.sources = []  # (option, path) of every file read: what the preprocessing stage depends on

        def note(lang):
            if lang not in self.langs:
                self.langs.append(lang)

        for value in args.pairs:
            _, key, prefix = corpus.parse_assignment(value, "--pairs", "SRC-TGT=PREFIX")
            a, b = corpus.parse_pair(key, "--pairs", known)
            found = corpus.same_pair(self.pairs, a, b) or (a, b)
            pairs = corpus.read_pairs(prefix, *found, "--pairs", tiny.get("pair_lines"))
            self.pairs[found] = self.pairs[found] + pairs if found in self.pairs else pairs
            self.sources += [("--pairs", f"{prefix}.{x}") for x in found]
            note(a), note(b)
        for value in args.mono:
            _, lang, path = corpus.parse_assignment(value, "--mono", "LANG=FILE")
            corpus.parse_langs(lang, "--mono", known)
            self.mono[lang] += corpus.read_text(path, "--mono", tiny.get("mono_lines"))
            self.sources.append(("--mono", path))
            note(lang)
        for split in ("valid", "test"):
            for value in getattr(args, split):
                _, key, prefix = corpus.parse_assignment(value, f"--{split}", "SRC-TGT=PREFIX")
                a, b = corpus.parse_pair(key, f"--{split}", known)
                found = corpus.same_pair(self.pairs, a, b)
                if found is None:
                    raise UserError(f"--{split} {value!r}: no --pairs {a}-{b} to go with it")
                if found in self.held[split]:
                    raise UserError(f"--{split} {value!r}: {a}-{b} has a --{split} set already")
                self.held[split][found] = corpus.read_pairs(prefix, *found, f"--{split}", tiny.get("held_lines"))
                self.sources += [(f"--{split}", f"{prefix}.{x}") for x in found]
        for value in args.score:
            name, key, prefix = corpus.parse_assignment(value, "--score", "NAME:SRC-TGT=PREFIX")
            a, b = corpus.parse_pair(key, "--score", known)
            found = corpus.same_pair(self.pairs, a, b)
            if name is None or found is None or name in ("test", "valid") or name in {s[0] for s in self.scores}:
                raise UserError(f"--score {value!r}: expected NAME:SRC-TGT=PREFIX, a new NAME (not test) and a pair "
                                "of --pairs")  # fmt: skip
            self.scores.append((name, corpus.read_pairs(prefix, *found, "--score"), prefix))
        for value in args.dict:
            _, key, path = corpus.parse_assignment(value, "--dict", "SRC-TGT=FILE")
            a, b = corpus.parse_pair(key, "--dict", known)
            if a not in self.langs or b not in self.langs:
                raise UserError(f"--dict {value!r}: {a} and {b} must both be languages of the run")
            corpus.read_text(path, "--dict")
            self.dicts.append((a, b, path))
        if known is not None:
            missing = [lang for lang in known if lang not in self.langs]
            if missing:
                raise UserError(f"--langs: no text in {','.join(missing)} (give --pairs or --mono for it)")
            self.langs = list(known)
        if not self.pairs:
            raise UserError("--pairs: no parallel text; validation and scoring need some (give --pairs SRC-TGT=PREFIX)")
        lonely = [lang for lang in self.langs if not any(lang in p for p in self.pairs)]
        if lonely:
            raise UserError(f"--mono {lonely[0]}: a language in no pair has no direction to translate (add --pairs)")


def prepared_text(inputs: Inputs, args) -> dict:
    """What each split gets: {"train": {pair: Pairs}, "mono": {lang: lines}, "valid"/"test": {pair: Pairs},
    "notes": [...]}; the held-out sets split off where none were given, and their sentences kept out of
    the training text."""
    notes, held = [], {"valid": {}, "test": {}}
    train = {}
    cap = TINY["held_lines"] if args.tiny else None
    for key, pairs in inputs.pairs.items():
        need = {split: key not in inputs.held[split] for split in held}
        rest, valid, test = corpus.split_held_out(pairs, need["valid"], need["test"], cap)
        for split, got in (("valid", valid), ("test", test)):
            held[split][key] = got if got is not None else inputs.held[split][key]
            if got is not None:
                notes.append(f"{split} {key[0]}-{key[1]}: {len(got)} pairs split off as blocks of {corpus.BLOCK} lines")
        # valid keeps no sentence of test either
        held["valid"][key], _ = corpus.keep_out(held["valid"][key], [held["test"][key]])
        train[key], dropped = corpus.keep_out(rest, [held["valid"][key], held["test"][key]])
        if dropped:
            notes.append(f"train {key[0]}-{key[1]}: {dropped} pairs dropped (a side is in valid or test)")
    seen = defaultdict(set)
    for split in held.values():
        for pairs in split.values():
            for lang in (pairs.src, pairs.tgt):
                seen[lang] |= {s.strip() for s in pairs.side(lang)}
    mono = {}
    for lang, lines in inputs.mono.items():
        mono[lang] = [lines[i] for i in corpus.without_sentences(lines, seen[lang]) if lines[i].strip()]
        if len(mono[lang]) < len(lines):
            notes.append(f"mono {lang}: {len(lines) - len(mono[lang])} lines left out (blank, or in valid or test)")
    if args.unsupervised:
        mono, dropped = corpus.unpaired(mono, list(train.values()))
        kept = ", ".join(f"{len(mono.get(lang, []))} {lang} lines" for lang in inputs.langs)
        lost = ", ".join(f"{n} {lang}" for lang, n in dropped.items() if n)
        notes.append(
            f"unpaired: {kept}" + (f" ({lost} lines dropped as translations of the other side)" if lost else "")
        )
        train = {}
    else:
        for lang in inputs.langs:
            if lang not in mono:
                mono[lang] = list(
                    dict.fromkeys(s for p in train.values() if lang in (p.src, p.tgt) for s in p.side(lang))
                )
    for lang in inputs.langs:
        if not any(line.strip() for line in mono.get(lang, [])):
            raise UserError(f"no training text left in {lang} once valid and test sets are taken out")
    return {"train": train, "mono": mono, "valid": held["valid"], "test": held["test"], "notes": notes}


def words_and_characters(text: dict, segmenters: Dict[str, str]) -> Tuple[Dict[str, int], int]:
    """Training words per language (a segmenter's words for scripts without spaces) and distinct characters."""
    words, chars = defaultdict(int), set()
    lines_of = defaultdict(list)
    for lang, lines in text["mono"].items():
        lines_of[lang] += lines
    for pairs in text["train"].values():
        lines_of[pairs.src] += pairs.src_lines
        lines_of[pairs.tgt] += pairs.tgt_lines
    for lang, lines in lines_of.items():
        lines = list(dict.fromkeys(lines))  # a language's monolingual text may be its sides of the pairs
        if lang in segmenters:  # a sample's words, scaled: segmenting is slow
            cut, sample = segmenter(segmenters[lang]), lines[:5000]
            words[lang] = int(sum(len(cut(line)) for line in sample) * len(lines) / max(len(sample), 1))
        else:
            words[lang] = sum(len(line.split()) for line in lines)
        for line in lines[:200000]:
            chars.update(line)
    return dict(words), len(chars)


# ------------------------------------------------------------------------------------------------
# the run
# ------------------------------------------------------------------------------------------------


class Run:
    def __init__(self, args, inputs: Inputs, text: dict, plan, segmenters: Dict[str, str]):
        self.args, self.inputs, self.text, self.plan, self.segmenters = args, inputs, text, plan, segmenters
        self.name = args.recipe
        self.work = Path(args.work_dir).resolve()
        self.data = self.work / "data-bin"
        self.raw = self.work / "raw"
        self.logs = self.work / "logs"
        self.ckpt = self.work / "checkpoints" / "translate" / "checkpoint_best.pt"
        self.lm = self.work / "checkpoints" / "pretrain" / "checkpoint_best.pt"
        self.started = time.time()
        self.bin = Path(sys.executable).parent
        self.env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
        self.stages = stages.Stages(
            self.name, self.work, STAGE_IDS, self.keys(),
            {"pretrain": self.work / "checkpoints" / "pretrain", "translate": self.work / "checkpoints" / "translate"},
            redo="run with --fresh",
        )  # fmt: skip

    # ---- helpers ---------------------------------------------------------------------------

    def tool(self, name: str) -> str:
        beside = self.bin / name
        return str(beside) if beside.exists() else name

    def banner(self, text: str):
        print(f"\n== [{int(time.time() - self.started)}s] {text}", flush=True)

    def command(self, cmd, log, progress=None):
        stages.run_logged(self.name, [str(c) for c in cmd], log, env=self.env, cwd=ROOT, progress=progress)

    def keys(self) -> Dict[str, str]:
        sources = hashlib.sha256()
        for option, path in self.inputs.sources:
            st = os.stat(path)
            sources.update(f"{option} {os.path.abspath(path)} {st.st_size} {st.st_mtime_ns}\n".encode())
        p = self.plan
        pre = (f"recipe={self.name} mode={'tiny' if p.tiny else 'full'} supervision={p.supervision} "
               f"langs={','.join(p.langs)} vocab={p.vocab} segment={sorted(self.segmenters.items())} "
               f"inputs={sources.hexdigest()[:16]}")  # fmt: skip
        pretrain = f"{pre} model={p.size.dim}x{p.size.layers} hours={p.pretrain_hours} precision={p.precision}"
        translate = f"{pretrain} translate_hours={p.translate_hours} translate_precision={p.translate_precision}"
        return {"preprocess": pre, "pretrain": pretrain, "translate": translate}

    def stage(self, sid: str, title: str, detail: str, fn):
        if self.stages.done(sid):
            self.banner(f"{title}: done before ({self.stages.marker(sid)}), skipped")
            return
        self.banner(f"{title}: {detail}")
        self.stages.start(sid)
        fn()
        self.stages.finish(sid)

    def write_lines(self, path: Path, lines: List[str]):
        stages.write_text(path, "".join(line + "\n" for line in lines))

    # ---- 1. preprocess ---------------------------------------------------------------------

    def preprocess(self):
        for line in self.text["notes"]:
            print(f"   {line}", flush=True)
        self.raw.mkdir(parents=True, exist_ok=True)
        args = [sys.executable, "-m", "preprocess.prepare", self.data, "--langs", ",".join(self.plan.langs),
                "--force", "--quiet", "--vocab-size", self.plan.vocab, "--vocab-size-soft"]  # fmt: skip
        args += [x for lang, name in self.segmenters.items() for x in ("--segment", f"{lang}={name}")]
        for lang, lines in self.text["mono"].items():
            self.write_lines(self.raw / f"train.{lang}", lines)
            args += ["--mono", f"train:{lang}={self.raw}/train.{lang}"]
        valid_sides = defaultdict(list)
        for split in ("train", "valid", "test"):
            for (a, b), pairs in self.text[split].items():
                prefix = self.raw / f"{split}.{a}-{b}"
                for lang in (a, b):
                    self.write_lines(Path(f"{prefix}.{lang}"), pairs.side(lang))
                    if split == "valid":
                        valid_sides[lang] += pairs.side(lang)
                args += ["--para", f"{split}:{a}-{b}={prefix}"]
        for lang, lines in valid_sides.items():  # MLM's validation: the valid sets' sides
            self.write_lines(self.raw / f"valid.{lang}", list(dict.fromkeys(lines)))
            args += ["--mono", f"valid:{lang}={self.raw}/valid.{lang}"]
        self.command(args, self.logs / "preprocess.log")
        summary = json.loads((self.data / "summary.json").read_text(encoding="utf-8"))
        print(f"   vocabulary: {summary['vocab'].get('spm_vocab_size', '?')} pieces; data-bin: {self.data}")

    # ---- 2. pretraining ------------------------------------------------------------------

    def common(self) -> list:
        return ["--user-dir", ROOT / "xlm_fairseq", "--cpu", "--num-workers", 0, "--seed", 1, "--log-interval", 100,
                "--no-epoch-checkpoints", "--step-per-objective", "--langs", ",".join(self.plan.langs)]  # fmt: skip

    def optim(self, lr: float, warmup: int) -> list:
        from recipes.lib.optim import optim_flags

        return optim_flags(lr=lr, warmup_updates=warmup)

    def pretrain(self):
        p = self.plan
        log = self.logs / "pretrain.log"
        cmd = [self.tool("fairseq-train"), self.data, *self.common(), "--log-file", log, "--task", "cross_lingual_lm",
               "--mlm-steps", p.mlm_steps(), *p.model_args(), "--tokens-per-sample", 64, "--dropout", 0,
               "--attention-dropout", 0, *(["--bf16"] if p.precision == "bf16" else []), "--max-tokens", 2048,
               *self.optim(0.001, 1000), "--max-update", p.pretrain_updates, "--stop-time-hours", p.pretrain_hours,
               "--validate-interval-updates", p.valid_every * 2, "--save-interval-updates", p.valid_every * 2,
               "--keep-interval-updates", 1, "--best-checkpoint-metric", "mlm_fullmask_ppl",
               "--save-dir", self.lm.parent]  # fmt: skip
        progress = Progress(log, p.pretrain_hours, r"^mlm_.+_fullmask_ppl$")
        self.command(cmd, self.logs / "pretrain.out", progress)

    # ---- 3. translation ------------------------------------------------------------------

    def translate(self):
        p = self.plan
        log = self.logs / "translate.log"
        cmd = [self.tool("fairseq-train"), self.data, *self.common(), "--log-file", log, "--task", "translation_lm",
               *p.objectives(), "--word-shuffle", 3, "--word-dropout", 0.1, "--word-blank", 0.1,
               "--pretrained-xlm-checkpoint", self.lm, *p.model_args(), "--dropout", 0.1, "--attention-dropout", 0.1,
               *(["--bf16"] if p.translate_precision == "bf16" else []), "--max-tokens", 2000,
               "--max-sentence-len", 100, *self.optim(0.001, 500), "--max-update", p.translate_updates,
               "--stop-time-hours", p.translate_hours, "--validate-interval-updates", p.valid_every,
               "--save-interval-updates", p.valid_every, "--keep-interval-updates", 1,
               "--best-checkpoint-metric", "bleu_tok_mean", "--maximize-best-checkpoint-metric",
               "--save-dir", self.ckpt.parent]  # fmt: skip
        self.command(cmd, self.logs / "translate.out", Progress(log, p.translate_hours, r"^bleu_(?!tok_|mean)"))
        print(f"   {trained_summary(log.read_text(encoding='utf-8', errors='replace'))}", flush=True)
        directions = ",".join(f"{a}-{b}" for a, b in p.directions)
        self.command([sys.executable, "-m", "xlm_fairseq.inference.export", self.ckpt, self.work / "model",
                      "--data", self.data, "--force", "--ctranslate2", "--directions", directions],
                     self.logs / "export.log")  # fmt: skip

    # ---- 4. scoring ------------------------------------------------------------------------

    def test_sets(self) -> List[Tuple[str, Path, str, Pairs, Path]]:
        """(name, data-bin, its split, pairs, raw prefix) of every set scored: the held-out tests, then
        --score sets, each in a data-bin of its own encoded with the run's vocabulary."""
        sets = [
            ("test", self.data, "test", pairs, self.raw / f"test.{a}-{b}")
            for (a, b), pairs in self.text["test"].items()
        ]
        for name, pairs, prefix in self.inputs.scores:
            digest = hashlib.sha256("\n".join(pairs.src_lines + pairs.tgt_lines).encode()).hexdigest()[:12]
            bin_dir = self.work / f"test-bin-{digest}"
            if not (bin_dir / "dict.txt").is_file():
                partial = Path(f"{bin_dir}.partial")
                shutil.rmtree(partial, ignore_errors=True)
                a, b = pairs.src, pairs.tgt
                cmd = [sys.executable, "-m", "preprocess.prepare", partial, "--langs", f"{a},{b}", "--force", "--quiet",
                       "--spm-model", self.data / "spm.model", "--dict", self.data / "dict.txt",
                       "--mono", f"train:{a}={prefix}.{a}", "--mono", f"train:{b}={prefix}.{b}",
                       "--para", f"test:{a}-{b}={prefix}"]  # fmt: skip
                cmd += [
                    x for lang, n in self.segmenters.items() if lang in (a, b) for x in ("--segment", f"{lang}={n}")
                ]
                self.command(cmd, self.logs / f"prepare-{name}.log")
                partial.rename(bin_dir)
            sets.append((name, bin_dir, "test", pairs, Path(prefix)))
        return sets

    def score(self) -> List[dict]:
        self.banner(f"4/4 fairseq-generate (beam {BEAM}), every direction; sacreBLEU on detokenised output beside "
                    "copying the source")  # fmt: skip
        rows = []
        train_side = defaultdict(set)
        for pairs in self.text["train"].values():
            for lang in (pairs.src, pairs.tgt):
                train_side[lang] |= set(pairs.side(lang))
        for lang, lines in self.text["mono"].items():
            train_side[lang] |= set(lines)
        for name, bin_dir, split, pairs, prefix in self.test_sets():
            out = self.work / "out" / name
            out.mkdir(parents=True, exist_ok=True)
            for src, tgt in ((pairs.src, pairs.tgt), (pairs.tgt, pairs.src)):
                gen = out / f"gen.{src}-{tgt}.txt"
                self.command([self.tool("fairseq-generate"), bin_dir, "--user-dir", ROOT / "xlm_fairseq", "--task",
                              "translation_lm", "-s", src, "-t", tgt, "--gen-subset", split, "--path", self.ckpt,
                              "--beam", BEAM, "--max-len-a", 1.5, "--max-len-b", 10, "--max-tokens", 4000, "--cpu"],
                             gen)  # fmt: skip
                found = generated(gen, "D")
                refs, sources = pairs.side(tgt), pairs.side(src)
                if len(found) != len(refs):
                    stages.fail(self.name, f"{gen}: {len(found)} hypotheses for {len(refs)} sentences")
                hyps = [found[i] for i in range(len(refs))]
                self.write_lines(out / f"hyp.{src}-{tgt}.txt", hyps)
                bleu = round(corpus_bleu(hyps, refs, tgt).score, 2)
                copy = round(corpus_bleu(sources, refs, tgt).score, 2)
                stages.write_text(out / f"bleu.{src}-{tgt}.txt", f"{bleu}\n")
                stages.write_text(out / f"copy.{src}-{tgt}.txt", f"{copy}\n")
                seen = sum(1 for s in sources if s in train_side[src])
                rows.append(dict(set=name, direction=f"{src}-{tgt}", bleu=bleu, copy=copy, lines=len(refs),
                                 source=f"{prefix}.{src}", seen_in_training=seen,
                                 examples=list(zip(sources, hyps, refs))[:3]))  # fmt: skip
        return rows

    # ---- probe, report -----------------------------------------------------------------------

    def probe(self) -> List[dict]:
        results = []
        for a, b, path in self.inputs.dicts:
            out = self.work / "out" / f"lexicon.{a}-{b}.json"
            base = [sys.executable, "-m", "xlm_fairseq.evaluation.lexicon", self.lm, "--dict", path,
                    "--data", self.data,
                    "--src", a, "--tgt", b]  # fmt: skip
            self.command([*base, "--json", out], self.logs / f"lexicon.{a}-{b}.log")
            self.command([*base, "--random-init", "--json", f"{out}.random"], self.logs / f"lexicon.{a}-{b}.random.log")
            results.append(dict(pair=f"{a}-{b}", lm=json.loads(out.read_text()),
                                random_init=json.loads(Path(f"{out}.random").read_text())))  # fmt: skip
        return results

    def run(self):
        p = self.plan
        pairs = sum(len(x) for x in self.text["train"].values())
        what = (f"semi-supervised MT (MT on {pairs} pairs + AE + back-translation on monolingual text)"
                if p.supervision == "semi"
                else "unsupervised MT (AE + back-translation on monolingual text only)")  # fmt: skip
        pre = "MLM+TLM pretraining" if p.supervision == "semi" else "MLM pretraining"
        self.stage("preprocess", "1/4 preprocess",
                   f"held-out sets, Moses or segmenters, joint sentencepiece ({p.vocab}), binarisation -> {self.data}",
                   self.preprocess)  # fmt: skip
        self.stage("pretrain", f"2/4 {pre}", f"cross_lingual_lm, --mlm-steps {p.mlm_steps()}, {p.size.name}, "
                   f"{p.precision}, {p.pretrain_hours}h; log: {self.logs / 'pretrain.log'}", self.pretrain)  # fmt: skip
        self.stage("translate", f"3/4 {what}", f"translation_lm initialised from the LM, {p.translate_precision}, "
                   f"{p.translate_hours}h; log: {self.logs / 'translate.log'}", self.translate)  # fmt: skip
        rows = self.score()
        probes = self.probe()
        log = (self.logs / "translate.log").read_text(encoding="utf-8", errors="replace")
        trained = [trained_summary(log), scored_line(self.ckpt, trained_objectives(log)[2])]
        figure = figures.training_run(self.work, self.name)
        self.report(rows, probes, trained, figure, what)

    def report(self, rows, probes, trained, figure, what):
        p = self.plan
        elapsed = int(time.time() - self.started)
        lines = [f"== {self.name} finished in {elapsed}s ({'tiny' if p.tiny else 'full'} mode): {what}"]
        lines += [f"   {t}" for t in trained]
        lines.append(f"{'test':<8} {'dir':<7} {'BLEU':>6} {'copy source':>12} {'gain':>7}  "
                     f"(sacreBLEU, detokenised; beam {BEAM}; the 'scored' checkpoint)")  # fmt: skip
        for r in rows:
            lines.append(
                f"{r['set']:<8} {r['direction']:<7} {r['bleu']:>6} {r['copy']:>12} {r['bleu'] - r['copy']:>+7.1f}"
            )
        for r in rows:
            if r["direction"].split("-")[0] == r["source"].rsplit(".", 1)[1]:
                seen = (
                    f"; {r['seen_in_training']} of its source lines occur in training text"
                    if r["seen_in_training"]
                    else ""
                )
                lines.append(f"  {r['set']} {r['direction']}: {r['source']}, {r['lines']} lines{seen}")
        for probe in probes:
            lines.append(f"lexicon probe {probe['pair']} (P@1 NN / CSLS, frequent words; random init beside): "
                         f"{_probe_figure(probe['lm'])} / random init "
                         f"{_probe_figure(probe['random_init'])}")  # fmt: skip
        lines.append("")
        for r in rows:
            if r["set"] == rows[0]["set"]:
                lines.append(f"examples ({r['direction']}):")
                for s, h, t in r["examples"]:
                    lines += [f"  src: {s[:300]}", f"  hyp: {h[:300]}", f"  ref: {t[:300]}"]
        lines += [
            "",
            "Read BLEU against 'copy source': names, commands and numbers are shared by the languages, so copying the",
            "input already scores that much; the gain is what the model translates. The 'trained' line says which",
            "objectives trained and for how long. What pretraining buys at a budget this machine can afford:",
            "bash recipes/ablation.sh (table in recipes/README.md).",
            "",
            "The translator, exported (no data-bin needed; CTranslate2 models in model/ctranslate2/):",
            f'  python -c \'from xlm_fairseq import XLMModel; print(XLMModel.from_pretrained("{self.work}/model")'
            f'.translate("...", src="{p.directions[0][0]}", tgt="{p.directions[0][1]}"))\'',
            "",
            f"data-bin:    {self.data}",
            f"checkpoints: {self.work}/checkpoints/{{pretrain,translate}}",
            f"outputs:     {self.work}/out/ (generated text, hypotheses, BLEU per test set), logs: {self.logs}",
            f"figure:      {figure}" if figure else "figure:      none",
            f"report:      {self.work}/report.md, report.json",
        ]
        text = "\n".join(lines) + "\n"
        print("\n" + text, end="", flush=True)
        stages.write_text(self.work / "report.md", "```\n" + "\n".join(self.plan_lines) + "\n\n" + text + "```\n")
        stages.write_json(self.work / "report.json", dict(
            recipe=self.name, seconds=elapsed, supervision=p.supervision, langs=p.langs, tiny=p.tiny,
            minutes=p.minutes, model=dict(dim=p.size.dim, layers=p.size.layers), vocab=p.vocab,
            precision=[p.precision, p.translate_precision], trained=trained, notes=self.text["notes"],
            bleu=[{k: v for k, v in r.items() if k != "examples"} for r in rows], lexicon=probes,
        ), indent=1)  # fmt: skip

    plan_lines: List[str] = []


def _probe_figure(result: dict) -> str:
    try:
        frequent = result["frequent"]["contextual"]
        return f"{frequent['nn_p@1']:.1f} / {frequent['csls_p@1']:.1f}"
    except (KeyError, TypeError):
        return "?"


def choose_precision(value: str) -> str:
    if value != "auto":
        return value
    from xlm_fairseq.patches.precision import cpu_multiplies_bf16

    return "bf16" if cpu_multiplies_bf16() else "fp32"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    name = argv[argv.index("--recipe") + 1] if "--recipe" in argv[:-1] else "train"
    args = build_parser(name).parse_args(argv)

    def refuse(message):
        stages.fail(name, message, status=2)

    try:
        if args.minutes <= 0:
            raise UserError(f"--minutes {args.minutes:g}: a positive number of minutes")
        if args.vocab_size is not None and args.vocab_size < 100:
            raise UserError(f"--vocab-size {args.vocab_size}: at least 100")
        work = Path(args.work_dir)
        if work.exists() and not work.is_dir():
            raise UserError(f"--work-dir {work}: exists and is not a directory")
        inputs = Inputs(args)
        segmenters = parse_segmenters(args.segment, inputs.langs)
        for seg in set(segmenters.values()):
            segmenter(seg)
        for a, b in inputs.pairs:
            for lang in (a, b):
                check_bleu(lang, f"--pairs {a}-{b}")
        text = prepared_text(inputs, args)
        words, characters = words_and_characters(text, segmenters)
    except UserError as e:
        refuse(str(e))
    precision = choose_precision(args.precision)
    plan = make_plan(inputs.langs, list(inputs.pairs), "unsupervised" if args.unsupervised else "semi", args.tiny,
                     args.minutes, precision, words, characters, args.vocab_size)  # fmt: skip
    lines = plan.describe(words)
    print(f"== {name}: {work.resolve()}")
    for line in lines + (text["notes"] if args.plan else []):
        print(f"   {line}", flush=True)
    if args.plan:
        return 0
    if args.fresh and work.exists():
        shutil.rmtree(work)
    run = Run(args, inputs, text, plan, segmenters)
    run.plan_lines = lines
    run.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
