#!/usr/bin/env python3
"""Whether averaging weights helps a translation run at its end, measured on ``recipes/train.sh
--keep-checkpoints`` work directories with a parallel test.

    python -m recipes.experiments.averaging WORK [WORK ...] --out RECORD.jsonl [--last N]

For each of a run's last N kept checkpoints (``checkpoint_last.pt`` included): the test BLEU of its weights
and, where the run kept one (``fairseq-train --store-ema``), of their moving average; then of the mean of the
last two kept checkpoints' weights (as fairseq's ``scripts/average_checkpoints.py`` averages). Test BLEU as
the run scores: fairseq-generate, beam 5, sacreBLEU on detokenised text, both directions. A line per
checkpoint in the record, the last of a run with the mean of the last two."""

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import List

import torch

from preprocess.segment import corpus_bleu
from recipes.train import stages
from recipes.train.scoring import BEAM, commit, generate, generated, machine
from recipes.train.trained import checkpoint_updates


def run_command(cmd, log):
    stages.run_logged("averaging", cmd, log)


def test_bleu(work: Path, tests: List[dict], ckpt: Path, out: Path) -> dict:
    """{direction: test BLEU} of ``ckpt``'s weights on the run's own test (``tests``: its report's rows of it;
    beam 5, as the run scores)."""
    tool = lambda name: str(Path(sys.executable).parent / name)  # noqa: E731
    scores = {}
    for row in tests:
        src, tgt = row["direction"].split("-")
        refs = Path(row["source"]).with_suffix(f".{tgt}").read_text(encoding="utf-8").splitlines()
        gen = generate(
            tool, run_command, work / "data-bin", "test", src, tgt, ckpt, BEAM, out / f"{ckpt.stem}.{src}-{tgt}"
        )
        found = generated(gen, "D")
        scores[row["direction"]] = round(corpus_bleu([found[i] for i in range(len(refs))], refs, tgt).score, 2)
    return scores


def mean_of(kept: dict, dest: Path) -> Path:
    """``dest``: the last kept checkpoint with the mean of its weights and the one's before it."""
    from xlm_fairseq import checkpoints

    first, last = [checkpoints.load(str(kept[u])) for u in sorted(kept)[-2:]]
    last["model"] = {
        k: ((v.float() + first["model"][k].float()) / 2).to(v.dtype) if v.is_floating_point() else v
        for k, v in last["model"].items()
    }
    torch.save(last, dest)
    return dest


def measure(work: Path, last: int) -> List[dict]:
    """A row per checkpoint scored, the last with the mean of the last two where the run kept two."""
    from xlm_fairseq import checkpoints

    out = work / "out" / "averaging"
    out.mkdir(parents=True, exist_ok=True)
    report = json.loads((work / "report.json").read_text(encoding="utf-8"))
    tests = [r for r in report["bleu"] if r["set"] == "test"]
    kept = {}
    for path in sorted((work / "checkpoints" / "translate").glob("checkpoint*.pt")):
        if not path.name.startswith("checkpoint_best"):
            kept.setdefault(checkpoint_updates(path), path)
    rows = []
    for update, path in sorted(kept.items())[-last:]:
        row = dict(update=update, checkpoint=path.name, weights=test_bleu(work, tests, path, out))
        if (checkpoints.load(str(path)).get("extra_state") or {}).get("ema"):
            average = out / f"{path.stem}_ema.pt"
            checkpoints.write_ema(path, average)
            row["ema"] = test_bleu(work, tests, average, out)
        rows.append(row)
    if len(kept) >= 2:  # a run that kept one checkpoint has no two to average
        rows[-1]["mean_of_last_two"] = test_bleu(work, tests, mean_of(kept, out / "mean_of_last_two.pt"), out)
        rows[-1]["mean_updates"] = sorted(kept)[-2:]
    run = dict(
        name=work.name,
        machine=machine(),
        commit=commit(),
        date=time.strftime("%Y-%m-%d %H:%M"),
        command=shlex.join(["python", "-m", "recipes.experiments.averaging", *sys.argv[1:]]),
        run_command=report["command"],
        copy={r["direction"]: r["copy"] for r in tests},
    )
    return [dict(run, **row) for row in rows]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m recipes.experiments.averaging", description=__doc__.split("\n\n")[0])
    p.add_argument("work", nargs="+", type=Path, help="train.sh work directories made with --keep-checkpoints")
    p.add_argument("--out", type=Path, required=True, help="the record (JSON lines: a line per checkpoint scored)")
    p.add_argument("--last", type=int, default=3, help="how many of the last kept checkpoints to score (default 3)")
    args = p.parse_args(argv)
    for work in args.work:
        if not (work / "report.json").is_file():
            sys.exit(f"averaging: error: {work}: no report.json: not a finished train.sh work directory")
    with open(args.out, "a", encoding="utf-8") as f:
        for work in args.work:
            f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in measure(work, args.last))
            print(f"{work}: measured -> {args.out}", flush=True)


if __name__ == "__main__":
    main()
