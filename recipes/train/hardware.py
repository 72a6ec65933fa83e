"""Where a ``recipes/train.sh`` run trains (``--device``, ``--processes``, ``--nodes``) and how its
fairseq-train commands start there, through fairseq's own data-parallel training:

* one process: the command as it is (``--cpu`` on CPUs);
* GPUs: fairseq starts a process per GPU itself (``--distributed-world-size``); with several machines
  each starts its own with ``--distributed-init-method tcp://MASTER --distributed-rank NODE*GPUS``;
* CPU processes: ``xlm-fairseq-distributed-cpu`` (:mod:`xlm_fairseq.distributed.cpu_launcher`) starts
  them over gloo, with ``--nnodes/--node-rank/--master`` on several machines.

Every process reads a batch of the plan's size, so N processes make updates of N batches, as one process
with ``--update-freq N`` does. With several machines every one runs the same command on one work
directory that all of them share (a cluster's network filesystem): node 0 runs every stage, the others
join its training stages (:meth:`recipes.train.training_run.TrainingRun.follow`)."""

import dataclasses
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from preprocess.errors import UserError


@dataclasses.dataclass(frozen=True)
class Hardware:
    device: str = "cpu"  # cpu | cuda
    processes: int = 1  # per node
    nodes: int = 1
    node_rank: int = 0
    master: Optional[str] = None  # HOST:PORT of node 0 with several nodes

    @property
    def world(self) -> int:
        return self.processes * self.nodes

    @property
    def speedup(self) -> int:
        """How many times one process's (GPU) or one machine's (CPU) speed the whole run has."""
        return self.world if self.device == "cuda" else self.nodes

    def describe(self) -> str:
        if self.device == "cuda":
            each = f"{self.processes} GPU{'s' if self.processes > 1 else ''}"
        else:
            each = f"{self.processes} process{'es over gloo' if self.processes > 1 else ''}"
        nodes = f" on each of {self.nodes} machines, node 0 at {self.master}" if self.nodes > 1 else ""
        return f"{self.device}, {each}{nodes}"


def visible_gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def choose_hardware(args) -> Hardware:
    """The options' hardware, checked: ``--device cuda`` needs its GPUs here unless only planned (``--plan``)."""
    gpus = visible_gpus() if args.device != "cpu" else 0
    device = ("cuda" if gpus else "cpu") if args.device == "auto" else args.device
    if device == "cuda" and not gpus and not args.plan:
        raise UserError("--device cuda: torch sees no GPU here (--plan prints what the run would train)")
    processes = args.processes if args.processes is not None else max(gpus, 1) if device == "cuda" else 1
    if processes < 1:
        raise UserError(f"--processes {processes}: at least 1")
    if device == "cuda" and gpus and processes > gpus and not args.plan:
        raise UserError(f"--processes {processes}: torch sees {gpus} GPU(s) here, one a process")
    if args.nodes < 1 or not 0 <= args.node_rank < args.nodes:
        raise UserError(f"--node-rank {args.node_rank}: expected 0 to --nodes - 1 ({args.nodes - 1})")
    if args.nodes > 1:
        if not args.master:
            raise UserError("--nodes > 1 needs --master HOST:PORT (node 0's address, seen from every node)")
        from xlm_fairseq.distributed.cpu_launcher import parse_master

        parse_master(args.master)
    elif args.master or args.node_rank:
        raise UserError("--master and --node-rank go with --nodes N (N > 1)")
    return Hardware(device, processes, args.nodes, args.node_rank, args.master if args.nodes > 1 else None)


def choose_precision(value: str, device: str) -> str:
    """auto: on CPUs bf16 where the CPU multiplies it in hardware, else fp32; on GPUs bf16 where the GPU has
    it (Ampere and later, or when planning for absent GPUs), else fp16 with fairseq's loss scaler."""
    if device == "cpu":
        if value == "fp16":
            raise UserError("--precision fp16: GPUs only (on CPUs: bf16 or fp32)")
        if value != "auto":
            return value
        from xlm_fairseq.hardware import cpu_multiplies_bf16

        return "bf16" if cpu_multiplies_bf16() else "fp32"
    if value != "auto":
        return value
    import torch

    return "fp16" if torch.cuda.is_available() and not torch.cuda.is_bf16_supported() else "bf16"


def launch(cmd: List, hardware: Hardware, env: Dict[str, str]) -> Tuple[List, Dict[str, str]]:
    """``cmd`` (a fairseq-train command for one process, without ``--cpu``) as it starts on ``hardware``:
    (command, environment)."""
    cmd = [str(c) for c in cmd]
    h = hardware
    if h.device == "cpu":
        cmd = [*cmd, "--cpu"]
        if h.world == 1:
            return cmd, env
        script = Path(sys.executable).with_name("xlm-fairseq-distributed-cpu")  # its name in error lines
        launcher = [str(script)] if script.exists() else [sys.executable, "-m", "xlm_fairseq.distributed.cpu_launcher"]
        launcher += ["--nproc", str(h.processes)]
        if h.nodes > 1:
            launcher += ["--nnodes", str(h.nodes), "--node-rank", str(h.node_rank), "--master", h.master]
        return [*launcher, *cmd], env
    if h.world == 1:
        return cmd, env
    cmd += ["--distributed-world-size", str(h.world)]
    if h.nodes > 1:
        cmd += ["--distributed-init-method", f"tcp://{h.master}", "--distributed-rank", str(h.node_rank * h.processes)]
    if "CUDA_VISIBLE_DEVICES" not in env:  # fairseq starts a process for every GPU it sees
        env = dict(env, CUDA_VISIBLE_DEVICES=",".join(str(i) for i in range(h.processes)))
    return cmd, env
