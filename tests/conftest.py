"""Shared fixtures: a real three-language data-bin made by preprocess/ from the shipped sample, a
tiny model pretrained on it with fairseq-train, and a tiny UNMT model trained from that. Session-scoped:
built once per test run."""

import json
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "recipes" / "data"
BIN = Path(sys.executable).parent  # fairseq-* console scripts of this environment
# where the fixtures' and the CLI tests' fairseq commands run: cpu (CI), or cuda on a GPU machine
# (XLM_FAIRSEQ_TEST_DEVICE=cuda: the same commands without --cpu)
DEVICE = os.environ.get("XLM_FAIRSEQ_TEST_DEVICE", "cpu")
if DEVICE not in ("cpu", "cuda"):
    raise pytest.UsageError(f"XLM_FAIRSEQ_TEST_DEVICE={DEVICE!r}: cpu or cuda")
ON_DEVICE = ["--cpu"] if DEVICE == "cpu" else []
# threads per process the tests start: the machine's 2 cores, or 1 under pytest-xdist's workers (the
# suite runs with -n auto: two workers each running 1-thread processes keep both cores busy through the
# many single-threaded stretches, imports and start-ups, where 2-thread processes one at a time idle one).
# Set in this process's environment, so that every process a test starts inherits it, whatever
# environment the test builds: a 2-thread fairseq-train beside the other worker spins at OpenMP's
# barriers (the tiny quickstart: 293 s against 72 s on 1 thread, with one busy core beside it).
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
THREADS = "1" if WORKERS > 1 else "2"
os.environ["OMP_NUM_THREADS"] = THREADS
if WORKERS > 1:
    import torch

    torch.set_num_threads(1)  # this worker's own (in-process) computation too
# the recipes' shared optimiser flags (recipes/train/optim.flags), through their one reader, loaded by its path
OPTIM = runpy.run_path(str(ROOT / "recipes" / "train" / "optim.py"))
optim_flags, read_optim_flags = OPTIM["optim_flags"], OPTIM["read_flags"]


def run(cmd, ok=True, **kw):
    """Run a command (list); return CompletedProcess; on unexpected status show its output.
    ``env_extra``: environment variables to add."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), **kw.pop("env_extra", {}))
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=kw.pop("cwd", ROOT), env=env, **kw)
    if ok and proc.returncode != 0:
        raise AssertionError(f"{cmd[0]} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return proc


def blocking(*packages):
    """The lines that start a script run where ``packages`` cannot be imported (what a user without them
    has): an import finder first on ``sys.meta_path`` that refuses them. The script sees ``BLOCKED``."""
    return f"""import sys

BLOCKED = {packages!r}


class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"{{name}} is blocked in this test")


sys.meta_path.insert(0, Blocked())
"""


# fields of a train_inner record that depend on the machine, not on the run
TIMING = {"wps", "ups", "wall", "train_wall", "gb_free"}


def train_records(text):
    """{update: train_inner record without timings}. An objective not trained in the update still
    has its (empty) meters when an earlier update of the same process trained it (``null`` loss,
    derived ``_ppl``): those say nothing about the run and are left out."""
    records = {}
    for r in json_logs(text, "train_inner"):
        empty = {k[: -len("_loss")] for k, v in r.items() if k.endswith("_loss") and v is None}
        records[int(r["num_updates"])] = {
            k: v for k, v in r.items() if k not in TIMING and v is not None and k.rsplit("_", 1)[0] not in empty
        }
    return records


def unbuffered_env():
    """The environment of a training process a test reads line by line as it runs."""
    return dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")


def in_process(main, args, capsys):
    """A command's ``main(argv)`` run in this process (no interpreter to start, no torch to import):
    its exit status and what it wrote to stderr."""
    capsys.readouterr()
    try:
        status = main([str(a) for a in args])
    except SystemExit as e:
        status = e.code
    return status, capsys.readouterr().err


def refusals(argvs, command, main, capsys):
    """(exit status, stderr) of each of a command's argument lists, for tests of its refusals: the first
    through ``command(argv)`` (the command line itself, a CompletedProcess), the others through its
    ``main`` in this process (``in_process``), one after another as the caller asks for them."""
    for i, argv in enumerate(argvs):
        if i == 0:
            proc = command(argv)
            yield proc.returncode, proc.stderr
        else:
            yield in_process(main, argv, capsys)


def fairseq(cmd, *args, ok=True):
    return run([BIN / f"fairseq-{cmd}", *args], ok=ok)


def json_logs(text, tag):
    """Records of fairseq's --log-format json output lines tagged e.g. 'valid', 'train_inner'."""
    out = []
    for line in text.splitlines():
        if f"| {tag} |" in line and "{" in line:
            out.append(json.loads(line[line.index("{") :]))
    return out


