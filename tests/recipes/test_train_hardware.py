"""recipes/train.sh past one CPU: the hardware options are checked together, plans scale with the hardware
and the budget (also for hardware that is not here), and a run spread over two processes, or over two
"machines" on the loopback address sharing one work directory, trains, survives kill -9 of a rank and
resumes. That two processes make the updates of one with --update-freq 2 is tested where they start,
tests/distributed/test_cpu_launcher.py."""

import dataclasses
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import ROOT, SAMPLE, SHARED, in_process, unbuffered_env

from recipes.train.cli import main as train_main
from recipes.train.hardware import Hardware
from recipes.train.plan import SIZES, make_plan, split_budget

ENRO = SAMPLE / "en-ro"
WORDS = {"en": 450_000, "de": 450_000}  # the quickstart's text


def _env():
    """The environment of a train.sh run: this interpreter's tools first on PATH, as the README installs them."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return dict(unbuffered_env(), PATH=path, PYTHON=sys.executable)


def _train(*args, timeout=900):
    cmd = ["bash", ROOT / "recipes" / "train.sh", *args]
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=timeout)


def test_on_two_cpu_cores_for_half_an_hour_the_plan_is_as_before():
    """The sweep's choice for the quickstart's half hour, whatever the new sizes; CPU batches as before."""
    for processes in (1, 2):  # processes on one machine share its cores: no faster, the same size
        hardware = Hardware("cpu", processes)
        plan = make_plan(["de", "en"], [("en", "de")], "semi", False, 30, "fp32", WORDS, 200, hardware=hardware)
        assert (plan.size.dim, plan.size.layers, plan.heads, plan.size.dropout) == (128, 3, 4, 0.0)
        assert (plan.batches.stream, plan.batches.pretrain_tokens, plan.translate_precision) == (64, 2048, "fp32")


def test_a_longer_budget_goes_to_training():
    """Past the half hour the shares were tuned at, preprocessing, scoring and export keep its 4.2 minutes
    (2.4 without pairs) and the training stages get the rest, in the tuned proportion."""
    for supervision, rest in (("semi", 4.2), ("unsupervised", 2.4)):
        for minutes in (60, 120, 1440):
            plan = make_plan(["de", "en"], [("en", "de")], supervision, False, minutes, "fp32", WORDS, 200)
            pretrain, translate = plan.pretrain_hours * 60, plan.translate_hours * 60
            assert pretrain + translate == pytest.approx(minutes - rest, abs=0.02)
            tuned = split_budget(30, supervision)
            assert pretrain / translate == pytest.approx(tuned[0] / tuned[1], rel=1e-3)


def test_eight_gpus_for_a_day_plan_xlm_sizes_with_xlm_batches():
    """24 hours on 8 GPUs picks one of XLM's sizes for the en-ro files' ~2.6 M words; one GPU for half an hour
    a smaller one; the text bounds the size (1024 x 6 would have ~20 parameters a token)."""
    words = {"en": 1_260_000, "ro": 1_370_000}

    def plan(minutes, gpus, nodes=1):
        hardware = Hardware("cuda", gpus, nodes, 0, "node0:29500" if nodes > 1 else None)
        return make_plan(["en", "ro"], [("en", "ro")], "semi", False, minutes, "bf16", words, 200, hardware=hardware)

    day = plan(24 * 60, 8)
    assert (day.size.dim, day.size.layers, day.heads) == (512, 6, 8) and day.size.dropout == 0.1
    assert (day.batches.stream, day.batches.pretrain_tokens, day.translate_precision) == (256, 8192, "bf16")
    assert "speed estimated" in day.size_why
    assert dataclasses.replace(day, supervision="unsupervised").translate_lr == day.size.lr == 1e-4  # XLM's rate
    assert plan(24 * 60, 8, nodes=4).size == day.size  # more GPUs, the same text: no larger
    assert plan(30, 1).size.dim < 512
    assert SIZES[-1].dim == 1024  # XLM's en-de and en-ro LMs, there for more text


def test_plan_for_gpus_that_are_not_here(tmp_path):
    """``--plan --device cuda --processes 8 --hours 24`` on the en-ro files of the shared corpus: at least
    512 x 6, XLM's 256-token streams, writing nothing."""
    s = SHARED / "en-ro"
    work = tmp_path / "work"
    pairs = ["--pairs", f"en-ro={s}/docs", "--pairs", f"en-ro={s}/gettext"]
    proc = _train(*pairs, "--plan", "--device", "cuda", "--processes", "8", "--hours", "24", "--work-dir", work)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "hardware:    cuda, 8 GPUs" in proc.stdout
    model = next(line for line in proc.stdout.splitlines() if "model:" in line)
    dims, layers = [int(x) for x in model.split("model:")[1].split(",")[0].replace("dims x", "").split()[:2]]
    assert dims >= 512 and layers >= 6, model
    assert "budget:      1440 min" in proc.stdout and not work.exists()


