"""One measured process of the speed benchmark: a training run's throughput (the median of its ``train_inner``
windows) or a generation's (fairseq-generate's sentences/s), with its peak resident memory."""

import shutil
import statistics

from children import BenchError, run_child
from logs import GENERATED, THREADS_CHANGED, compile_stats, train_windows
from workload import GEN_LEN


def measure_training(name, cmd, work, runs):
    """One training process; appends {median of its windows, peak RSS} to runs[name]. Its ``--save-dir``
    is emptied first: fairseq would resume from the last run's checkpoint."""
    if "--save-dir" in cmd:
        shutil.rmtree(cmd[cmd.index("--save-dir") + 1], ignore_errors=True)
    log = work / "logs" / f"{name}.{len(runs.setdefault(name, []))}.log"
    text, rss, seconds = run_child(cmd, log)
    windows = train_windows(text)[1:]  # the first window holds the warm-up
    if len(windows) < 3:
        raise BenchError(f"{name}: {len(windows)} timed windows in {log} (need >= 3); raise --updates")
    run = {
        key: statistics.median(w[key] for w in windows)
        for key in ("tokens_per_s", "sentences_per_s", "tokens_per_update")
    }
    run.update(peak_rss_mib=rss, windows=len(windows), seconds=round(seconds, 1))
    run.update(compile_stats(text), thread_changes=len(THREADS_CHANGED.findall(text)))
    runs[name].append(run)
    print(
        f"  {name:<28} {run['tokens_per_s']:9.1f} tok/s {run['sentences_per_s']:8.2f} sent/s "
        f"{rss:7.0f} MiB  ({len(windows)} windows, {seconds:.0f} s)",
        flush=True,
    )


def measure_generation(name, cmd, work, runs, env=None):
    log = work / "logs" / f"{name}.{len(runs.setdefault(name, []))}.log"
    text, rss, seconds = run_child(cmd, log, env=env)
    m = GENERATED.search(text)
    if not m:
        raise BenchError(f"{name}: no 'Translated ... sentences/s' line in {log}")
    n, tokens, secs = int(m.group(1).replace(",", "")), int(m.group(2).replace(",", "")), float(m.group(3))
    if tokens != n * (GEN_LEN + 1):
        raise BenchError(f"{name}: {tokens} tokens for {n} sentences; the forced length {GEN_LEN} did not hold")
    runs[name].append({"sentences_per_s": n / secs, "sentences": n, "peak_rss_mib": rss})
    print(f"  {name:<28} {n / secs:9.2f} sent/s  ({n} sentences, {secs:.1f} s)", flush=True)
