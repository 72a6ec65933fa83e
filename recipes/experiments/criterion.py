#!/usr/bin/env python3
"""How well the round trips choose a translation checkpoint without parallel text, measured on runs that
have a parallel test (their own or ``--test``): ``recipes/train.sh --unsupervised --keep-checkpoints`` work
directories.

    python -m recipes.experiments.criterion WORK [WORK ...] [--valid SRC-TGT=PREFIX ...] [--test SRC-TGT=PREFIX ...] \\
        --out RECORD.jsonl [--figure PNG]

For every checkpoint a run kept (one per validation), from its translation log: the round trips of held-out
monolingual text that validation logged (``roundtrip_score``, ``roundtrip_bleu``, ``roundtrip_copy``, the
back-translation losses); computed here: greedy BLEU of the parallel valid pairs (``WORK/raw/valid.*``, which
an unsupervised run never reads, or ``--valid``: tokenised BLEU, the mean of both directions, as validation
with pairs chooses) and greedy sacreBLEU of the test (both directions). Per run: each criterion's Spearman
rank correlation with test BLEU over the checkpoints, and the test BLEU (beam 5, sacreBLEU, as the run
scores) of the checkpoint each chooses: the BLEU lost by choosing with the round trips rather than with
the parallel valid pairs. The record holds every checkpoint's figures; ``--figure`` draws test BLEU against
each run's round-trip score."""

import argparse
import json
import logging
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

from preprocess.errors import UserError
from preprocess.pipeline import require_pipeline
from preprocess.segment import corpus_bleu
from recipes.experiments import figures
from recipes.train import stages
from recipes.train.corpus import parse_assignment, parse_pair, read_pairs
from recipes.train.progress import fields
from recipes.train.scoring import BEAM, commit, encoded, generate, generated, machine
from recipes.train.trained import VALIDATION, checkpoint_updates

ROOT = Path(__file__).resolve().parents[2]
# the figures each checkpoint is ranked by: the round trips' (higher is better) and their parts; the mean
# back-translation loss of the held-out text (lower is better, so negated); the parallel valid pairs' BLEU
CRITERIA = ("roundtrip_score", "roundtrip_bleu", "neg_roundtrip_copy", "neg_bt_loss", "valid_bleu_tok")


def validations(log: Path) -> Dict[int, Dict[str, float]]:
    """{update: the numeric fields of the translation log's validation at it}."""
    found = {}
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if VALIDATION.search(line):
            values = fields(line)
            if "num_updates" in values:
                found[int(values["num_updates"])] = {k: float(v) for k, v in values.items()}
    return found


def spearman(xs: List[float], ys: List[float]) -> Optional[float]:
    """Spearman's rho; None where it is undefined (fewer than 3 checkpoints, or a side constant)."""
    from scipy.stats import spearmanr

    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    return round(float(spearmanr(xs, ys).statistic), 3)