def test_training_commands_start_through_fairseqs_own_distributed_training():
    """What launch() makes of one process's fairseq-train command: on GPUs fairseq's own start of a process per
    GPU (and the tcp:// rendezvous with a first rank per machine), on CPUs the gloo launcher; one process
    as it is."""
    from recipes.train.hardware import launch

    cmd = ["fairseq-train", "DATA"]
    assert launch(cmd, Hardware("cpu"), {}) == (["fairseq-train", "DATA", "--cpu"], {})
    assert launch(cmd, Hardware("cuda"), {}) == (cmd, {})
    eight, env = launch(cmd, Hardware("cuda", 8), {})
    assert eight == [*cmd, "--distributed-world-size", "8"] and env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    node1, env = launch(cmd, Hardware("cuda", 8, 2, 1, "node0:29500"), {"CUDA_VISIBLE_DEVICES": "3,4"})
    rendezvous = ["--distributed-init-method", "tcp://node0:29500", "--distributed-rank", "8"]
    assert node1 == [*cmd, "--distributed-world-size", "16", *rendezvous]
    assert env == {"CUDA_VISIBLE_DEVICES": "3,4"}  # the user's choice of GPUs stays
    gloo, _ = launch(cmd, Hardware("cpu", 2, 2, 1, "node0:29500"), {})
    assert gloo[-3:] == ["fairseq-train", "DATA", "--cpu"]
    nodes = ["--nproc", "2", "--nnodes", "2", "--node-rank", "1", "--master", "node0:29500"]
    assert gloo[gloo.index("--nproc") :][: len(nodes)] == nodes


@pytest.mark.parametrize(
    "args, message",
    [
        (["--device", "cuda", "--processes", "99"], None),
        (["--nodes", "2"], "--nodes > 1 needs --master HOST:PORT (node 0's address, seen from every node)"),
        (["--nodes", "2", "--node-rank", "2", "--master", "h:1"], "--node-rank 2: expected 0 to --nodes - 1 (1)"),
        (
            ["--nodes", "2", "--master", "nohost"],
            "--master nohost: expected HOST:PORT, node 0's address and a free port on it",
        ),
        (["--master", "h:1"], "--master and --node-rank go with --nodes N (N > 1)"),
        (["--processes", "0"], "--processes 0: at least 1"),
        (
            ["--nodes", "2", "--node-rank", "1", "--master", "h:1", "--fresh"],
            "--fresh: on node 0 only (the other nodes share its work directory)",
        ),
        (["--precision", "fp16", "--device", "cpu"], "--precision fp16: GPUs only (on CPUs: bf16 or fp32)"),
        (["--minutes", "30", "--hours", "1"], "--minutes and --hours: give one budget"),
        (["--size", "512"], "--size 512: expected DIMSxLAYERS, for example 512x6"),
        (["--size", "98x2"], "--size 98x2: 98 dims do not split into 4 heads"),
    ],
)
def test_bad_hardware_options_are_one_line(args, message, tmp_path, capsys):
    """Each refused in this process by train.sh's engine (test_train_recipe.py runs a bad input through
    train.sh itself)."""
    if message is None:  # --device cuda where torch sees no GPU, or more processes than GPUs
        from recipes.train.hardware import visible_gpus

        gpus = visible_gpus()
        no_gpu = "--device cuda: torch sees no GPU here (--plan prints what the run would train)"
        message = f"--processes 99: torch sees {gpus} GPU(s) here, one a process" if gpus else no_gpu
    work = tmp_path / "work"
    status, err = in_process(train_main, ["--pairs", f"en-ro={ENRO}/train.en-ro", *args, "--work-dir", work], capsys)
    assert status == 2 and err.strip().splitlines() == [f"train: error: {message}"], err
    assert not work.exists()


# ------------------------------------------------------------------------------------------------
# runs on several processes and "machines": CI's tiny form
# ------------------------------------------------------------------------------------------------