def generate_lines(data_bin, ckpt, src, tgt, *extra):
    """fairseq-generate on the test split (translation_lm, src -> tgt): ({"S"|"T"|"H"|"D": {id: text}},
    its output)."""
    proc = fairseq(
        "generate",
        data_bin,
        "--user-dir",
        ROOT / "xlm_fairseq",
        "--task",
        "translation_lm",
        "-s",
        src,
        "-t",
        tgt,
        "--gen-subset",
        "test",
        "--path",
        ckpt,
        *ON_DEVICE,
        *extra,
    )
    lines = {kind: {} for kind in "STHD"}
    for line in proc.stdout.splitlines():
        if line[:2] in ("S-", "T-", "H-", "D-"):
            fields = line.split("\t")
            lines[line[0]][int(fields[0][2:])] = fields[-1]
    return lines, proc.stdout


def setup_task(data, task_name, *args, arch="xlm_tiny"):
    """(fairseq task, config) of `fairseq-train DATA --task TASK_NAME ARGS...`, set up in this process."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    import xlm_fairseq  # noqa: F401

    argv = [str(data), "--user-dir", str(ROOT / "xlm_fairseq"), "--task", task_name, "--arch", arch, *map(str, args)]
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), argv))
    return tasks.setup_task(cfg.task), cfg


SHARED = ROOT.parent / "shared" / "data"  # the project's real corpora, beside the checkout


def run_recipe(script, *args):
    """``bash recipes/SCRIPT ARGS`` with this environment's tools first on PATH."""
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}", PYTHON=str(BIN / "python"))
    return subprocess.run(
        ["bash", ROOT / "recipes" / script, *map(str, args)], capture_output=True, text=True, env=env, cwd=ROOT
    )


def head(src, dst, n):
    with open(src, encoding="utf-8") as f, open(dst, "w", encoding="utf-8") as g:
        for i, line in enumerate(f):
            if i >= n:
                break
            g.write(line)
    return dst


