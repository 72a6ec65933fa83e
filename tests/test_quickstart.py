"""The README's main job, reduced (--tiny): preprocess -> pretrain -> UNMT -> generate -> BLEU, end to end."""

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def _run(args, **kw):
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", PYTHON=sys.executable)
    return subprocess.run(
        ["bash", ROOT / "recipes" / "quickstart.sh", *args], capture_output=True, text=True, env=env, cwd=ROOT, **kw
    )


def test_quickstart_tiny_end_to_end(tmp_path):
    work = tmp_path / "qs"
    proc = _run(["--tiny", "--work-dir", str(work)])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
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
