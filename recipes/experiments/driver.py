"""What the experiments' drivers (``ablation/``, ``scale/``, ``xcls/``) share on top of the
stage engine (``recipes/train/stages.py``): progress lines with the time, commands run from the
repository root into their logs, finished runs skipped, the shared corpora they read."""

import json
import os
import sys
import time
from pathlib import Path

from recipes.train import stages

ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = ROOT.parent / "shared" / "data"
EXPERIMENT_INPUTS = ("en-de/docs.natural.en", "bli/de-en.dev.txt")  # the MT experiments' corpus and probe


def add_shared_data_option(parser):
    parser.add_argument(
        "--shared-data",
        default=str(SHARED_DATA),
        help="the Debian corpora: a folder recipes/data/debian.py wrote (default ../shared/data)",
    )


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
        sys.stdout.write(f"[{self.name} {time.strftime('%H:%M:%S')}] {msg}\n")  # one write: --jobs threads
        sys.stdout.flush()

    def fail(self, msg):
        stages.fail(self.name, msg)

    def run(self, cmd, log_path):
        """``cmd`` from the repository root, stdout and stderr into ``log_path``; on failure one error
        line and the log's tail (:func:`recipes.train.stages.run_logged`)."""
        stages.run_logged(self.name, cmd, log_path, env=self.env, cwd=ROOT)

    @staticmethod
    def finished(save: Path):
        """A run's ``done.json`` when it finished; else None, with ``save`` made empty: an interrupted
        run is redone whole, under the same budget."""
        return stages.finished(save)

    @staticmethod
    def load_results(path: Path) -> dict:
        """The results of the runs an earlier invocation finished (a re-run skips them)."""
        return json.loads(path.read_text()) if path.exists() else {}

    def publish(self, work: Path, md: str):
        stages.write_text(work / "results.md", md)
        print(md)
        self.log(f"results: {work}/results.md, results.json")
