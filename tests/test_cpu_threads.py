"""Training on a CPU gives cores that other processes keep busy back to them (xlm_fairseq/cpu_threads.py):
a 2-thread fairseq-train beside one busy process used to run ~10x slower than on 1 thread, its
OpenMP threads spinning while they waited for the descheduled one."""

import os
import re
import runpy
import subprocess
import sys
import time

import pytest
import torch
from conftest import BIN, PRETRAIN_ARGS, ROOT, run

from xlm_fairseq.cpu_threads import IdleCoreThreads, cpu_busy_ticks, own_ticks

BUSY_LOOP = "while True: pass"  # one core kept busy, as another single-threaded job would
TWO_CPUS = set(sorted(os.sched_getaffinity(0))[:2])  # where both run: the test means the same on any machine


def on_two_cpus():
    os.sched_setaffinity(0, TWO_CPUS)


def busy_process():
    return subprocess.Popen([sys.executable, "-c", BUSY_LOOP], preexec_fn=on_two_cpus)


def test_threads_follow_the_cores_other_processes_leave_idle(tmp_path):
    """From /proc/stat's busy fields of this process's CPUs less its own time: under half a core of
    others' work keeps every thread, more gives a core back, and never fewer than 1 thread."""
    stat = tmp_path / "stat"
    stat.write_text("cpu  90 1 20 500 7 3 4 5 0 0\ncpu0 40 1 10 250 3 1 2 2 0 0\ncpu1 50 0 10 250 4 2 2 3 0 0\n")
    assert cpu_busy_ticks([0], str(stat)) == 40 + 1 + 10 + 1 + 2 + 2  # idle and iowait left out
    assert cpu_busy_ticks([0, 1], str(stat)) == 56 + 50 + 10 + 2 + 2 + 3
    threads = IdleCoreThreads()
    threads.max_threads, threads.cpus = 2, [0, 1]
    assert [threads.threads_for(cores) for cores in (0.0, 0.3, 0.6, 1.0, 1.4, 1.6, 3.0)] == [2, 2, 1, 1, 1, 1, 1]
    assert [threads.held_cores(cores) for cores in (0.0, 0.3, 0.6, 1.4, 1.6, 3.0)] == [0, 0, 1, 1, 2, 2]
    threads.cpus = list(range(16))  # 2 threads of 16 cores: one busy core takes nothing from them
    assert threads.threads_for(1.0) == 2 and threads.threads_for(14.6) == 1
    threads.cpus = [0, 1]
    threads.max_threads = 1  # never more than at the start (OMP_NUM_THREADS)
    assert threads.threads_for(0.0) == 1
    ticks = threads.tick_seconds
    assert threads.others_cores((0.0, 100, 10), (2.0, 100 + 2 / ticks, 10 + 1 / ticks)) == pytest.approx(0.5)


def test_a_busy_process_takes_one_thread_and_its_time_is_not_ours():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        threads = IdleCoreThreads(interval=0.5)
        threads.cpus = sorted(TWO_CPUS)
        start = own_ticks()
        busy = busy_process()
        try:
            for _ in range(20):  # our own time in the window is not counted as others'
                torch.randn(512, 512) @ torch.randn(512, 512)
            time.sleep(1.5)
            threads.follow()
        finally:
            busy.kill()
            busy.wait()
        assert own_ticks() > start and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow  # two fairseq-train runs beside a busy process
def test_fairseq_train_gives_a_busy_core_back_unless_told_not_to(data_bin):
    """Both on the same two CPUs, fairseq-train starting on 2 threads."""
    args = [data_bin, *PRETRAIN_ARGS, "--langs", "en,de", "--mlm-steps", "en,de", "--max-update", "100000"]
    # 14 s from the trainer's start: under load its first update can come seconds late, and the threads follow
    # from the first update on, every 2 s
    args += ["--stop-time-hours", "0.004", "--no-save"]
    busy = busy_process()
    try:
        governed, fixed = (
            run([BIN / "fairseq-train", *args, *extra], env_extra={"OMP_NUM_THREADS": "2"}, preexec_fn=on_two_cpus)
            for extra in ([], ["--fixed-cpu-threads"])
        )
    finally:
        busy.kill()
        busy.wait()
    # 1 core held by the busy loop; 2 when the suite's other worker shares these CPUs too
    governed_log = governed.stdout + governed.stderr
    assert re.search(r"CPU threads 2 -> 1: other processes keep [12] of 2 cores busy", governed_log)
    assert "CPU threads" not in fixed.stdout + fixed.stderr
    # what bench/run.py counts in ours' logs (a run that gave cores back is marked in its results)
    changed = runpy.run_path(str(ROOT / "bench" / "logs.py"))["THREADS_CHANGED"]
    assert changed.findall(governed.stdout + governed.stderr) and not changed.findall(fixed.stdout + fixed.stderr)


def test_without_linux_proc_threads_stay(monkeypatch):
    """macOS and Windows have no sched_getaffinity and no /proc: nothing read, nothing changed."""
    monkeypatch.delattr(os, "sched_getaffinity")
    threads = IdleCoreThreads(interval=0.0)
    before = torch.get_num_threads()
    threads.follow()
    assert threads.last is None and threads.cpus == [] and torch.get_num_threads() == before