def _rank_pid(work, rank: int):
    """The pid of the fairseq process of ``rank`` training in ``work``, or None."""
    wanted = f"--distributed-rank\x00{rank}\x00"
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline") as f:
                    cmdline = f.read()
            except OSError:
                continue
            if wanted in cmdline and str(work) in cmdline and "fairseq-train" in cmdline:
                return int(entry)
    return None


def _kill_rank_after_first_checkpoint(work, rank: int, procs, timeout=600):
    """kill -9 the process of ``rank`` once pretraining has saved a checkpoint; then every run fails."""
    checkpoint = work / "checkpoints" / "pretrain" / "checkpoint_last.pt"
    deadline = time.time() + timeout
    while not checkpoint.exists():
        assert time.time() < deadline and all(p.poll() is None for p in procs), "no checkpoint before the end"
        time.sleep(0.1)
    pid = _rank_pid(work, rank)
    assert pid, f"no process of rank {rank}"
    os.kill(pid, signal.SIGKILL)
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode not in (0, None), out[-2000:] + err[-2000:]
        assert "train: error: 'xlm-fairseq-distributed-cpu' failed; last lines of" in err, err[-2000:]


def _resumed_and_finished(work):
    assert "distributed_world_size': 2" in (work / "logs" / "pretrain.log").read_text()
    out = (work / "logs" / "pretrain.out").read_text()  # the resumed run's fairseq output
    loaded = re.search(r"Loaded checkpoint \S+/checkpoint_last.pt \(epoch \d+ @ (\d+) updates\)", out)
    assert loaded and int(loaded[1]) > 0, out[-3000:]
    assert "num_updates 80 |" in out  # every update of the tiny plan
    assert (work / "model").is_dir() and (work / "report.md").is_file()


class _Run:
    """train.sh started in the background, its output in files (a pipe left unread could block it)."""

    def __init__(self, *args):
        self.out, self.err = (tempfile.TemporaryFile("w+") for _ in range(2))
        cmd = [str(c) for c in ["bash", ROOT / "recipes" / "train.sh", *args]]
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=self.err, text=True, cwd=ROOT, env=_env())

    def poll(self):
        return self.proc.poll()

    def communicate(self, timeout):
        self.proc.wait(timeout=timeout)
        self.returncode = self.proc.returncode
        return [(f.seek(0), f.read())[1] for f in (self.out, self.err)]


@pytest.mark.slow  # two tiny runs, a minute each
def test_two_processes_train_survive_kill_9_of_a_rank_and_resume(tmp_path):
    """--processes 2 on CPU (gloo): rank 1 killed once pretraining saved a checkpoint stops the run with one
    error line; the same command again resumes from that checkpoint, finishes, scores and exports."""
    work = tmp_path / "work"
    args = ["--pairs", f"en-ro={ENRO}/train.en-ro", "--tiny", "--device", "cpu", "--processes", "2", "--work-dir", work]
    run = _Run(*args)
    _kill_rank_after_first_checkpoint(work, 1, [run])
    proc = _train(*args)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "hardware:    cpu, 2 processes over gloo" in proc.stdout
    _resumed_and_finished(work)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # two tiny runs of two "machines", a minute each
def test_two_machines_on_the_loopback_address_train_survive_kill_9_and_resume(tmp_path):
    """Two "machines" (--nodes 2, one process each) on 127.0.0.1 sharing one work directory: node 1 waits for
    node 0's preprocessing, joins pretraining and translation, and leaves scoring and export to node 0.
    kill -9 of node 1's process stops both; both commands again resume and finish."""
    work = tmp_path / "work"
    args = ["--pairs", f"en-ro={ENRO}/train.en-ro", "--tiny", "--device", "cpu", "--nodes", "2", "--work-dir", work]
    args += ["--master", f"127.0.0.1:{_free_port()}"]
    nodes = [_Run(*args, "--node-rank", str(rank)) for rank in (1, 0)]
    _kill_rank_after_first_checkpoint(work, 1, nodes)
    nodes = [_Run(*args, "--node-rank", str(rank)) for rank in (1, 0)]
    outs = [p.communicate(timeout=900) for p in nodes]
    for p, (out, err) in zip(nodes, outs):
        assert p.returncode == 0, out[-2000:] + err[-2000:]
    follower = outs[0][0]
    assert "node 1: joining pretrain" in follower and "node 1: joining translate" in follower
    assert "node 1: done; node 0 scores and exports" in follower
    assert (work / "logs" / "node1" / "translate.out").is_file()
    _resumed_and_finished(work)
