"""What the Python recipe drivers (``recipes/ablation.py``, ``scale.py``, ``xcls.py``) share: progress lines,
running a command into its own log (stopping the recipe with the log's tail when it fails), and
result files written whole or not at all, so that a recipe killed at any point re-runs cleanly."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from preprocess.files import atomic_write  # noqa: E402


def write_text(path, text: str):
    """``path`` holds ``text``, or (killed meanwhile) what it held before: never half of it."""
    with atomic_write(str(path)) as f:
        f.write(text)


def write_json(path, value, **kwargs):
    write_text(path, json.dumps(value, **kwargs))


def copy_file(src, dst):
    with open(src, "rb") as f, atomic_write(str(dst), binary=True) as g:
        g.write(f.read())


SHARED_DATA = ROOT.parent / "shared" / "data"
EXPERIMENT_INPUTS = ("en-de/docs.natural.en", "bli/de-en.dev.txt")  # the MT experiments' corpus and probe


def add_shared_data_option(parser):
    parser.add_argument("--shared-data", default=str(SHARED_DATA), help="the shared corpora (default ../shared/data)")


def check_shared_data(parser, args, needs=EXPERIMENT_INPUTS):
    """One error line naming the first shared file the experiment needs and cannot find."""
    for need in needs:
        if not (Path(args.shared_data) / need).exists():
            parser.error(f"--shared-data: {args.shared_data}/{need} not found")


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

    @staticmethod
    def finished(save: Path):
        """A run's ``done.json`` when it finished; else None, with ``save`` made empty: an interrupted
        run is redone whole, under the same budget."""
        done = save / "done.json"
        if done.exists():
            return json.loads(done.read_text())
        if save.exists():
            shutil.rmtree(save)
        save.mkdir(parents=True)
        return None

    @staticmethod
    def load_results(path: Path) -> dict:
        """The results of the runs an earlier invocation finished (a re-run skips them)."""
        return json.loads(path.read_text()) if path.exists() else {}

    def publish(self, work: Path, md: str):
        write_text(work / "results.md", md)
        print(md)
        self.log(f"results: {work}/results.md, results.json")
