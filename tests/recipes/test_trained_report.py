"""recipes/train/trained.py: which objectives a translation_lm run trained, read from fairseq's log of a
real run (a schedule that never started is reported as such, not as trained)."""

import subprocess
import sys

from conftest import ROOT, UNMT_ARGS, fairseq


def _train(data_bin, tmp_path, *extra):
    log = tmp_path / "translate.log"
    fairseq(
        "train",
        data_bin,
        *UNMT_ARGS,
        "--langs",
        "de,en",
        "--mt-steps",
        "de-en",
        "--ae-steps",
        "en",
        "--bt-steps",
        "en-de-en",
        *extra,
        "--max-update",
        "6",
        "--log-interval",
        "2",
        "--no-save",
        "--log-file",
        log,
    )
    return subprocess.run(
        [sys.executable, "-m", "recipes.train.trained", log], capture_output=True, text=True, cwd=ROOT
    )


def test_a_schedule_that_never_started_is_not_reported_as_trained(data_bin, tmp_path):
    proc = _train(data_bin, tmp_path, "--lambda-bt", "0:0,100:0,200:1", "--log-format", "simple")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (
        "trained to update 6: MT de-en, AE en; never trained: BT (weight 0 for the whole stage: its schedule "
        "starts later)"
    )


def test_every_objective_that_trained_is_named(data_bin, tmp_path):
    proc = _train(data_bin, tmp_path, "--log-format", "json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "trained to update 6: MT de-en, AE en, BT en-de-en"


def test_a_missing_log_is_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "recipes.train.trained", tmp_path / "nope.log"], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 1 and proc.stderr.strip() == f"trained: error: {tmp_path / 'nope.log'}: no such log file"


def test_a_missing_scored_checkpoint_is_one_line_before_any_report(tmp_path):
    log = tmp_path / "translate.log"
    log.write_text('{"epoch": 1, "num_updates": "6", "ae_en_loss": "5.1"}\n')
    proc = subprocess.run(
        [sys.executable, "-m", "recipes.train.trained", log, "--scored", tmp_path / "best.pt"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip() == f"trained: error: {tmp_path / 'best.pt'}: no such checkpoint"


def test_progress_lines_while_a_stage_trains(data_bin, tmp_path):
    """recipes/train/progress.py through the stage engine: while fairseq-train runs, a line every
    XLM_FAIRSEQ_PROGRESS_SECONDS with the update and the budget left; from the finished log, the
    validation metric asked for."""
    import os
    import re

    from recipes.train.progress import progress_line

    log = tmp_path / "translate.log"
    train = [
        sys.executable,
        "-m",
        "fairseq_cli.train",
        data_bin,
        *UNMT_ARGS,
        "--langs",
        "de,en",
        "--mt-steps",
        "de-en",
        "--valid-lang-pairs",
        "de-en",
        "--max-update",
        "8",
        "--validate-interval-updates",
        "8",
        "--log-interval",
        "1",
        "--no-save",
        "--log-file",
        log,
    ]
    engine = [
        sys.executable,
        "-m",
        "recipes.train.stages",
        "--recipe",
        "t",
        "run-logged",
        "--progress",
        log,
        "--budget-hours",
        "0.5",
        "--metric",
        "^bleu_de-en$",
        tmp_path / "out.txt",
    ]
    env = dict(os.environ, XLM_FAIRSEQ_PROGRESS_SECONDS="0.5", PYTHONPATH=str(ROOT))
    proc = subprocess.run([str(c) for c in engine + train], capture_output=True, text=True, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stdout.splitlines() if re.match(r"   \d+ min: ", line)]
    assert lines and all(re.search(r", \d+ of 30 min left", line) for line in lines), proc.stdout
    assert any(re.search(r"update \d+, .*; loss [0-9.]+", line) for line in lines), proc.stdout
    # and the figures' reading of it (recipes/train/figures.py): one validation, at the last wall clock
    from recipes.train.figures import validation_curves

    curves = validation_curves(log.read_text(), "^bleu_de-en$")
    assert list(curves) == ["bleu_de-en"] and len(curves["bleu_de-en"]) == 1 and curves["bleu_de-en"][0][0] > 0
    last = progress_line(log.read_text(), 120, 0.5, "^bleu_de-en$")
    assert re.fullmatch(r"2 min: update 8, 28 of 30 min left; loss [0-9.]+; valid bleu_de-en [0-9.]+", last), last
