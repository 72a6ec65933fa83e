"""The README's main job, reduced (--tiny): preprocess -> pretrain -> UNMT -> generate -> BLEU, end to end,
after a kill."""

import hashlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import ROOT


def _run(args, **kw):
    return subprocess.run(
        ["bash", ROOT / "recipes" / "quickstart.sh", *args], capture_output=True, text=True, env=_env(), cwd=ROOT, **kw
    )


def _env():
    return dict(
        os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", PYTHON=sys.executable
    )


def _kill_during_pretraining(work):
    """Start the tiny quickstart and SIGKILL it, fairseq-train included, a few seconds into stage 2."""
    proc = subprocess.Popen(
        ["bash", ROOT / "recipes" / "quickstart.sh", "--tiny", "--work-dir", str(work)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=_env(),
        cwd=ROOT,
        start_new_session=True,
    )
    for line in proc.stdout:
        if "2/4 MLM+TLM pretraining" in line:
            time.sleep(3)
            break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.stdout.close()
    proc.wait()


def _checksums(directory):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


def test_quickstart_tiny_end_to_end(tmp_path):
    """Killed in stage 2, then run again: stage 1 is kept (its data-bin byte for byte), stage 2 runs
    again and the rest follows; a third run only scores."""
    work = tmp_path / "qs"
    _kill_during_pretraining(work)
    assert (work / ".stages" / "preprocess.done").exists() and not (work / ".stages" / "pretrain.done").exists()
    data_bin = _checksums(work / "data-bin")
    proc = _run(["--tiny", "--work-dir", str(work)])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "1/4 preprocess: done before" in proc.stdout and proc.stdout.count("done before") == 1
    assert _checksums(work / "data-bin") == data_bin
    assert "cannot show" in proc.stdout and "recipes/ablation.sh" in proc.stdout  # says what a short run means
    for direction in ("de-en", "en-de"):
        line = [row for row in proc.stdout.splitlines() if row.startswith(direction)]
        assert line and re.search(r"BLEU\|nrefs:1\|.* = [0-9.]+", line[0]), proc.stdout[-1500:]
        hyps = (work / "out" / f"hyp.{direction}.txt").read_text(encoding="utf-8").splitlines()
        assert len(hyps) == 100
    assert (work / "checkpoints" / "unmt" / "checkpoint_last.pt").exists()
    # a re-run skips the finished stages and scores again
    again = _run(["--tiny", "--work-dir", str(work)])
    assert again.returncode == 0 and again.stdout.count("done before") == 3


def test_quickstart_refuses_without_install(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(
        ["bash", ROOT / "recipes" / "quickstart.sh", "--tiny", "--work-dir", str(tmp_path / "q")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode != 0
    assert "scripts/setup.sh" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "q").exists()


def test_quickstart_rejects_unknown_option():
    proc = _run(["--bogus"])
    assert proc.returncode == 2 and "unknown option '--bogus'" in proc.stderr
