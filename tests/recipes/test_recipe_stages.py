"""The recipes' one stage engine, ``recipes/train/stages.py``, as the bash recipes reach it (through
``recipes/train/stages.sh``) and as the Python drivers do: stage markers and their keys, skipped and
forgotten stages, stale checkpoints set aside, --stage N, commands run into logs, outputs written whole."""

import subprocess
import sys

import pytest
from recipe_support import ENDE, RECIPES, ROOT, XNLI, dry_run, env, find, recipe

# ------------------------------------------------------------------------------------------------
# commands into logs, outputs written whole: one implementation for bash and Python
# ------------------------------------------------------------------------------------------------

# a command that fails after printing 20 numbered lines and warnings between them
FAILING = ["sh", "-c", "for i in $(seq 1 20); do echo line $i; echo 'UserWarning: noise'; done; exit 3"]


def test_a_failed_command_is_one_error_line_and_its_log_tail_in_bash_and_python(tmp_path):
    log = tmp_path / "step.log"
    bash = subprocess.run(
        ["bash", "-c", f'RECIPE=demo; source "{RECIPES}/train/stages.sh"; run_logged "$@"', "-", log, *FAILING],
        capture_output=True,
        text=True,
        env=env(PYTHONPATH=str(ROOT)),
    )
    driver = (
        "from recipes.experiments.driver import Driver; d = Driver(); d.name = 'demo'; d.run(sys.argv[2:], sys.argv[1])"
    )
    python = subprocess.run(
        [sys.executable, "-c", f"import sys; {driver}", log, *FAILING],
        capture_output=True,
        text=True,
        env=env(PYTHONPATH=str(ROOT)),
    )
    for result in (bash, python):
        assert result.returncode == 1 and result.stdout == ""
        assert result.stderr.splitlines() == [
            f"demo: error: 'sh' failed; last lines of {log}:",
            *[f"line {i}" for i in range(6, 21)],  # the last 15, warnings left out
        ]
    assert log.read_text().count("UserWarning") == 20  # the log keeps everything


def test_an_output_is_written_whole_or_not_at_all(tmp_path):
    out = tmp_path / "score.txt"
    out.write_text("earlier\n")

    def write_output(*cmd):
        argv = [sys.executable, "-m", "recipes.train.stages", "--recipe", "demo", "write-output", out, *cmd]
        return subprocess.run(argv, capture_output=True, text=True, env=env(PYTHONPATH=str(ROOT)))

    failed = write_output("sh", "-c", "echo half; exit 4")
    assert failed.returncode == 4 and out.read_text() == "earlier\n"
    assert [p.name for p in tmp_path.iterdir()] == ["score.txt"]  # no temporary file left either
    done = write_output("echo", "BLEU = 1.0")
    assert done.returncode == 0 and done.stdout == "BLEU = 1.0\n" and out.read_text() == "BLEU = 1.0\n"


# ------------------------------------------------------------------------------------------------
# stage markers: redone stages, stale checkpoints, --stage N
# ------------------------------------------------------------------------------------------------

# two stages as the recipes declare them; "train" resumes as fairseq-train does: from the
# checkpoint_last.pt in its directory if there is one. KEY: the options; DIE_IN_TRAIN=1: the run
# dies inside "train" after its first checkpoint, as a kill would leave it.
STAGES_DRIVER = r"""
set -euo pipefail
RECIPE=driver
source "$1"
WORK=$2 MARKERS=$2/.stages STAGE_IDS=(data train)
STAGE_CHECKPOINTS=([train]="$WORK/ckpt")
stage_key() { printf 'key=%s\n' "$KEY"; }
stage_data() { echo "data $KEY" > "$WORK/data"; }
stage_train() {
  if [[ -f $WORK/ckpt/checkpoint_last.pt ]]; then
    echo "train resumed from $(< "$WORK/ckpt/checkpoint_last.pt")"
  else
    mkdir -p "$WORK/ckpt" && echo "$(< "$WORK/data")" > "$WORK/ckpt/checkpoint_last.pt" && echo "train afresh"
  fi
  [[ ${DIE_IN_TRAIN:-0} == 0 ]] || exit 9
}
[[ ${FIRST:-data} == data ]] || require_finished_before "$FIRST"
[[ ${FIRST:-data} == train ]] || run_stage data data "" stage_data
run_stage train train "" stage_train
"""


def _stages(work, key, **extra):
    driver = work.parent / "driver.sh"
    driver.write_text(STAGES_DRIVER)
    environ = env(KEY=key, PYTHONPATH=str(ROOT), **{k: str(v) for k, v in extra.items()})
    return subprocess.run(
        ["bash", driver, RECIPES / "train" / "stages.sh", work], capture_output=True, text=True, env=environ
    )


def _stale(work):
    return {p.name.split(".stale-")[0]: (p / "checkpoint_last.pt").read_text() for p in work.glob("ckpt.stale-*")}