def built_once(tmp_path_factory, name, build):
    """``tmp/NAME``, made by ``build(directory)`` once per test run: under pytest-xdist the first worker
    that needs it builds it while any other that needs it waits, and every worker reads the one copy
    (the session fixtures are read, never written to, by the tests)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's directory, above each worker's own
    out, built = root / name, root / f"{name}.built"
    with FileLock(str(root / f"{name}.lock")):
        if not built.exists():
            shutil.rmtree(out, ignore_errors=True)  # what a worker's failed build left
            out.mkdir()
            build(out)
            built.touch()
    return out


@pytest.fixture(scope="session")
def data_bin(tmp_path_factory):
    """en, de, ro: monolingual train for each, parallel en-de / en-ro train, valid and test."""

    def build(out):
        raw = out / "raw"
        raw.mkdir()
        de, ro = SAMPLE / "en-de", SAMPLE / "en-ro"
        for lang in ("en", "de"):
            head(de / f"mono.{lang}", raw / f"mono.{lang}", 3000)
        head(ro / "mono.ro", raw / "mono.ro", 2000)
        for pair, d, n in (("en-de", de, 2000), ("en-ro", ro, 1500)):
            for lang in pair.split("-"):
                head(d / f"train.{pair}.{lang}", raw / f"train.{pair}.{lang}", n)
                head(d / f"valid.{pair}.{lang}", raw / f"valid.{pair}.{lang}", 100)
                head(d / f"test.{pair}.{lang}", raw / f"test.{pair}.{lang}", 60)
        args = ["--langs", "en,de,ro", "--vocab-size", "2000", "--workers", "2", "--quiet"]
        for lang in ("en", "de", "ro"):
            args += ["--mono", f"train:{lang}={raw}/mono.{lang}"]
        for pair in ("en-de", "en-ro"):
            for split in ("train", "valid", "test"):
                args += ["--para", f"{split}:{pair}={raw}/{split}.{pair}"]
        # monolingual valid sets for MLM validation: the valid parallel halves
        for pair, lang in (("en-de", "en"), ("en-de", "de"), ("en-ro", "ro")):
            args += ["--mono", f"valid:{lang}={raw}/valid.{pair}.{lang}"]
        run([sys.executable, "-m", "preprocess.prepare", out / "data-bin", *args])

    return built_once(tmp_path_factory, "data_bin", build) / "data-bin"


# a tiny, deterministic run of fairseq-train: what both fixtures' trainings share
# (the recipes' optimiser, with fairseq's defaults; PRETRAIN_ARGS takes all of the recipes' flags)
TRAIN_ARGS = ["--user-dir", ROOT / "xlm_fairseq", "--arch", "xlm_tiny", *ON_DEVICE]
TRAIN_ARGS += ["--optimizer", read_optim_flags()["--optimizer"]]
TRAIN_ARGS += ["--num-workers", "0", "--seed", "1", "--log-format", "json", "--no-epoch-checkpoints"]
# pretraining as the recipes run it: their shared optimiser (Adam, inverse-sqrt decay, clip 5), a short warm-up
PRETRAIN_ARGS = [*TRAIN_ARGS, "--task", "cross_lingual_lm", *optim_flags(lr=0.001, warmup_updates=20)]
PRETRAIN_ARGS += ["--max-tokens", "1024", "--tokens-per-sample", "64", "--disable-validation"]


@pytest.fixture(scope="session")
def pretrained(data_bin, tmp_path_factory):
    """A tiny MLM+TLM model over en,de,ro (a short real fairseq-train run)."""

    def build(save):
        steps = ["--langs", "en,de,ro", "--mlm-steps", "en,de,ro,en-de,en-ro", "--max-update", "60"]
        fairseq("train", data_bin, *PRETRAIN_ARGS, *steps, "--save-dir", save)

    return built_once(tmp_path_factory, "pretrained", build) / "checkpoint_last.pt"


UNMT_ARGS = [*TRAIN_ARGS, "--task", "translation_lm", "--lr", "0.0005", "--max-tokens", "1500"]
UNMT_ARGS += ["--max-sentence-len", "128"]
# MT both ways on the 100 de-en valid pairs as training data: epochs of a few updates, for tests of validation
MT_ON_VALID_PAIRS = [*UNMT_ARGS, "--langs", "de,en", "--mt-steps", "de-en,en-de", "--train-subset", "valid"]
MT_ON_VALID_PAIRS += ["--log-interval", "1"]
# AE + BT over three languages; the resume test repeats the fixture's run with exactly these
UNMT_STEPS = ["--langs", "en,de,ro", "--ae-steps", "en,de,ro", "--bt-steps", "en-de-en,de-en-de,en-ro-en,ro-en-ro"]
UNMT_STEPS += ["--lambda-ae", "0:1,40:0.25"]


@pytest.fixture(scope="session")
def unmt(pretrained, data_bin, tmp_path_factory):
    """AE + BT on monolingual data only (en, de, ro), initialised from the pretrained LM: (its save
    directory, what fairseq-train printed)."""

    def build(out):
        proc = fairseq(
            "train",
            data_bin,
            *UNMT_ARGS,
            *UNMT_STEPS,
            "--valid-lang-pairs",
            "en-de,de-en,en-ro,ro-en",
            "--max-update",
            "30",
            "--validate-interval-updates",
            "30",
            "--pretrained-xlm-checkpoint",
            pretrained,
            "--save-dir",
            out / "save",
            "--log-interval",
            "1",
        )
        (out / "train.out").write_text(proc.stdout + proc.stderr, encoding="utf-8")

    out = built_once(tmp_path_factory, "unmt", build)
    return out / "save", (out / "train.out").read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def exported_unmt(unmt, tmp_path_factory):
    """The tiny UNMT model as a model directory of xlm-fairseq-export (no CTranslate2): what users serve."""

    def build(out):
        run([sys.executable, "-m", "xlm_fairseq.inference.export", unmt[0] / "checkpoint_last.pt", out / "model"])

    return built_once(tmp_path_factory, "exported_unmt", build) / "model"
