"""Data-parallel fairseq training on CPU: N local processes over gloo, one per rank::

    xlm-fairseq-distributed-cpu --nproc 2 fairseq-train DATA --user-dir xlm_fairseq --cpu ...

On several machines, the same command on each, with ``--nnodes N --node-rank R --master HOST:PORT``
(HOST: node 0's address, seen from every node; the rendezvous of fairseq's and torchrun's
``tcp://`` init method): node R runs ranks R*NPROC .. R*NPROC+NPROC-1 of NNODES*NPROC.

fairseq starts one process per GPU (``--distributed-world-size N`` on a machine without GPUs stops
at an assertion, and torchrun at a division by the GPU count). This starts the N processes itself,
each with fairseq's own options for an explicitly launched rank (``--distributed-rank R
--distributed-no-spawn --distributed-init-method tcp://127.0.0.1:PORT``), ``--distributed-backend
gloo`` and ``--ddp-backend legacy_ddp`` (PyTorch's DDP wrapper as fairseq builds it wants a GPU).
Rank 0 logs as usual; the others print warnings and errors only. If one rank fails, the others are
stopped and its exit status is returned. The total batch is N times the per-process batch, as on
N GPUs: ``--update-freq N`` on one process sees the same batches.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import time

from preprocess.errors import ArgumentParser, UserError, run_command

# options this launcher sets for every rank; giving any of them is an error, not a silent override
SET_HERE = (
    "--distributed-world-size",
    "--distributed-rank",
    "--distributed-no-spawn",
    "--distributed-init-method",
    "--distributed-port",
    "--distributed-backend",
    "--ddp-backend",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_commands(command, nproc: int, port: int, nnodes: int = 1, node_rank: int = 0, host: str = "127.0.0.1"):
    """The fairseq command of each rank this node runs."""
    for option in SET_HERE:
        if any(arg == option or arg.startswith(option + "=") for arg in command):
            raise UserError(f"{option} is set by this launcher; leave it out of the fairseq command")
    if "--cpu" not in command:
        command = [*command, "--cpu"]
    shared = ["--distributed-world-size", str(nproc * nnodes), "--distributed-no-spawn"]
    shared += ["--distributed-init-method", f"tcp://{host}:{port}", "--distributed-backend", "gloo"]
    shared += ["--ddp-backend", "legacy_ddp"]
    first = node_rank * nproc
    return [[*command, *shared, "--distributed-rank", str(rank)] for rank in range(first, first + nproc)]


def parse_master(value: str):
    """``HOST:PORT`` -> (host, port); a bad one is a UserError naming ``--master``."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"--master {value}: expected HOST:PORT, node 0's address and a free port on it")
    return host.strip("[]"), int(port)


STOP_GRACE_S = 10  # after a rank fails, what the others get to stop by themselves: the tasks tell
# every rank of a failure at their next agreement, so each prints why it stops


def run_ranks(commands) -> int:
    """Start every rank; the first non-zero exit is returned, and stops the others that have not
    exited within STOP_GRACE_S seconds."""
    procs = [subprocess.Popen(cmd) for cmd in commands]

    def stop(signum=signal.SIGTERM, frame=None):
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            codes = [p.poll() for p in procs]
            failed = [c for c in codes if c not in (None, 0)]
            if failed:
                deadline = time.monotonic() + STOP_GRACE_S
                while time.monotonic() < deadline and any(p.poll() is None for p in procs):
                    time.sleep(0.2)
                stop()
                for p in procs:
                    p.wait()
                return failed[0] if failed[0] > 0 else 128 - failed[0]
            if all(c == 0 for c in codes):
                return 0
            time.sleep(0.2)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv=None) -> int:
    p = ArgumentParser(
        name="distributed_cpu",
        prog="xlm-fairseq-distributed-cpu",
        description=__doc__.split("\n\n")[0],
        examples=["xlm-fairseq-distributed-cpu --nproc 2 fairseq-train DATA --user-dir xlm_fairseq --cpu ..."],
    )
    p.add_argument("--nproc", type=int, required=True, help="processes (ranks) to start")
    p.add_argument("--port", type=int, help="rendezvous port on 127.0.0.1 (default: a free one)")
    p.add_argument("--nnodes", type=int, default=1, help="machines taking part, each running this command")
    p.add_argument("--node-rank", type=int, default=0, help="this machine's place among them, 0 to NNODES-1")
    p.add_argument("--master", metavar="HOST:PORT", help="node 0's address and port (required with --nnodes > 1)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the fairseq-train command line, as for one process")

    def run(argv):
        args = p.parse_args(argv)
        if args.nproc < 1:
            raise UserError(f"--nproc must be at least 1, got {args.nproc}")
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not command:
            raise UserError("give the fairseq-train command after the launcher's options")
        if args.nnodes < 1 or not 0 <= args.node_rank < args.nnodes:
            raise UserError(f"--node-rank {args.node_rank}: expected 0 to --nnodes - 1 ({args.nnodes - 1})")
        if args.master:
            if args.port:
                raise UserError("--port and --master: give the port in --master HOST:PORT")
            host, port = parse_master(args.master)
        elif args.nnodes > 1:
            raise UserError("--nnodes > 1 needs --master HOST:PORT (node 0's address)")
        else:
            host, port = "127.0.0.1", args.port or free_port()
        commands = rank_commands(command, args.nproc, port, args.nnodes, args.node_rank, host)
        os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // args.nproc)))
        return run_ranks(commands)

    return run_command("distributed_cpu", run, argv)


if __name__ == "__main__":
    sys.exit(main())
