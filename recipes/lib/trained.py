"""Which objectives a translation_lm run actually trained, read from its fairseq log.

    python -m recipes.lib.trained LOG      # one line: "trained: ...; never trained: ... (weight 0 ...)"

A recipe's stage says what it schedules; a stage bounded in wall time may stop before a schedule
starts (back-translation whose weight is 0 until iteration 600, in a stage that ends at 500). The
log tells: an objective that took a step logged its loss (``bt_en-de-en_loss``) in a training line;
a family whose weight stayed 0 logged only its weight (``lambda_bt``)."""

import re
import sys
from pathlib import Path

FAMILIES = {"mt": "MT", "ae": "AE", "bt": "BT"}
# fairseq's training lines, every --log-interval and at the end of an epoch or of the run, as its
# --log-file holds them (the message only) or as printed (behind ``| train_inner |``), in its simple
# format (``key=value``, ``| key value``) or json (``"key": "value"``, ``"train_key": "value"``);
# validation lines (``valid on``, ``"valid_key"``) name every objective and are left out
KEY = r"(?:(?<![A-Za-z0-9_])|(?<=train_))"
LOSS = re.compile(KEY + r'(mt|ae|bt)_([A-Za-z0-9_]+(?:-[A-Za-z0-9_]+)*)_loss"?[=:\s]')
SCHEDULED = re.compile(KEY + r'lambda_(mt|ae|bt)"?[=:\s]')
UPDATES = re.compile(KEY + r'num_updates"?[=:\s]+"?(\d+)')
VALIDATION = re.compile(r'valid on|"valid_')


def trained_objectives(log_text: str):
    """({family: sorted objective language keys that logged a loss}, families with a logged weight,
    last update number or None), from the log's training lines."""
    trained, scheduled, last = {}, set(), None
    for line in log_text.splitlines():
        updates = UPDATES.search(line)
        if not updates or VALIDATION.search(line):
            continue
        for family, langs in LOSS.findall(line):
            trained.setdefault(family, set()).add(langs)
        scheduled.update(SCHEDULED.findall(line))
        last = int(updates.group(1))
    return {f: sorted(v) for f, v in trained.items()}, scheduled, last


def summary(log_text: str) -> str:
    trained, scheduled, last = trained_objectives(log_text)
    if last is None:
        return "no training logged (no line with num_updates)"
    parts = [f"{FAMILIES[f]} {' '.join(trained[f])}" for f in FAMILIES if f in trained]
    line = f"trained to update {last}: {', '.join(parts) if parts else 'nothing'}"
    idle = [FAMILIES[f] for f in FAMILIES if f in scheduled and f not in trained]
    if idle:
        line += f"; never trained: {', '.join(idle)} (weight 0 for the whole stage: its schedule starts later)"
    return line


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        sys.exit("usage: python -m recipes.lib.trained LOG")
    path = Path(argv[0])
    if not path.is_file():
        sys.exit(f"trained: error: {path}: no such log file")
    print(summary(path.read_text(encoding="utf-8", errors="replace")))


if __name__ == "__main__":
    main()
