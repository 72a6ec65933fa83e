"""The recipes' stage engine: the one implementation of what every recipe does around its commands.

* one-line errors, ``NAME: error: MESSAGE`` on stderr (:func:`fail`);
* a command run with its output into a log, and on failure one error line and the log's last lines,
  warnings left out (:func:`run_logged`);
* result files written whole or not at all (:func:`write_text`, :func:`write_json`, :func:`copy_file`,
  :func:`write_output`), so that a recipe killed at any point re-runs cleanly;
* stage markers (:class:`Stages`): ``WORK/.stages/ID.done`` holds the key of a finished stage (the
  options its result depends on, with those of the stages before it) and makes a re-run skip it; a
  marker with another key is refused; a stage that runs again forgets the markers of the stages
  after it; ``ID.started`` holds the key of a stage with checkpoints that is running or was
  interrupted, so that fairseq-train resumes only from the checkpoints of that very run: the others
  are moved aside (``DIR.stale-TIME``), never resumed from nor deleted;
* a finished run of a Python driver, whose marker is its result file ``done.json`` (:func:`finished`).

The Python drivers (``recipes.train`` and the experiments, ``recipes.experiments``) import it; the bash recipes
(``quickstart.sh``, ``wmt16_en_{de,ro}.sh``, ``xnli.sh``) reach it through ``recipes/train/stages.sh``,
which runs its command line (``python -m recipes.train.stages --help``) and keeps only what bash must
do itself: its stage functions, the ``--dry-run`` listing, and the error lines it prints before it
knows that Python works.
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from preprocess.files import atomic_write
from recipes.train.progress import Progress, interval_seconds

WARNING = re.compile(r"Warning|warn\(|deprecat")  # lines left out of a failed command's tail
TAIL_LINES = 15


# ------------------------------------------------------------------------------------------------
# messages, commands, files
# ------------------------------------------------------------------------------------------------


def fail(name: str, message: str, status: int = 1):
    """One line ``NAME: error: MESSAGE`` on stderr, then exit with ``status`` (2: a bad option,
    input or file; 1: a tool is missing or a step failed)."""
    print(f"{name}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(status)


def note(name: str, message: str, dry_run: bool = False):
    """A progress line: part of the listing in a dry run (``# MESSAGE`` on stdout), else
    ``[NAME] MESSAGE`` on stderr."""
    if dry_run:
        print(f"# {message}", flush=True)
    else:
        print(f"[{name}] {message}", file=sys.stderr, flush=True)


def log_tail(log, lines: int = TAIL_LINES) -> List[str]:
    """The last lines of a log, warnings left out."""
    text = Path(log).read_text(encoding="utf-8", errors="replace")
    return [line for line in text.splitlines() if not WARNING.search(line)][-lines:]


def run_logged(name: str, cmd: Sequence, log, env=None, cwd=None, progress=None):
    """``cmd`` (its parts made strings), stdout and stderr into ``log``; on failure one error line,
    the log's last lines, and exit status 1. ``progress`` (``progress.Progress``) is called every
    ``progress.interval_seconds()`` while it runs."""
    cmd = [str(c) for c in cmd]
    tool = Path(cmd[0]).name
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(log, "w", encoding="utf-8") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
            while True:
                try:
                    status = proc.wait(timeout=interval_seconds() if progress else None)
                    break
                except subprocess.TimeoutExpired:
                    progress()
    except FileNotFoundError:
        fail(name, f"'{tool}' not found (is the environment of the README on PATH?)")
    except KeyboardInterrupt:
        proc.terminate()
        raise SystemExit(130)
    if status != 0:
        print(f"{name}: error: '{tool}' failed; last lines of {log}:", file=sys.stderr)
        print("\n".join(log_tail(log)), file=sys.stderr, flush=True)
        raise SystemExit(1)


def write_text(path, text: str):
    """``path`` holds ``text``, or (killed meanwhile) what it held before: never half of it."""
    with atomic_write(str(path)) as f:
        f.write(text)


def write_json(path, value, **kwargs):
    write_text(path, json.dumps(value, **kwargs))


def copy_file(src, dst):
    with open(src, "rb") as f, atomic_write(str(dst), binary=True) as g:
        shutil.copyfileobj(f, g)


def write_output(path, cmd: Sequence) -> int:
    """``cmd``'s stdout into ``path`` (whole, and only if it succeeds), then shown; its status."""
    try:
        with atomic_write(str(path)) as out:
            status = subprocess.run([str(c) for c in cmd], stdout=out).returncode
            if status != 0:
                raise subprocess.CalledProcessError(status, cmd)
    except subprocess.CalledProcessError as e:
        return e.returncode
    except KeyboardInterrupt:
        return 130
    sys.stdout.write(Path(path).read_text(encoding="utf-8"))
    return 0


def finished(save: Path) -> Optional[dict]:
    """A Python driver's run: its ``done.json`` (the result, written last) when it finished; else
    None, with ``save`` made empty: an interrupted run is redone whole."""
    done = save / "done.json"
    if done.exists():
        return json.loads(done.read_text())
    if save.exists():
        shutil.rmtree(save)
    save.mkdir(parents=True)
    return None


# ------------------------------------------------------------------------------------------------
# stage markers
# ------------------------------------------------------------------------------------------------


class Stages:
    """The stages of one recipe run: ``ids`` in order, ``keys`` (id -> the options its result
    depends on), ``checkpoints`` (id -> the directory its fairseq-train saves to and resumes from).
    ``redo``: how to redo a stage finished with other options (default: delete its marker)."""

    def __init__(
        self,
        name: str,
        work,
        ids: Sequence[str],
        keys: Dict[str, str],
        checkpoints=None,
        markers=None,
        redo: Optional[str] = None,
        dry_run: bool = False,
    ):
        self.name, self.work, self.ids, self.keys = name, Path(work), list(ids), dict(keys)
        self.markers = Path(markers) if markers else self.work / ".stages"
        self.checkpoints = {k: Path(v) for k, v in (checkpoints or {}).items()}
        self.redo, self.dry_run = redo, dry_run

    def marker(self, stage: str, kind: str = "done") -> Path:
        return self.markers / f"{stage}.{kind}"

    def note(self, message: str):
        note(self.name, message, self.dry_run)

    def done(self, stage: str) -> bool:
        """Whether ``stage`` finished before with the same key; refused (exit 2) if with another."""
        marker = self.marker(stage)
        if not marker.is_file():
            return False
        was, key = marker.read_text(encoding="utf-8").rstrip("\n"), self.keys[stage]
        if was != key:
            redo = self.redo or f"delete {marker} (and the stages after it)"
            fail(
                self.name,
                f"stage {stage} was completed with other options ({was}); now: {key}. "
                f"Use another --work-dir, or {redo} to redo it",
                status=2,
            )
        return True

    def start(self, stage: str):
        """``stage`` is about to run: the stages after it are forgotten, stale checkpoints set aside."""
        self.forget_later(stage)
        self.set_aside_stale_checkpoints(stage)

    def finish(self, stage: str):
        """``stage`` finished: its marker holds its key (whole or absent: a marker cut short by a kill
        would read as "completed with other options"); its checkpoints now belong to a finished run."""
        if self.dry_run:
            self.note(f"stage {stage} done: {self.marker(stage)}")
            return
        write_text(self.marker(stage), self.keys[stage] + "\n")
        self.marker(stage, "started").unlink(missing_ok=True)

    def later(self, stage: str) -> List[str]:
        return self.ids[self.ids.index(stage) + 1 :]

    def forget_later(self, stage: str):
        """A stage that runs again makes the results of the stages after it stale."""
        for later in self.later(stage):
            marker = self.marker(later)
            if not marker.is_file():
                continue
            if self.dry_run:
                self.note(f"would forget stage {later} (its input is redone): rm {marker}")
            else:
                marker.unlink()

    def set_aside_stale_checkpoints(self, stage: str):
        """fairseq-train resumes from any checkpoint_last.pt it finds, so a checkpoint directory stays
        in place only for the run it belongs to: ``stage``'s own when its last start (``ID.started``)
        had the same key (an interrupted run resumes). The others -- its own from other options or
        from a finished run whose marker went, every later stage's (made from an earlier result of
        ``stage``) -- are moved to DIR.stale-TIME."""
        key, started = self.keys[stage], self.marker(stage, "started")
        for s in [stage, *self.later(stage)]:
            directory = self.checkpoints.get(s)
            if directory is None or not directory.is_dir():
                continue
            if s != stage:
                why = f"made from an earlier result of stage {stage}"
            elif not started.is_file():
                why = "of a run that finished before"
            elif (was := started.read_text(encoding="utf-8").rstrip("\n")) != key:
                why = f"made with other options ({was})"
            else:
                continue
            stamp = time.strftime("%Y%m%d-%H%M%S")
            stale, n = Path(f"{directory}.stale-{stamp}"), 1
            while stale.exists():  # a move onto a directory would nest
                stale, n = Path(f"{directory}.stale-{stamp}.{n}"), n + 1
            if self.dry_run:
                self.note(f"would set aside stage {s}'s checkpoints ({why}): mv {directory} {stale}")
            else:
                directory.rename(stale)
                self.note(f"stage {s}'s checkpoints were {why}: moved to {stale}; stage {s} trains afresh")
        if not self.dry_run and stage in self.checkpoints:
            write_text(started, key + "\n")

    def require_finished_before(self, first: str):
        """A run that starts at stage ``first`` (--stage) needs every stage before it finished with
        the same options; a dry run notes what a real run would refuse."""
        for stage in self.ids[: self.ids.index(first)]:
            if self.done(stage):
                continue
            missing = f"--stage {first}: stage {stage} has not finished in {self.work} (no {self.marker(stage)})"
            if self.dry_run:
                self.note(f"{missing}: a real run stops here")
            else:
                fail(self.name, f"{missing}; run from --stage {stage}", status=2)


# ------------------------------------------------------------------------------------------------
# the command line of recipes/train/stages.sh
# ------------------------------------------------------------------------------------------------

# check ID: exit 0 when the stage finished before with the same options, NOT_DONE when it has not
NOT_DONE = 3


def _pairs(values, option) -> Dict[str, str]:
    out = {}
    for value in values or ():
        stage, sep, text = value.partition("=")
        if not sep:
            raise SystemExit(f"stages: error: {option} expects ID=VALUE, got {value!r}")
        out[stage] = text
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m recipes.train.stages", description=__doc__.split("\n\n")[0])
    p.add_argument("--recipe", required=True, help="the name every message starts with")
    p.add_argument("--dry-run", action="store_true", help="note what would change; write nothing")
    p.add_argument("--work", help="the work directory (named in messages)")
    p.add_argument("--markers", help="the directory of the stage markers (default WORK/.stages)")
    p.add_argument("--ids", help="the stage ids in order, comma-separated")
    p.add_argument("--key", action="append", metavar="ID=KEY", help="a stage's key (one per stage)")
    p.add_argument("--checkpoints", action="append", metavar="ID=DIR", help="a stage's checkpoint directory")
    p.add_argument("--redo", help="how to redo a stage finished with other options")
    sub = p.add_subparsers(dest="command", required=True)
    for command, text in (
        ("check", f"exit 0 if stage ID finished before, {NOT_DONE} if not"),
        ("start", "stage ID is about to run: later stages forgotten, stale checkpoints aside"),
        ("finish", "stage ID finished: its marker"),
        ("require", "every stage before ID finished (--stage ID)"),
    ):
        sub.add_parser(command, help=text).add_argument("id", metavar="ID")
    s = sub.add_parser("run-logged", help="run CMD with its output into LOG; on failure its tail")
    s.add_argument("--progress", metavar="TRAIN_LOG", help="a line about once a minute from this fairseq --log-file")
    s.add_argument("--budget-hours", type=float, help="the stage's wall-time budget, for --progress")
    s.add_argument("--metric", default="(?!)", help="regular expression of the validation keys --progress shows")
    s.add_argument("log", metavar="LOG")
    s.add_argument("cmd", nargs=argparse.REMAINDER, metavar="CMD")
    s = sub.add_parser("write-output", help="CMD's stdout into FILE, whole and only on success; then shown")
    s.add_argument("file", metavar="FILE")
    s.add_argument("cmd", nargs=argparse.REMAINDER, metavar="CMD")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "run-logged":
        progress = Progress(args.progress, args.budget_hours, args.metric) if args.progress else None
        run_logged(args.recipe, args.cmd, args.log, progress=progress)
        return 0
    if args.command == "write-output":
        return write_output(args.file, args.cmd)
    keys = _pairs(args.key, "--key")
    stages = Stages(
        args.recipe,
        args.work,
        args.ids.split(","),
        keys,
        _pairs(args.checkpoints, "--checkpoints"),
        args.markers,
        args.redo,
        args.dry_run,
    )
    if args.id not in stages.ids or args.id not in keys:
        raise SystemExit(f"stages: error: stage {args.id!r} is not among --ids / --key")
    if args.command == "check":
        return 0 if stages.done(args.id) else NOT_DONE
    {"start": stages.start, "finish": stages.finish, "require": stages.require_finished_before}[args.command](args.id)
    return 0


if __name__ == "__main__":
    sys.exit(main())
