"""Runs that are killed and resumed lose nothing: a run killed with SIGKILL right after a checkpoint
and restarted with the same command continues the uninterrupted run's curve exactly; a kill while
fairseq copies a checkpoint over checkpoint_last.pt leaves one that loads; an AE+BT run killed six
times at random moments (back-translation, validation, checkpoint writing and copying, an update's
start) ends with the uninterrupted run's log and model."""

import signal
import subprocess
import sys

import pytest
import torch
from conftest import (
    BIN,
    PRETRAIN_ARGS,
    ROOT,
    TIMING,
    UNMT_ARGS,
    UNMT_STEPS,
    json_logs,
    run,
    train_records,
    unbuffered_env,
)

pytestmark = pytest.mark.slow


def _lm_command(data_bin, save):
    return [
        BIN / "fairseq-train",
        data_bin,
        *PRETRAIN_ARGS,
        "--langs",
        "en,de,ro",
        "--mlm-steps",
        "en,de,ro,en-de,en-ro",
        "--lg-sampling-factor",
        "0.5",
        "--step-per-objective",
        "--max-update",
        "36",
        "--save-interval-updates",
        "12",
        "--save-dir",
        save,
        "--log-interval",
        "1",
    ]


def _kill_after_first_checkpoint(cmd):
    """Start ``cmd``, SIGKILL it as soon as it logs its first saved checkpoint; its log so far."""
    proc = subprocess.Popen(
        [str(c) for c in cmd],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=unbuffered_env(),
        cwd=ROOT,
    )
    log = []
    for line in proc.stdout:
        log.append(line)
        if "Saved checkpoint" in line:
            proc.send_signal(signal.SIGKILL)
            break
    proc.stdout.close()
    assert proc.wait() == -signal.SIGKILL, "".join(log[-30:])
    return "".join(log)


def test_kill_and_resume_continues_the_same_curve(data_bin, tmp_path):
    """MLM+TLM with language sampling and one step per objective. Killed mid-epoch right after a
    checkpoint, restarted with the very same command: the updates after the checkpoint have the loss
    of every objective, the learning rate, the schedule weights, the gradient norm and the batch sizes
    of the uninterrupted run. (AE+BT: test_sigkill_at_random_moments_of_unmt_training_loses_nothing.)"""

    def command(save):
        return _lm_command(data_bin, save)

    reference = train_records(run(command(tmp_path / "uninterrupted"), env_extra={"PYTHONUNBUFFERED": "1"}).stdout)
    killed_log = _kill_after_first_checkpoint(command(tmp_path / "killed"))
    saved = torch.load(tmp_path / "killed" / "checkpoint_last.pt")
    checkpoint_update = saved["optimizer_history"][-1]["num_updates"]
    progress = saved["extra_state"]["train_iterator"]
    assert progress["epoch"] == 1 and progress["iterations_in_epoch"] == checkpoint_update  # mid-epoch
    assert max(train_records(killed_log)) >= checkpoint_update

    resumed = train_records(run(command(tmp_path / "killed"), env_extra={"PYTHONUNBUFFERED": "1"}).stdout)
    assert min(resumed) == checkpoint_update + 1 and max(resumed) == max(reference), sorted(resumed)
    for update, record in resumed.items():
        expected = reference[update]
        assert record.keys() == expected.keys(), update
        for key, value in record.items():
            if key.endswith("_loss") or key == "loss":
                # the bound is 1 %; the runs are identical to the printed precision
                assert float(value) == pytest.approx(float(expected[key]), rel=0.01), (update, key)
            elif key.endswith("ppl"):
                # 2**loss printed to 0.01: more digits than the loss itself, where the two runs' float
                # sums may differ in the last bits
                assert float(value) == pytest.approx(float(expected[key]), rel=1e-4), (update, key)
        exact = {k: v for k, v in record.items() if not k.endswith("ppl")}
        differing = {k: (v, expected[k]) for k, v in exact.items() if v != expected[k]}
        assert not differing, (update, differing)


