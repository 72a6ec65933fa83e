"""How the benchmarks run their child processes: one at a time, to completion, with their peak resident
memory; optionally beside busy processes that stand for another job on the machine."""

import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # fairseq-train etc. of the interpreter that runs the benchmark
# one core kept busy, as another single-threaded job would: small matmuls on one thread, for ever
BUSY_LOOP = "import torch; torch.set_num_threads(1); a = torch.randn(256, 256)\nwhile True: a @ a"


class BenchError(RuntimeError):
    pass


def tool(name):
    path = BIN / name
    return str(path) if path.exists() else (shutil.which(name) or name)


def run_child(cmd, log_path, env=None):
    """Run a command to completion; returns (combined output, peak RSS in MiB, seconds)."""
    start = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    text = Path(log_path).read_text(errors="replace")
    if proc.returncode != 0:
        tail = "\n".join(text.splitlines()[-15:])
        raise BenchError(f"{' '.join(cmd[:3])} ... failed (exit {proc.returncode}); log {log_path}:\n{tail}")
    return text, usage.ru_maxrss / 1024.0, seconds


@contextlib.contextmanager
def busy_processes(count: int):
    """``count`` processes each keeping one core busy while the block runs, stopped after it."""
    procs = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(count)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