class Run:
    """One kept-checkpoints work directory and the sets it is measured on."""

    def __init__(self, work: Path, valids=None, tests=None):
        self.work = work
        if not (work / "report.json").is_file():
            raise UserError(f"{work}: no report.json: not a finished train.sh work directory")
        self.report = json.loads((work / "report.json").read_text(encoding="utf-8"))
        self.data = work / "data-bin"
        self.tool = lambda name: str(Path(sys.executable).parent / name)
        scored = [r["direction"].split("-") for r in self.report["bleu"] if r["set"] == "test"]
        pairs = [tuple(d) for d in scored[:1]] or list((tests or {}).keys())
        if not pairs:
            raise UserError(f"{work}: its run scored no parallel test (give --test SRC-TGT=PREFIX)")
        src, tgt = self.pair = pairs[0]
        self.test_prefix = (tests or {}).get((src, tgt)) or work / "raw" / f"test.{src}-{tgt}"
        self.test = read_pairs(str(self.test_prefix), src, tgt, "--test")
        prefix = (valids or {}).get((src, tgt)) or work / "raw" / f"valid.{src}-{tgt}"
        if not Path(f"{prefix}.{src}").is_file():
            raise UserError(f"{work}: no parallel valid set (give --valid {src}-{tgt}=PREFIX)")
        self.valid = read_pairs(str(prefix), src, tgt, "--valid")
        self.valid_prefix = Path(prefix)
        self.pipeline = require_pipeline(str(self.data), "data-bin")
        self.out = work / "out" / "criterion"
        self.out.mkdir(parents=True, exist_ok=True)

    def command(self, cmd, log):
        stages.run_logged("criterion", cmd, log, cwd=ROOT)

    def checkpoints(self) -> Dict[int, Path]:
        """{update: checkpoint} of every kept checkpoint (the last one too)."""
        ckpts = {}
        for path in sorted((self.work / "checkpoints" / "translate").glob("checkpoint*.pt")):
            if path.name != "checkpoint_best.pt":
                ckpts.setdefault(checkpoint_updates(path), path)
        return ckpts

    def bleu(self, ckpt: Path, split_pairs, bin_dir: Path, name: str, beam: int, tokenised: bool) -> List[float]:
        """BLEU of both directions: sacreBLEU on detokenised text, or (``tokenised``) BLEU of the pipeline's
        Moses-tokenised words as is, validation's ``bleu_tok``."""
        import sacrebleu

        scores = []
        src, tgt = self.pair
        for a, b in ((src, tgt), (tgt, src)):
            gen = self.out / f"{name}.{ckpt.stem}.beam{beam}.{a}-{b}.txt"
            if not gen.is_file():
                generate(self.tool, self.command, bin_dir, "test", a, b, ckpt, beam, gen)
            found = generated(gen, "D")
            refs = split_pairs.side(b)
            hyps = [found.get(i, "") for i in range(len(refs))]
            if tokenised:
                words = [self.pipeline.tokenize(x, b) for x in hyps], [self.pipeline.tokenize(x, b) for x in refs]
                scores.append(sacrebleu.corpus_bleu(words[0], [words[1]], tokenize="none"))
            else:
                scores.append(corpus_bleu(hyps, refs, b))
        return [round(s.score, 2) for s in scores]

    def measure(self) -> dict:
        src, tgt = self.pair
        segmenters = self.pipeline.settings.segmenters  # parallel sets cut as the run's text was (zh, ja, th)
        valid_bin = encoded(
            self.work, self.data, self.valid, self.valid_prefix, segmenters, self.tool, self.command, "valid"
        )
        test_bin, prefix = self.data, Path(self.test_prefix)
        if prefix != self.work / "raw" / f"test.{src}-{tgt}":  # a --test set, not the run's own
            test_bin = encoded(self.work, self.data, self.test, prefix, segmenters, self.tool, self.command, "test")
        logged = validations(self.work / "logs" / "translate.log")
        rows = []
        for update, ckpt in sorted(self.checkpoints().items()):
            v = logged.get(update, {})
            losses = [x for k, x in v.items() if k.startswith("bt_") and k.endswith("_loss")]
            valid = self.bleu(ckpt, self.valid, valid_bin, "valid", 1, tokenised=True)
            test = self.bleu(ckpt, self.test, test_bin, "test", 1, tokenised=False)
            rows.append(
                dict(
                    update=update,
                    checkpoint=ckpt.name,
                    roundtrip_score=v.get("roundtrip_score"),
                    roundtrip_bleu=v.get("roundtrip_bleu"),
                    neg_roundtrip_copy=-v["roundtrip_copy"] if "roundtrip_copy" in v else None,
                    neg_bt_loss=-round(statistics.mean(losses), 3) if losses else None,
                    valid_bleu_tok=round(statistics.mean(valid), 2),
                    test_greedy={f"{src}-{tgt}": test[0], f"{tgt}-{src}": test[1]},
                    test_greedy_mean=round(statistics.mean(test), 2),
                )
            )
        rows = [r for r in rows if r["roundtrip_score"] is not None]
        target = [r["test_greedy_mean"] for r in rows]
        correlation = {
            c: spearman([r[c] for r in rows], target) for c in CRITERIA if all(r[c] is not None for r in rows)
        }
        chosen = {}
        for name, key in (("roundtrip", "roundtrip_score"), ("parallel_valid", "valid_bleu_tok")):
            best = max(rows, key=lambda r: r[key])  # the first of equals, as fairseq keeps the first best
            ckpt = self.work / "checkpoints" / "translate" / best["checkpoint"]
            test = self.bleu(ckpt, self.test, test_bin, "test", BEAM, tokenised=False)
            chosen[name] = dict(update=best["update"], test_beam5={f"{src}-{tgt}": test[0], f"{tgt}-{src}": test[1]})
            chosen[name]["test_beam5_mean"] = round(statistics.mean(test), 2)
        both = ((src, tgt), (tgt, src))
        lost = round(chosen["parallel_valid"]["test_beam5_mean"] - chosen["roundtrip"]["test_beam5_mean"], 2)
        return dict(
            name=self.work.name,
            work=str(self.work),
            run=dict((k, self.report.get(k)) for k in ("command", "date", "machine", "commit", "precision")),
            copy={f"{a}-{b}": round(corpus_bleu(self.test.side(a), self.test.side(b), b).score, 2) for a, b in both},
            checkpoints=rows,
            spearman=correlation,
            chosen=chosen,
            bleu_lost=lost,
        )


