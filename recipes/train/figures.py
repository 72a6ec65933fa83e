"""PNG figures of a training run, drawn with matplotlib (the package's ``[figures]`` extra, which
``scripts/setup.sh`` installs); without it a run says so in one line and goes on.

:func:`training_run` draws a ``recipes/train.sh`` run (the quickstart's too): full-mask perplexity per
language against minutes of pretraining, validation BLEU per direction against minutes of translation,
beside copying the source (unsupervised: the round trips of held-out text); from the stages' fairseq logs
(the wall clock of the training line before each validation). The experiments' figures
(``recipes.experiments.figures``) draw with the same helpers."""

import logging
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from recipes.train.progress import fields
from recipes.train.trained import UPDATES, VALIDATION

Curve = List[Tuple[float, float]]


def pyplot():
    """matplotlib's pyplot without a display, or None (with one line saying how to get it)."""
    # fairseq's imports (hydra) may have set the root logger to DEBUG: keep matplotlib's import and font search out
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("figures:     none, matplotlib is not installed (pip install matplotlib, or bash scripts/setup.sh)")
        return None
    return plt


def validation_curves(log_text: str, metric: str) -> Dict[str, Curve]:
    """{validation key matching ``metric``: [(minutes, value)]} from a fairseq log; the minutes are
    the ``wall`` of the last training line before each validation."""
    curves: Dict[str, Curve] = {}
    wall = 0.0
    for line in log_text.splitlines():
        found = fields(line)
        if VALIDATION.search(line):
            for key, value in found.items():
                point = (wall / 60, float(value))
                # fairseq writes a validation line to the log file twice when it also prints it
                if re.search(metric, key) and curves.get(key, [None])[-1] != point:
                    curves.setdefault(key, []).append(point)
        elif UPDATES.search(line) and "wall" in found:
            wall = float(found["wall"])
    return curves


def copy_baselines(axis, copies: Dict[str, float], suffix: str = "") -> None:
    """Grey lines, one style per direction, at the BLEU of copying the source."""
    styles = ("--", ":", "-.", (0, (1, 3)), (0, (5, 1)), (0, (3, 1, 1, 1)))
    for k, direction in enumerate(sorted(copies)):
        label = f"copy source {direction}{suffix}"
        axis.axhline(float(copies[direction]), color="grey", linestyle=styles[k % len(styles)], label=label)


def legends(*axes, fontsize: int = 8) -> None:
    for axis in axes:
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize=fontsize)


def save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def training_run(work: Path, name: str) -> Optional[Path]:
    """WORK/figures/NAME.png of a ``recipes/train.sh`` run (the quickstart's too): full-mask perplexity per
    language against minutes of pretraining, validation BLEU per direction against minutes of translation,
    beside the test sets' copy-the-source BLEU."""
    plt = pyplot()
    if plt is None:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    logs = {stage: work / "logs" / f"{stage}.log" for stage in ("pretrain", "translate")}
    texts = {k: log.read_text(encoding="utf-8", errors="replace") if log.is_file() else "" for k, log in logs.items()}
    trips = "roundtrip_score" in texts["translate"]  # without pairs: the round trips chose the checkpoint
    for axis, stage, metric, title in (
        (left, "pretrain", r"^mlm_.+_fullmask_ppl$", "pretraining: full-mask perplexity"),
        (right, "translate", r"^roundtrip_" if trips else r"^bleu_(?!tok_|mean)", "translation: validation BLEU"),
    ):
        curves = validation_curves(texts[stage], metric)
        for key, points in sorted(curves.items()):
            axis.plot(*zip(*points), marker="o", markersize=3, label=key)
        axis.set_title(title)
        axis.set_xlabel("minutes")
    left.set_yscale("log")
    if trips:
        right.set_title("translation: round trips of held-out text (tokenised BLEU)")
    else:  # validation and test BLEU on one scale: copying the test's source
        copies = {
            f.name[len("copy.") : -len(".txt")]: float(f.read_text())
            for f in sorted((work / "out" / "test").glob("copy.*.txt"))
        }
        copy_baselines(right, copies, " (test)")
    legends(left, right)
    return save(fig, work / "figures" / f"{name}.png")
