"""Runs that are killed, resumed, or spread over processes lose nothing: a run killed with SIGKILL
right after a checkpoint and restarted with the same command continues the uninterrupted run's
curve exactly; a kill while fairseq copies a checkpoint over checkpoint_last.pt leaves one that
loads; an AE+BT run killed six times at random moments (back-translation, validation, checkpoint
writing and copying, an update's start) ends with the uninterrupted run's log and model; two CPU
processes over gloo train and validate as one process with the same total batch."""

import os
import signal
import subprocess
import sys

import pytest
import torch
from conftest import BIN, PRETRAIN_ARGS, ROOT, UNMT_ARGS, UNMT_STEPS, json_logs, run

pytestmark = pytest.mark.slow

# fields of a train_inner record that depend on the machine, not on the run
TIMING = {"wps", "ups", "wall", "train_wall", "gb_free"}


def _env():
    return dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")


def _train_records(text):
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
        [str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(), cwd=ROOT
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

    reference = _train_records(run(command(tmp_path / "uninterrupted"), env_extra={"PYTHONUNBUFFERED": "1"}).stdout)
    killed_log = _kill_after_first_checkpoint(command(tmp_path / "killed"))
    saved = torch.load(tmp_path / "killed" / "checkpoint_last.pt")
    checkpoint_update = saved["optimizer_history"][-1]["num_updates"]
    progress = saved["extra_state"]["train_iterator"]
    assert progress["epoch"] == 1 and progress["iterations_in_epoch"] == checkpoint_update  # mid-epoch
    assert max(_train_records(killed_log)) >= checkpoint_update

    resumed = _train_records(run(command(tmp_path / "killed"), env_extra={"PYTHONUNBUFFERED": "1"}).stdout)
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

    resumed = _train_records(run([BIN / "fairseq-train", *args]).stdout)
    assert min(resumed) == 5 and max(resumed) == 12, sorted(resumed)
    assert torch.load(save / "checkpoint_last.pt")["optimizer_history"][-1]["num_updates"] == 12


def _same_numbers(got, expected, where):
    assert got.keys() == expected.keys(), (where, sorted(set(got) ^ set(expected)))
    for key, value in got.items():
        try:
            assert float(value) == pytest.approx(float(expected[key]), rel=1e-3, abs=1e-3), (where, key)
        except ValueError:
            assert value == expected[key], (where, key)


@pytest.mark.parametrize("task", ["cross_lingual_lm", "translation_lm"])
def test_two_cpu_processes_train_and_validate_like_one(task, data_bin, pretrained, tmp_path):
    """``python -m xlm_fairseq.distributed.cpu_launcher --nproc 2`` (gloo) against one process with
    ``--update-freq 2``: the same batches make each update. With dropout off, every logged
    training number (each objective's loss and accuracy, lr, gradient norm) and every validation
    number (losses, per-direction BLEU: statistics summed over both workers, not worker 0's
    half) equals the single process's; BT runs in each worker on its own replica."""
    common = ["--dropout", "0", "--attention-dropout", "0", "--log-interval", "1", "--validate-interval-updates", "4"]
    if task == "cross_lingual_lm":
        args = [*PRETRAIN_ARGS, "--langs", "en,de,ro", "--mlm-steps", "en,de,ro,en-de", "--step-per-objective"]
        args += ["--lg-sampling-factor", "0.5", "--max-tokens", "512", "--max-update", "8"]
        args = [a for a in args if a != "--disable-validation"]
    else:
        args = [*UNMT_ARGS, *UNMT_STEPS, "--valid-lang-pairs", "en-de,de-en,en-ro,ro-en", "--max-tokens", "750"]
        args += ["--pretrained-xlm-checkpoint", pretrained, "--max-update", "8"]
    args = [data_bin, *args, *common]
    one = run([BIN / "fairseq-train", *args, "--save-dir", tmp_path / "one", "--update-freq", "2"]).stdout
    launcher = [sys.executable, "-m", "xlm_fairseq.distributed.cpu_launcher", "--nproc", "2", BIN / "fairseq-train"]
    two = run([*launcher, *args, "--save-dir", tmp_path / "two"]).stdout
    assert "distributed_world_size': 2" in two
    train_one, train_two = _train_records(one), _train_records(two)
    assert sorted(train_two) == list(range(1, 9))
    for update in train_one:
        _same_numbers(train_two[update], train_one[update], f"update {update}")
    # per validation *step* sizes double (a step is one batch per worker); everything else is per set
    per_step = ("valid_wps", "valid_wall", "valid_wpb", "valid_bsz")
    valid_one = [{k: v for k, v in r.items() if k not in per_step} for r in json_logs(one, "valid")]
    valid_two = [{k: v for k, v in r.items() if k not in per_step} for r in json_logs(two, "valid")]
    assert len(valid_two) == 2
    for i, (got, expected) in enumerate(zip(valid_two, valid_one)):
        _same_numbers(got, expected, f"validation {i}")
    if task == "translation_lm":
        bleu = {k: v for k, v in valid_two[-1].items() if k.startswith("valid_bleu")}
        assert len(bleu) == 10, bleu  # bleu_ and bleu_tok_ of four directions, and their two means
    # both processes wrote nothing but rank 0's checkpoints; the result loads and resumes like any other
    assert torch.load(tmp_path / "two" / "checkpoint_last.pt")["optimizer_history"][-1]["num_updates"] == 8


def test_distributed_cpu_refuses_options_it_sets(data_bin, tmp_path):
    proc = run(
        [
            sys.executable,
            "-m",
            "xlm_fairseq.distributed.cpu_launcher",
            "--nproc",
            "2",
            BIN / "fairseq-train",
            data_bin,
            "--distributed-world-size",
            "4",
        ],
        ok=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "distributed_cpu: error: --distributed-world-size is set by this launcher; leave it out of the fairseq command"
    ]


def test_a_bad_option_is_one_error_line_per_rank(data_bin, tmp_path):
    proc = run(
        [
            sys.executable,
            "-m",
            "xlm_fairseq.distributed.cpu_launcher",
            "--nproc",
            "2",
            BIN / "fairseq-train",
            data_bin,
            *PRETRAIN_ARGS,
            "--langs",
            "en,de",
            "--mlm-steps",
            "fr",
            "--save-dir",
            tmp_path / "save",
        ],
        ok=False,
    )
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 2, proc.stderr[-3000:]
    assert all(e.endswith("error: --mlm-steps: language 'fr' is not in --langs en,de") for e in errors), errors
    assert "Traceback" not in proc.stderr


def _children(pid):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return found


def test_a_rank_that_dies_stops_the_others(data_bin, tmp_path):
    """Rank 1 killed mid-training: rank 0 would wait for it forever in the next all-reduce; the
    launcher stops it and exits non-zero, leaving no process behind."""
    cmd = [
        BIN / "xlm-fairseq-distributed-cpu",
        "--nproc",
        "2",
        BIN / "fairseq-train",
        data_bin,
        *PRETRAIN_ARGS,
        "--langs",
        "en,de",
        "--mlm-steps",
        "en,de",
        "--max-update",
        "100000",
        "--save-dir",
        tmp_path / "save",
        "--log-interval",
        "1",
    ]
    launcher = subprocess.Popen(
        [str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_env(), cwd=ROOT
    )
    try:
        for line in launcher.stdout:
            if "train_inner" in line:  # both ranks are past their first all-reduce
                break
        ranks = _children(launcher.pid)
        assert len(ranks) == 2, ranks
        rank1 = [pid for pid in ranks if "--distributed-rank\x001\x00" in open(f"/proc/{pid}/cmdline").read()]
        os.kill(rank1[0], signal.SIGKILL)
        assert launcher.wait(timeout=120) != 0
        assert not [pid for pid in ranks if os.path.exists(f"/proc/{pid}")]  # rank 0 stopped and reaped
    finally:
        launcher.kill()
        launcher.stdout.close()


FAILING_RANK_PLUGIN = '''
"""Test-only plugin: translation_lm whose back-translation fails on rank 1 from update 3 on."""
import torch.distributed as dist
from fairseq.tasks import register_task

import xlm_fairseq  # noqa: F401
from xlm_fairseq.objectives.translation import BackTranslation
from xlm_fairseq.tasks.translation_lm import TranslationLMConfig, TranslationLMTask


class FailingBackTranslation(BackTranslation):
    def prepare(self, model, batch):
        if dist.get_rank() == 1 and self.task.update_num >= 3:
            raise RuntimeError("injected failure")
        return super().prepare(model, batch)


@register_task("translation_lm_failing_rank", dataclass=TranslationLMConfig)
class FailingRank(TranslationLMTask):
    def set_langs(self, langs):
        super().set_langs(langs)
        for objective in self.objectives:
            if isinstance(objective, BackTranslation):
                objective.__class__ = FailingBackTranslation

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        self.update_num = update_num
        return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)
'''


def test_a_rank_that_fails_in_an_objective_stops_every_rank_with_the_reason(data_bin, pretrained, tmp_path):
    """Back-translation fails on rank 1 only: rank 0 used to wait for it in the gradient all-reduce
    (until the launcher stopped it, saying nothing); now both ranks learn of it at the objectives'
    agreement and each says why it stops."""
    plugin = tmp_path / "failing_rank_plugin"
    plugin.mkdir()
    (plugin / "__init__.py").write_text(FAILING_RANK_PLUGIN)
    args = [a if a != ROOT / "xlm_fairseq" else plugin for a in UNMT_ARGS]
    args = [a if a != "translation_lm" else "translation_lm_failing_rank" for a in args]
    cmd = [
        BIN / "xlm-fairseq-distributed-cpu",
        "--nproc",
        "2",
        BIN / "fairseq-train",
        data_bin,
        *args,
        *UNMT_STEPS,
        "--pretrained-xlm-checkpoint",
        pretrained,
        "--max-update",
        "20",
        "--disable-validation",
        "--save-dir",
        tmp_path / "save",
    ]
    proc = run(cmd, ok=False, timeout=600)
    assert proc.returncode != 0
    # torch prefixes a rank's traceback lines with "[rankN]: "
    reasons = [line for line in proc.stderr.splitlines() if "rank_agreement.RankFailure: " in line]
    assert any("rank 1 failed in objective bt_" in r and "RuntimeError: injected failure" in r for r in reasons)
    assert any("rank 1 stopped with an error (its log has it); every rank stops here" in r for r in reasons)


PREFETCH_AT_EXIT = """
import sys
import torch
from fairseq.data.iterators import BufferedIterator
if sys.argv[1] == "plugin":
    import xlm_fairseq  # noqa: F401


class Batches:  # collating takes a while, as a real batch does
    def __len__(self):
        return 10**9

    def __iter__(self):
        while True:
            x = torch.randn(256, 256)
            for _ in range(50):
                x = torch.nn.functional.gelu(x @ x.T / 256)
            yield x


next(iter(BufferedIterator(10, Batches())))  # the command ends while the buffer is filling
"""


def test_a_command_that_ends_while_fairseq_prefetches_batches_exits_cleanly(tmp_path):
    """fairseq-train's last epoch iterator may still be collating batches in its daemon thread when
    training ends: the interpreter ended that thread inside a torch op and the finished run exited
    134 ("terminate called without an active exception"; seen in CI at --stop-time-hours)."""
    script = tmp_path / "prefetch_at_exit.py"
    script.write_text(PREFETCH_AT_EXIT)
    without = run([sys.executable, script, "fairseq"], ok=False)
    assert without.returncode == -signal.SIGABRT and "terminate called" in without.stderr  # the hazard is real
    for _ in range(3):
        proc = run([sys.executable, script, "plugin"], ok=False)
        assert proc.returncode == 0 and "terminate called" not in proc.stderr, proc.stderr[-2000:]


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
        return _train_records(text), {u: {k: v for k, v in r.items() if k not in timing} for u, r in valid.items()}

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
