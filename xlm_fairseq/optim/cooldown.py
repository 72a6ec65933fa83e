"""``--lr-scheduler inverse_sqrt_cooldown``: fairseq's ``inverse_sqrt`` (linear warm-up, then 1/sqrt of the
update), falling linearly to 0 over the last ``--cooldown-share`` of the run's budget: of
``--stop-time-hours`` or of ``--max-update``, whichever ends first.

A run cut off by a time budget otherwise stops at whatever learning rate the schedule has reached, with the
loss still falling; budget-aware schedules that decay to 0 by the end of the budget train better in the
same time (Li et al. 2020, "Budgeted training"; the warm-up, stable, decay schedules of Hägele et al.
2024). The hours count as fairseq counts them for ``--stop-time-hours``: training time including
validation, carried over a resume in the scheduler's state; data-parallel ranks agree on the time before
each update's rate, so their learning rates stay equal."""

import time
from dataclasses import dataclass, field

import torch
from fairseq.distributed import utils as distributed_utils
from fairseq.optim.lr_scheduler import register_lr_scheduler
from fairseq.optim.lr_scheduler.inverse_square_root_schedule import (
    InverseSquareRootLRScheduleConfig,
    InverseSquareRootSchedule,
)
from omegaconf import II

from xlm_fairseq.errors import XLMUserError


@dataclass
class InverseSqrtCooldownConfig(InverseSquareRootLRScheduleConfig):
    cooldown_share: float = field(
        default=0.2,
        metadata={
            "help": "the last share of the run (of --stop-time-hours, or of --max-update, whichever ends "
            "first) over which the learning rate falls linearly to 0"
        },
    )
    stop_time_hours: float = II("optimization.stop_time_hours")
    max_update: int = II("optimization.max_update")


class TrainingClock:
    """Seconds of training: those of earlier runs of the same training (from a checkpoint) plus this one's."""

    def __init__(self):
        self.before, self.start = 0.0, time.monotonic()

    def seconds(self) -> float:
        return self.before + time.monotonic() - self.start

    def resume(self, seconds: float):
        self.before, self.start = seconds, time.monotonic()


def agreed(seconds: float) -> float:
    """The largest of the data-parallel ranks' clocks, the same on every rank (one all-reduce)."""
    if distributed_utils.get_data_parallel_world_size() == 1:
        return seconds
    nccl = torch.distributed.get_backend() == "nccl"
    device = torch.device("cuda", torch.cuda.current_device()) if nccl else torch.device("cpu")
    value = torch.tensor([seconds], dtype=torch.float64, device=device)
    distributed_utils.all_reduce(value, distributed_utils.get_data_parallel_group(), op="max")
    return float(value.item())


@register_lr_scheduler("inverse_sqrt_cooldown", dataclass=InverseSqrtCooldownConfig)
class InverseSqrtCooldownSchedule(InverseSquareRootSchedule):
    def __init__(self, cfg: InverseSqrtCooldownConfig, optimizer):
        if not 0 < cfg.cooldown_share <= 1:
            raise XLMUserError(f"--cooldown-share {cfg.cooldown_share}: expected a share above 0, at most 1")
        if cfg.max_update <= 0 and cfg.stop_time_hours <= 0:
            raise XLMUserError(
                "--lr-scheduler inverse_sqrt_cooldown needs a budget to cool down before: "
                "--max-update or --stop-time-hours"
            )
        super().__init__(cfg, optimizer)
        self.clock = TrainingClock()

    def progress(self, num_updates: int) -> float:
        """The share of the budget spent: of the updates or of the hours, whichever is further."""
        spent = num_updates / self.cfg.max_update if self.cfg.max_update > 0 else 0.0
        if self.cfg.stop_time_hours > 0:
            spent = max(spent, agreed(self.clock.seconds()) / (3600 * self.cfg.stop_time_hours))
        return spent

    def step_update(self, num_updates):
        lr = super().step_update(num_updates)
        factor = (1 - self.progress(num_updates)) / self.cfg.cooldown_share
        if factor < 1:
            self.lr = lr * max(factor, 0.0)
            self.optimizer.set_lr(self.lr)
        return self.optimizer.get_lr()

    def state_dict(self):
        # saved on the checkpoint's rank alone: its own clock, no collective
        return {**super().state_dict(), "training_seconds": self.clock.seconds()}

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self.clock.resume(state_dict.get("training_seconds", 0.0))
