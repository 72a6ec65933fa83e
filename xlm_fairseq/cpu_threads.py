"""CPU threads that give way to other busy processes while training or decoding.

torch runs its CPU kernels on OpenMP threads, about one per core, which spin at the end of every
parallel region until all of them have finished. While another process keeps one of the cores busy,
one thread is descheduled in every region and the others spin waiting for it: a 2-thread run beside
one busy process is many times slower than a 1-thread one (bench/README.md, "Sharing the CPU with
another job").

So, while a task trains or decodes on a CPU, every few seconds :class:`IdleCoreThreads` reads from Linux's
``/proc`` how much time other processes took on this process's cores, and sets torch's thread count
to the cores they leave idle: never below 1, never above what it was at the start (torch's default,
or ``OMP_NUM_THREADS``). Where ``/proc`` cannot be read it does nothing."""

import logging
import os
import time
from typing import Optional, Sequence, Tuple

import torch

logger = logging.getLogger(__name__)

BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # /proc/stat: user, nice, system, irq, softirq, steal (idle, iowait are not)
INTERVAL_SECONDS = 2.0  # long enough for a reading of a few hundred clock ticks, short beside a stage
# another process counts as holding a core from this share of one: two 2-thread spinners sharing
# 2 cores with one busy loop leave it ~0.6 of a core, a browser or an editor takes less than ~0.3
HELD_CORE = 0.5


def cpu_busy_ticks(cpus: Sequence[int], stat: str = "/proc/stat") -> int:
    """Clock ticks the given CPUs have spent busy since boot, whoever ran on them."""
    wanted = {f"cpu{c}" for c in cpus}
    with open(stat) as f:
        fields = [line.split() for line in f if line.startswith("cpu")]
    return sum(int(row[1 + i]) for row in fields if row[0] in wanted for i in BUSY_FIELDS)


def own_ticks(stat: str = "/proc/self/stat") -> int:
    """Clock ticks this process (all its threads) has spent on a CPU: utime + stime."""
    with open(stat) as f:
        after_name = f.read().rpartition(")")[2].split()  # the name may hold spaces
    return int(after_name[11]) + int(after_name[12])


class IdleCoreThreads:
    """torch's CPU thread count following the cores that other processes leave idle; call
    :meth:`follow` once per update (it reads ``/proc`` only every ``interval`` seconds)."""

    def __init__(self, interval: float = INTERVAL_SECONDS, clock=time.monotonic):
        self.interval, self.clock = interval, clock
        self.max_threads = torch.get_num_threads()
        linux = hasattr(os, "sched_getaffinity")  # elsewhere there is no /proc to read: threads stay
        self.cpus = sorted(os.sched_getaffinity(0)) if linux else []
        self.tick_seconds = 1.0 / os.sysconf("SC_CLK_TCK") if linux else 0.0
        self.last: Optional[Tuple[float, int, int]] = self._reading() if linux else None

    def _reading(self) -> Optional[Tuple[float, int, int]]:
        try:
            return self.clock(), cpu_busy_ticks(self.cpus), own_ticks()
        except (OSError, ValueError, IndexError):
            return None  # /proc unreadable here: leave torch's threads alone

    def others_cores(self, before, after) -> float:
        """Cores' worth of time that other processes took between two readings."""
        seconds = after[0] - before[0]
        others = (after[1] - before[1]) - (after[2] - before[2])
        return max(0.0, others * self.tick_seconds / seconds)

    def held_cores(self, others_cores: float) -> int:
        return min(len(self.cpus), int(others_cores + 1 - HELD_CORE))

    def threads_for(self, others_cores: float) -> int:
        return max(1, min(self.max_threads, len(self.cpus) - self.held_cores(others_cores)))

    def follow(self) -> None:
        if self.max_threads <= 1 or self.last is None or self.clock() - self.last[0] < self.interval:
            return
        now = self._reading()
        if now is None:
            self.last = None
            return
        others = self.others_cores(self.last, now)
        threads = self.threads_for(others)
        self.last = now
        if threads != torch.get_num_threads():
            logger.info(
                "CPU threads %d -> %d: other processes keep %d of %d cores busy",
                torch.get_num_threads(),
                threads,
                self.held_cores(others),
                len(self.cpus),
            )
            torch.set_num_threads(threads)