def test_a_redone_stage_never_lets_a_later_one_resume_from_its_old_checkpoints(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    # an interrupted stage resumes from its own checkpoints
    died = _stages(work, "a", DIE_IN_TRAIN=1)
    assert died.returncode == 9 and "train afresh" in died.stdout
    again = _stages(work, "a")
    assert again.returncode == 0 and "train resumed from data a" in again.stdout, again.stderr
    # a stage before it redone (its marker deleted): the later stage's checkpoints are set aside, kept
    (work / ".stages" / "data.done").unlink()
    redo = _stages(work, "a")
    assert redo.returncode == 0 and "train afresh" in redo.stdout, redo.stderr
    assert "stage train's checkpoints were made from an earlier result of stage data: moved to" in redo.stderr
    assert _stale(work) == {"ckpt": "data a\n"}
    # the stage itself redone with other options after its marker went: its own are set aside
    (work / ".stages" / "train.done").unlink()
    (work / "data").write_text("data b\n")
    other = _stages(work, "b", FIRST="train")
    assert other.returncode == 2 and "--stage train: stage data has not finished" not in other.stderr
    assert "stage data was completed with other options (key=a)" in other.stderr  # data's marker says a
    (work / ".stages" / "data.done").write_text("key=b\n")
    other = _stages(work, "b", FIRST="train")
    assert other.returncode == 0 and "train afresh" in other.stdout, other.stderr
    assert "stage train's checkpoints were of a run that finished before: moved to" in other.stderr
    assert (
        len(list(work.glob("ckpt.stale-*"))) == 2 and (work / "ckpt" / "checkpoint_last.pt").read_text() == "data b\n"
    )
    # an interrupted stage restarted with other options: its checkpoints are set aside as well
    (work / ".stages" / "train.done").unlink()
    _stages(work, "b", FIRST="train", DIE_IN_TRAIN=1)
    (work / ".stages" / "data.done").write_text("key=c\n")
    moved = _stages(work, "c", FIRST="train")
    assert moved.returncode == 0 and "made with other options (key=b)" in moved.stderr, moved.stderr


def test_stage_n_needs_the_stages_before_it_finished(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    result = _stages(work, "a", FIRST="train")
    assert result.returncode == 2 and not (work / "ckpt").exists()
    assert result.stderr.splitlines() == [
        f"driver: error: --stage train: stage data has not finished in {work} (no {work}/.stages/data.done); "
        "run from --stage data"
    ]
    for script, args in ((ENDE, ("--stage", "3")), (XNLI, ("--stage", "4", "--gpus", "0"))):
        fresh = tmp_path / script.stem
        result = recipe(script, *args, "--work-dir", fresh, cwd=tmp_path)
        assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
        assert result.stderr.startswith(f"{script.name}: error: --stage {args[1]}: stage 1 has not finished in {fresh}")
        assert not (fresh / "checkpoints").exists()
        listing = recipe(script, *args, "--work-dir", fresh, "--dry-run", cwd=tmp_path)
        assert listing.returncode == 0 and f"# --stage {args[1]}: stage 1 has not finished" in listing.stdout


# ------------------------------------------------------------------------------------------------


def test_dry_run_skips_finished_stages_and_refuses_other_options(tmp_path):
    work = tmp_path / "w"
    (work / ".stages").mkdir(parents=True)
    (work / ".stages" / "1.done").write_text("recipe=wmt16_en_de.sh init=pretrain mono=5000000 supervised=0\n")
    commands, text = dry_run(tmp_path, ENDE, "--work-dir", work, "--stop-stage", "2")
    assert "# stage 1: download: done before" in text and "# stage 2: preprocess" in text
    assert find(commands, "curl") == [] and len(find(commands, "xlm-fairseq-prepare")) == 1
    # a dry run changes no marker, and notes what a real run would do
    assert "# stage 2 done:" in text and sorted(p.name for p in (work / ".stages").iterdir()) == ["1.done"]

    result = recipe(ENDE, "--dry-run", "--work-dir", work, "--mono-sentences", "7", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout.count("\n") <= 3
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("wmt16_en_de.sh: error: stage 1 was completed with other options")
    assert "mono=7" in lines[0] and "--work-dir" in lines[0]


def test_a_marker_cut_short_is_never_read_as_finished(tmp_path):
    """The engine writes a marker whole (a temporary file renamed): only a complete key counts."""
    work = tmp_path / "w"
    (work / ".stages").mkdir(parents=True)
    (work / ".stages" / "1.done").write_text("recipe=wmt16_en_de.sh init=pre")  # what a kill mid-write would leave
    result = recipe(ENDE, "--dry-run", "--work-dir", work, "--stop-stage", "1", cwd=tmp_path)
    assert result.returncode == 2 and "stage 1 was completed with other options (recipe=wmt16_en_de.sh init=pre)" in (
        result.stderr
    )


@pytest.mark.parametrize("script", [ENDE, XNLI], ids=lambda p: p.name)
def test_every_stage_of_a_dry_run_is_listed_in_order(tmp_path, script):
    _, text = dry_run(tmp_path, script, *(["--model", tmp_path / "m.pt"] if script == XNLI else []))
    headers = [line for line in text.splitlines() if line.startswith("# stage ") and " done:" not in line]
    assert [h.split(":")[0] for h in headers] == [f"# stage {n}" for n in range(1, 6)]
    marked = [line.split(":")[0] for line in text.splitlines() if " done: " in line]
    assert marked == [f"# stage {n} done" for n in range(1, 6)]  # each marked after its commands