def test_kill_while_checkpoint_last_is_written_leaves_one_that_loads(data_bin, tmp_path):
    """fairseq writes checkpoint_1_U.pt, then copies it over checkpoint_last.pt. The process is
    killed (SIGKILL) half-way through the second such copy: checkpoint_last.pt is still the first
    checkpoint, whole, and the same command resumes from it and finishes."""
    save = tmp_path / "save"
    # fairseq-train with a tripwire: a copy goes through os.sendfile (shutil.copyfile) or
    # shutil.copyfileobj; the second copy of the run writes half its bytes and kills the process
    tripwire = tmp_path / "train_with_tripwire.py"
    tripwire.write_text(
        "import os, shutil, signal, sys\n"
        "calls = []\n"
        "real_sendfile, real_copyfileobj = os.sendfile, shutil.copyfileobj\n"
        "def sendfile(out_fd, in_fd, offset, count):\n"
        "    calls.append(1) if offset == 0 else None  # a copy is several calls, the first at offset 0\n"
        "    if len(calls) < 2:\n"
        "        return real_sendfile(out_fd, in_fd, offset, count)\n"
        "    real_sendfile(out_fd, in_fd, offset, os.fstat(in_fd).st_size // 2)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "def copyfileobj(src, dst, length=0):\n"
        "    calls.append(1)\n"
        "    if len(calls) < 2:\n"
        "        return real_copyfileobj(src, dst, length)\n"
        "    dst.write(src.read(os.fstat(src.fileno()).st_size // 2))\n"
        "    dst.flush()\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "os.sendfile, shutil.copyfileobj = sendfile, copyfileobj\n"
        "from fairseq_cli.train import cli_main\n"
        "sys.argv[0] = 'fairseq-train'\n"
        "cli_main()\n"
    )
    args = [data_bin, *PRETRAIN_ARGS, "--langs", "en,de", "--mlm-steps", "en,de", "--max-update", "12"]
    args += ["--save-interval-updates", "4", "--save-dir", save, "--log-interval", "1"]
    proc = run([sys.executable, tripwire, *args], ok=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    assert (save / "checkpoint_1_8.pt").exists()  # the second checkpoint was written, its copy cut short
    state = torch.load(save / "checkpoint_last.pt")
    assert state["optimizer_history"][-1]["num_updates"] == 4

    resumed = train_records(run([BIN / "fairseq-train", *args]).stdout)
    assert min(resumed) == 5 and max(resumed) == 12, sorted(resumed)
    assert torch.load(save / "checkpoint_last.pt")["optimizer_history"][-1]["num_updates"] == 12


FAULT_PLUGIN = '''
"""Test-only plugin: xlm_fairseq, and a SIGKILL at the moment XLM_FAULT names ("KIND:N", the Nth
such moment of this process): bt (a back-translation), valid (a validation batch), save (half-way
through writing a checkpoint), copy (half-way through its copy over checkpoint_last.pt), step (the
start of an update)."""
import io, os, signal

import xlm_fairseq  # noqa: F401
from fairseq import checkpoint_utils
from xlm_fairseq.patches import checkpoint_copy
from xlm_fairseq.objectives.translation import BackTranslation
from xlm_fairseq.tasks.translation_lm import TranslationLMTask

KIND, _, COUNT = os.environ.get("XLM_FAULT", ":0").partition(":")
seen = {"n": 0}


def moment(kind):
    if kind == KIND:
        seen["n"] += 1
        return seen["n"] == int(COUNT)
    return False


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def wrap(owner, name, kind):
    real = getattr(owner, name)

    def wrapped(self, *args, **kwargs):
        if moment(kind):
            die()
        return real(self, *args, **kwargs)

    setattr(owner, name, wrapped)


wrap(BackTranslation, "prepare", "bt")
wrap(TranslationLMTask, "valid_step", "valid")
wrap(TranslationLMTask, "train_step", "step")
real_save, real_copy = checkpoint_utils._torch_persistent_save, checkpoint_copy.shutil.copyfileobj


def save(obj, f):
    if not moment("save"):
        return real_save(obj, f)
    buffer = io.BytesIO()
    real_save(obj, buffer)
    f.write(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    f.flush()
    die()


class CutShort:
    @staticmethod
    def copyfileobj(src, dst, length=0):
        if not moment("copy"):
            return real_copy(src, dst, length)
        dst.write(src.read(os.fstat(src.fileno()).st_size // 2))
        dst.flush()
        die()


checkpoint_utils._torch_persistent_save = save
checkpoint_copy.shutil = CutShort
'''


def test_sigkill_at_random_moments_of_unmt_training_loses_nothing(data_bin, pretrained, tmp_path):
    """AE + BT + validation with BLEU, killed (SIGKILL) six times at random moments -- inside
    back-translation, validation, checkpoint writing, the copy over checkpoint_last.pt, the start of
    an update -- and restarted each time with the same command: every logged training and validation
    number and the final model are the uninterrupted run's."""
    import random

    plugin = tmp_path / "fault_plugin"
    plugin.mkdir()
    (plugin / "__init__.py").write_text(FAULT_PLUGIN)
    args = [a if a != ROOT / "xlm_fairseq" else plugin for a in UNMT_ARGS]

    def command(save):
        return [
            BIN / "fairseq-train",
            data_bin,
            *args,
            *UNMT_STEPS,
            "--pretrained-xlm-checkpoint",
            pretrained,
            "--valid-lang-pairs",
            "de-en,en-de",
            "--max-update",
            "24",
            "--validate-interval-updates",
            "6",
            "--save-interval-updates",
            "6",
            "--no-epoch-checkpoints",
            "--save-dir",
            save,
            "--log-interval",
            "1",
            "--log-format",
            "json",
        ]

    def records(text):
        valid = {int(r["valid_num_updates"]): r for r in json_logs(text, "valid")}
        timing = {f"valid_{k}" for k in TIMING}
        return train_records(text), {u: {k: v for k, v in r.items() if k not in timing} for u, r in valid.items()}

    reference = records(run(command(tmp_path / "uninterrupted"), env_extra={"PYTHONUNBUFFERED": "1"}).stdout)
    got_train, got_valid, kills = {}, {}, []
    kinds = ["bt", "valid", "save", "copy", "step"]
    for seed in range(6):  # every kind of moment once, back-translation twice
        rng = random.Random(seed)
        kind = kinds[seed % len(kinds)]
        count = rng.randint(1, {"bt": 24, "valid": 4, "save": 2, "copy": 2, "step": 8}[kind])
        proc = run(
            command(tmp_path / "faulted"), ok=False, env_extra={"PYTHONUNBUFFERED": "1", "XLM_FAULT": f"{kind}:{count}"}
        )
        train, valid = records(proc.stdout)
        for update, record in train.items():  # the updates a kill repeated are logged twice: equal
            assert got_train.setdefault(update, record) == record, (kind, count, update)
        got_valid.update(valid)
        kills.append((kind, count, proc.returncode))
        if proc.returncode == 0:
            break
        assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    final = run(command(tmp_path / "faulted"), env_extra={"PYTHONUNBUFFERED": "1"})
    train, valid = records(final.stdout)
    got_train.update(train)
    got_valid.update(valid)
    assert sum(code == -signal.SIGKILL for _, _, code in kills) >= 6, kills
    assert {kind for kind, _, _ in kills} == set(kinds)
    assert got_train == reference[0] and got_valid == reference[1], kills
    assert any("lambda_ae" in r for r in got_train.values())  # the lambda schedule resumed too
    ours = torch.load(tmp_path / "faulted" / "checkpoint_last.pt")["model"]
    theirs = torch.load(tmp_path / "uninterrupted" / "checkpoint_last.pt")["model"]
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours), kills
