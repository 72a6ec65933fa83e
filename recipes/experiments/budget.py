"""Quality against the budget: ``recipes/train.sh`` runs of one command at several ``--minutes``, their test
BLEU per direction against the minutes, beside copying the source; a markdown table and a figure.

    python -m recipes.experiments.budget recipes/results/train-*-budget-enro-*.json \\
        --figure recipes/figures/budget-enro.png

Runs of one budget (several machines or repeats) are each a point; the line joins their medians. A table of
the documents (``docs/your-languages.md``) is rendered from the same records by ``tables``."""

import argparse
import statistics
from pathlib import Path

from recipes.experiments import figures
from recipes.experiments.lexicon import lever_runs


def table(runs: list) -> str:
    """Markdown: one row per run in budget order, the plan it trained and its test BLEU beside copying."""
    lines = [
        "| minutes | model | machine | pretrain / translate updates | test BLEU (copy) | run |",
        "|---:|---|---|---|---|---|",
    ]
    for run in runs:
        u = run["updates"]
        bleu = " · ".join(f"{d} {run['bleu'][d]:.2f} ({run['copy'][d]:.2f})" for d in sorted(run["bleu"]))
        lines.append(
            f"| {run['budget']:g} | {run['model']} | {run['machine']} | {u.get('pretrain', '?')} / "
            f"{u.get('translate', '?')} | {bleu} | `{run['file']}` |"
        )
    return "\n".join(lines)


def medians(runs: list) -> dict:
    """{direction: [(budget, median test BLEU of the budget's runs)]} in budget order."""
    by_budget: dict = {}
    for run in runs:
        for d, b in run["bleu"].items():
            by_budget.setdefault(d, {}).setdefault(run["budget"], []).append(b)
    return {d: [(m, statistics.median(v)) for m, v in sorted(points.items())] for d, points in by_budget.items()}


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m recipes.experiments.budget", description=__doc__.split("\n\n")[0])
    p.add_argument("reports", type=Path, nargs="+", metavar="REPORT", help="train.sh report.json records")
    p.add_argument("--figure", type=Path, help="draw the figure here (PNG)")
    args = p.parse_args(argv)
    for path in args.reports:
        if not path.is_file():
            p.error(f"REPORT: {path} not found")
    runs = sorted((run for path in args.reports for run in lever_runs(path)), key=lambda r: (r["budget"], r["file"]))
    commands = {run["command"].replace(f"--minutes {run['budget']:g}", "--minutes M") for run in runs}
    commands = {c.split(" --work-dir")[0] for c in commands}
    if len(commands) > 1:
        p.error("REPORT: the runs are of different commands: " + " / ".join(sorted(commands)))
    print(table(runs))
    if args.figure:
        figures.budget(runs, medians(runs), args.figure)


if __name__ == "__main__":
    main()
