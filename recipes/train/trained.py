"""Which objectives a translation_lm run actually trained, read from its fairseq log, and the updates
a checkpoint holds.

    python -m recipes.train.trained LOG      # one line: "trained: ...; never trained: ... (weight 0 ...)"
    python -m recipes.train.trained LOG --scored CHECKPOINT   # and a line on the checkpoint a recipe scores

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


def saved_updates(state: dict) -> int:
    """The updates a fairseq checkpoint's content was saved at."""
    return int(state["optimizer_history"][-1]["num_updates"])


def checkpoint_updates(checkpoint) -> int:
    """The updates a fairseq checkpoint was saved at (exact, and right for a budget's kept copy when
    the run's log has gone on since)."""
    from xlm_fairseq import checkpoints

    return saved_updates(checkpoints.load(str(checkpoint)))


def scored(checkpoint: Path, last_update: int) -> str:
    """Which update a checkpoint holds and the validation figure it was kept for (fairseq stores the
    value of --best-checkpoint-metric at its save as ``val_loss``)."""
    from xlm_fairseq import checkpoints

    state = checkpoints.load(str(checkpoint))
    value = (state.get("extra_state") or {}).get("val_loss")
    metric = (state.get("cfg") or {}).get("checkpoint", {}).get("best_checkpoint_metric", "metric")
    kept = f", valid {metric} {value:.2f}" if isinstance(value, (int, float)) else ""
    return f"scored: {checkpoint.name}, update {saved_updates(state)} of {last_update}{kept}"


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(prog="python -m recipes.train.trained")
    parser.add_argument("log", type=Path)
    parser.add_argument("--scored", type=Path, metavar="CHECKPOINT", help="also say which update it holds")
    args = parser.parse_args(argv)
    if not args.log.is_file():
        sys.exit(f"trained: error: {args.log}: no such log file")
    if args.scored is not None and not args.scored.is_file():
        sys.exit(f"trained: error: {args.scored}: no such checkpoint")
    text = args.log.read_text(encoding="utf-8", errors="replace")
    print(summary(text))
    if args.scored is not None:
        print(scored(args.scored, trained_objectives(text)[2]))


if __name__ == "__main__":
    main()
