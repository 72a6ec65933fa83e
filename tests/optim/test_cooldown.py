"""xlm_fairseq/optim/cooldown.py: --lr-scheduler inverse_sqrt_cooldown is fairseq's inverse_sqrt until the
last share of the budget (updates or hours), then falls linearly to 0 by its end; a resume keeps its hours."""

import functools

import pytest
import torch
from conftest import PRETRAIN_ARGS, fairseq, json_logs, setup_task


def schedule(data_bin, *args):
    """The schedule fairseq-train builds from ARGS, on a real optimizer over one parameter."""
    from fairseq import optim
    from fairseq.optim import lr_scheduler

    common = ["--langs", "en,de", "--mlm-steps", "en,de", "--cpu", "--optimizer", "adam", "--lr", "0.001"]
    _, cfg = setup_task(data_bin, "cross_lingual_lm", *common, "--warmup-updates", 10, *args)
    optimizer = optim.build_optimizer(cfg.optimizer, [torch.nn.Parameter(torch.zeros(2))])
    return lr_scheduler.build_lr_scheduler(cfg.lr_scheduler, optimizer)


def inverse_sqrt(update):
    return 0.001 * update / 10 if update < 10 else 0.001 * (10 / update) ** 0.5


def test_the_rate_is_inverse_sqrt_then_falls_to_zero_by_the_last_update(data_bin):
    s = schedule(data_bin, "--lr-scheduler", "inverse_sqrt_cooldown", "--max-update", 100, "--cooldown-share", 0.2)
    rates = {u: s.step_update(u) for u in range(101)}
    assert all(rates[u] == pytest.approx(inverse_sqrt(u)) for u in range(81))
    assert rates[90] == pytest.approx(inverse_sqrt(90) * 0.5) and rates[100] == 0.0
    assert all(rates[u] > rates[u + 1] for u in range(80, 100))


def test_the_hours_cool_the_rate_when_they_end_first_and_a_resume_keeps_them(data_bin):
    # a budget of 100 hours: the seconds the test itself takes, however loaded the machine, move the rate
    # by ~1e-5 of itself
    hours = ["--lr-scheduler", "inverse_sqrt_cooldown", "--stop-time-hours", 100, "--cooldown-share", 0.25]
    s = schedule(data_bin, *hours, "--max-update", 1_000_000)
    assert s.step_update(50) == pytest.approx(inverse_sqrt(50))
    s.clock.resume(0.875 * 100 * 3600)  # half way through the last quarter
    assert s.step_update(50) == pytest.approx(inverse_sqrt(50) * 0.5, rel=1e-3)
    resumed = schedule(data_bin, *hours)
    resumed.load_state_dict(s.state_dict())
    assert resumed.step_update(50) == pytest.approx(inverse_sqrt(50) * 0.5, rel=1e-3)
    resumed.clock.resume(100 * 3600)
    assert resumed.step_update(50) == 0.0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--cooldown-share", 0, "--max-update", 10], "--cooldown-share 0"),
        (["--cooldown-share", 1.5, "--max-update", 10], "--cooldown-share 1.5"),
        ([], "needs a budget to cool down before: --max-update or --stop-time-hours"),
    ],
)
def test_a_share_outside_0_to_1_or_no_budget_is_refused(data_bin, args, message):
    from xlm_fairseq.errors import XLMUserError

    with pytest.raises(XLMUserError, match=message):
        schedule(data_bin, "--lr-scheduler", "inverse_sqrt_cooldown", *args)


@pytest.mark.slow  # one fairseq-train run; the fast tier checks the schedule in process
def test_fairseq_train_logs_the_cooled_down_rates(data_bin, tmp_path):
    """Through fairseq-train's command line: the rates of the last half of 8 updates fall to 0."""
    cooldown = ["--lr-scheduler", "inverse_sqrt_cooldown", "--warmup-updates", 4, "--cooldown-share", 0.5]
    langs = ["--langs", "en,de", "--mlm-steps", "en,de", "--log-interval", 1, "--no-save"]
    proc = fairseq("train", data_bin, *PRETRAIN_ARGS, *langs, *cooldown, "--max-update", 8, "--save-dir", tmp_path)
    rates = {int(r["num_updates"]): float(r["lr"]) for r in json_logs(proc.stdout + proc.stderr, "train_inner")}
    approx = functools.partial(pytest.approx, rel=1e-5)  # fairseq logs 6 digits
    # the rate set after update N, for the next: warming up, then cooling down from half way
    assert rates[3] == approx(0.001 * 3 / 4) and rates[4] == approx(0.001)
    assert rates[5] == approx(0.001 * (4 / 5) ** 0.5 * 0.75) and rates[7] == approx(0.001 * (4 / 7) ** 0.5 * 0.25)