def main(argv=None):
    logging.getLogger("sacrebleu").setLevel(logging.ERROR)  # tokenised BLEU of tokenised text is meant
    p = argparse.ArgumentParser(prog="python -m recipes.experiments.criterion", description=__doc__.split("\n\n")[0])
    p.add_argument("work", nargs="+", type=Path, help="train.sh work directories made with --keep-checkpoints")
    p.add_argument(
        "--valid",
        action="append",
        default=[],
        metavar="SRC-TGT=PREFIX",
        help="the parallel valid set of the runs of that pair (repeatable; default: each run's raw/valid)",
    )
    p.add_argument(
        "--test",
        action="append",
        default=[],
        metavar="SRC-TGT=PREFIX",
        help="the parallel test of the runs of that pair (repeatable; default: the test each run scored)",
    )
    p.add_argument("--out", type=Path, required=True, help="the record (JSON lines: a line per run, then their means)")
    p.add_argument("--figure", type=Path, help="a PNG of test BLEU against the round-trip score, a line per run")
    args = p.parse_args(argv)
    sets = {"--valid": {}, "--test": {}}
    try:
        for option, given in (("--valid", args.valid), ("--test", args.test)):
            for assignment in given:
                _, key, prefix = parse_assignment(assignment, option, "SRC-TGT=PREFIX")
                sets[option][parse_pair(key, option)] = prefix
        runs_given = [Run(work, sets["--valid"], sets["--test"]) for work in args.work]  # every input read first
    except UserError as e:
        sys.exit(f"criterion: error: {e}")
    runs = []
    for run in runs_given:
        start = time.time()
        runs.append(run.measure())
        r, work = runs[-1], run.work
        print(
            f"{work}: {len(r['checkpoints'])} checkpoints, Spearman {r['spearman']}, chosen "
            f"{r['chosen']}, BLEU lost {r['bleu_lost']} ({time.time() - start:.0f} s)",
            flush=True,
        )
    summary = {
        "spearman_mean": {
            c: round(statistics.mean(x), 3)
            for c in CRITERIA
            for x in [[r["spearman"][c] for r in runs if r["spearman"].get(c) is not None]]
            if x
        },
        "bleu_lost_mean": round(statistics.mean(r["bleu_lost"] for r in runs), 2),
    }
    made = dict(
        date=time.strftime("%Y-%m-%d %H:%M"),
        machine=machine(),
        commit=commit(),
        command=shlex.join(
            ["python", "-m", "recipes.experiments.criterion", *map(str, argv if argv is not None else sys.argv[1:])]
        ),
    )
    # a line per run, then their means: the tables' rows
    lines = [dict(made, table="criterion-run", **r) for r in runs]
    lines.append(dict(made, table="criterion-mean", runs=len(runs), **summary))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    print(json.dumps(summary))
    if args.figure:
        figures.criterion(runs, args.figure)


if __name__ == "__main__":
    main()
