"""fairseq-train --store-ema with the plugin's tasks: training unchanged, validation (and so the checkpoint
chosen) on the moving average of the weights, and that average written out as a checkpoint of its own
(xlm_fairseq/tasks/objective_task.py, xlm_fairseq/checkpoints.py)."""

import pytest
import torch
from conftest import MT_ON_VALID_PAIRS, fairseq, generate_lines, json_logs

from xlm_fairseq import checkpoints
from xlm_fairseq.errors import XLMUserError

TIMINGS = ("wps", "ups", "wall", "train_wall", "gb_free", "valid_wps", "ema_decay")


def _train(data_bin, save, *extra):
    """Two epochs of MT on the 100 valid pairs, validated after each: (train_inner rows, valid rows)."""
    proc = fairseq(
        "train",
        data_bin,
        *MT_ON_VALID_PAIRS,
        "--max-epoch",
        "2",
        "--no-eval-bleu",
        "--save-dir",
        save,
        *extra,
    )
    out = proc.stdout + proc.stderr
    return _untimed(json_logs(out, "train_inner")), _untimed(json_logs(out, "valid"))


def _untimed(rows):
    return [{k: v for k, v in r.items() if k not in TIMINGS and k.split("_", 1)[-1] not in TIMINGS} for r in rows]


@pytest.mark.slow  # three fairseq-train runs
def test_validation_scores_the_moving_average_and_it_is_written_out(data_bin, tmp_path):
    plain_train, plain_valid = _train(data_bin, tmp_path / "plain")
    ema = ["--store-ema", "--ema-fp32"]
    same_train, same_valid = _train(data_bin, tmp_path / "decay0", *ema, "--ema-decay", "0")
    slow_train, slow_valid = _train(data_bin, tmp_path / "ema", *ema, "--ema-decay", "0.9")
    # the average takes nothing from training: the same updates with and without it
    assert len(plain_train) > 4 and plain_train == same_train == slow_train
    # decay 0 averages nothing: validation of the average is validation of the weights, to the digit
    assert same_valid == plain_valid
    # decay 0.9: validation scores the average, which lags the weights
    assert [v["valid_loss"] for v in slow_valid] != [v["valid_loss"] for v in plain_valid]

    best = tmp_path / "ema" / "checkpoint_best.pt"
    state = checkpoints.load(str(best))
    out = tmp_path / "ema" / "checkpoint_best_ema.pt"
    checkpoints.write_ema(best, out)
    written = checkpoints.load(str(out))
    average = state["extra_state"]["ema_fp32_params"]
    assert set(written["model"]) == set(state["model"])
    for key, value in written["model"].items():
        assert value.dtype == torch.float32 and torch.equal(value, average[key]), key
    assert not torch.equal(
        written["model"]["decoder.transformer.embeddings.weight"],
        state["model"]["decoder.transformer.embeddings.weight"],
    )
    assert "ema" not in written["extra_state"] and written["last_optimizer_state"] is None
    assert written["extra_state"]["val_loss"] == state["extra_state"]["val_loss"]
    lines, _ = generate_lines(data_bin, out, "de", "en")
    assert len(lines["H"]) == len(lines["S"]) > 0

    with pytest.raises(XLMUserError, match=r"plain/checkpoint_best.pt: holds no moving average"):
        checkpoints.write_ema(tmp_path / "plain" / "checkpoint_best.pt", tmp_path / "none.pt")
    assert not (tmp_path / "none.pt").exists()
