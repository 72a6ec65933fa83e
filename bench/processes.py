"""Data-parallel CPU processes against one process, in one run: ``recipes/train.sh``'s pretraining at the
recipes' size (128 x 3, 64-token streams, 2,048-token batches a process, MLM+TLM) on the shipped en-de sample,
one fairseq-train process (the peer) and N processes over gloo (``xlm-fairseq-distributed-cpu``, what
``train.sh --processes N`` starts). Each update of N processes reads N batches, so the figure is input
tokens a second (fairseq's ``wps``, summed over the processes), the median of the logged windows.

    python bench/processes.py [--processes 2] [--precision fp32] [--out bench/results/cpu-processes.json]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

from children import tool
from measure import measure_training
from report import finish, versions
from workload import PRECISION_FLAGS, ROOT, TRAIN_COMMON, prepare_data

SIZE = ["--arch", "xlm_tiny", "--encoder-embed-dim", "128", "--encoder-layers", "3", "--encoder-attention-heads", "4"]
WINDOW = 25  # updates a logged window


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--processes", type=int, default=2, help="the data-parallel processes measured (default 2)")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--windows", type=int, default=6, help="logged windows a run (the first, warm-up, dropped)")
    p.add_argument("--repeats", type=int, default=1, help="runs of each, alternating")
    p.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "bench-processes")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "cpu-processes.json")
    args = p.parse_args(argv)
    started = time.time()
    work = args.work_dir
    (work / "logs").mkdir(parents=True, exist_ok=True)
    data = prepare_data(work, 4000)["ours"]
    cmd = [tool("fairseq-train"), str(data), "--user-dir", str(ROOT / "xlm_fairseq"), "--cpu", *TRAIN_COMMON]
    cmd += ["--task", "cross_lingual_lm", "--langs", "de,en", "--mlm-steps", "de,en,en-de", "--step-per-objective"]
    cmd += [*SIZE, "--tokens-per-sample", "64", "--max-tokens", "2048", "--dropout", "0", "--attention-dropout", "0"]
    cmd += [*PRECISION_FLAGS[args.precision], "--log-interval", str(WINDOW)]
    cmd += ["--max-update", str(WINDOW * args.windows)]
    launcher = [tool("xlm-fairseq-distributed-cpu"), "--nproc", str(args.processes)]
    runs = {}
    for _ in range(args.repeats):
        measure_training("one process", [*cmd, "--save-dir", str(work / "one")], work, runs)
        name = f"{args.processes} processes"
        measure_training(name, [*launcher, *cmd, "--save-dir", str(work / "several")], work, runs)
    figures = {name: statistics.median(r["tokens_per_s"] for r in rs) for name, rs in runs.items()}
    one, several = figures["one process"], figures[f"{args.processes} processes"]
    result = {
        "versions": versions(),
        "processes": args.processes,
        "precision": args.precision,
        "size": "the recipes': 128 dims x 3 layers, 64-token streams, 2,048 tokens a batch a process, MLM+TLM",
        "runs": runs,
        "tokens_per_s": figures,
        "ratio_to_one_process": round(several / one, 3),
    }
    line = f"| {args.processes} processes over gloo | {several:,.0f} | one process {one:,.0f} | {several / one:.2f} |"
    finish(args.out, result, started, {"recipes": line})


if __name__ == "__main__":
    sys.exit(main())
