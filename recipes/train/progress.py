"""A training stage's progress while it runs, read from its fairseq ``--log-file`` (simple or json):
one line about once a minute, so that a stage of 7 or 19 minutes never sits silent::

       2 min: update 812, 5 of 7 min left; loss 6.91; valid mlm_en_fullmask_ppl 310.2 mlm_de_fullmask_ppl 288.0

``run_logged(..., progress=Progress(LOG, budget_hours, METRIC))`` (``stages.py``) prints it every
``XLM_FAIRSEQ_PROGRESS_SECONDS`` (default 60) while the command runs; METRIC is a regular
expression of the validation keys worth showing (the stage's own: full-mask perplexity, BLEU)."""

import os
import re
import time
from pathlib import Path
from typing import Dict, Optional

from recipes.train.trained import UPDATES, VALIDATION

# fairseq's simple format (``| key value`` at epoch ends and validations, ``key=value, ...`` every
# --log-interval) or json (``"key": "value"``, where fairseq prefixes valid_/train_)
FORMATS = (
    re.compile(r"\| ([A-Za-z0-9_][A-Za-z0-9_.-]*) (-?[0-9][0-9.]*)(?= \||$)"),
    re.compile(r"(?:^|[ ,])([A-Za-z0-9_][A-Za-z0-9_.-]*)=(-?[0-9][0-9.]*)(?=,|$)"),
    re.compile(r'"(?:valid_|train_)?([A-Za-z0-9_][A-Za-z0-9_.-]*)": "?(-?[0-9][0-9.]*)"?[,}]'),
)


def fields(line: str) -> Dict[str, str]:
    """The numeric fields of one fairseq log line, in whichever of its formats."""
    return dict(next((found for found in (f.findall(line) for f in FORMATS) if found), []))


def interval_seconds() -> float:
    return float(os.environ.get("XLM_FAIRSEQ_PROGRESS_SECONDS", "60"))


def progress_line(log_text: str, elapsed: float, budget_hours: Optional[float], metric: str) -> str:
    """What a stage has done so far: minutes, last update, budget left, last training loss and the
    last validation's METRIC fields."""
    updates, loss, valid = None, None, {}
    for line in log_text.splitlines():
        found, logged = fields(line), UPDATES.search(line)
        if logged:  # training and validation lines both say the update
            updates = int(logged.group(1))
        if VALIDATION.search(line):
            valid = {k: v for k, v in found.items() if re.search(metric, k)} or valid
        elif logged:
            loss = found.get("loss", loss)
    minutes = elapsed / 60
    parts = [f"{minutes:.0f} min: " + (f"update {updates}" if updates is not None else "no update logged yet")]
    if budget_hours:
        budget = budget_hours * 60
        parts[0] += f", {max(budget - minutes, 0):.0f} of {budget:.0f} min left"
    if loss is not None:
        parts.append(f"loss {loss}")
    if valid:
        parts.append("valid " + " ".join(f"{k} {v}" for k, v in valid.items()))
    return "; ".join(parts)


class Progress:
    """Called by ``run_logged`` every :func:`interval_seconds` while its command runs."""

    def __init__(self, log_file, budget_hours: Optional[float], metric: str):
        self.log_file, self.budget_hours, self.metric = Path(log_file), budget_hours, metric
        self.started = time.monotonic()

    def __call__(self):
        text = self.log_file.read_text(encoding="utf-8", errors="replace") if self.log_file.is_file() else ""
        line = progress_line(text, time.monotonic() - self.started, self.budget_hours, self.metric)
        print(f"   {line}", flush=True)
