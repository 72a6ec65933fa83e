"""What the Python recipe drivers (``recipes/ablation.py``, ``recipes/xcls.py``) share: progress lines
and running a command into its own log, stopping the recipe with the log's tail when it fails."""

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class Driver:
    name = "recipe"  # the prefix of every line

    def __init__(self):
        self.env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")

    def log(self, msg):
        print(f"[{self.name} {time.strftime('%H:%M:%S')}] {msg}", flush=True)

    def run(self, cmd, log_path):
        """``cmd`` (its parts made strings) from the repository root, stdout and stderr into ``log_path``."""
        with open(log_path, "w") as out:
            proc = subprocess.run([str(c) for c in cmd], stdout=out, stderr=subprocess.STDOUT, env=self.env, cwd=ROOT)
        if proc.returncode != 0:
            tail = Path(log_path).read_text(errors="replace").splitlines()[-15:]
            sys.exit(f"{self.name}: error: {Path(str(cmd[0])).name} failed (see {log_path}):\n" + "\n".join(tail))
