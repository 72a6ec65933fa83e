"""python -m recipes.experiments.budget: runs of one train.sh command at several --minutes as a table and a
figure of test BLEU against the minutes beside copying; runs of different commands are refused."""

import json

import pytest

from recipes.experiments import budget
from recipes.experiments.lexicon import lever_run
from tests.recipe_support import ROOT

RECORD = ROOT / "recipes" / "results" / "train-2026-12-07-budget-enro-30.json"


def write(tmp_path, minutes, bleu, command=None):
    report = json.loads(RECORD.read_text(encoding="utf-8"))
    report["minutes"] = float(minutes)
    report["command"] = (command or report["command"]).replace("--minutes 30", f"--minutes {minutes}")
    for row, value in zip(report["bleu"], bleu):
        row["bleu"] = value
    path = tmp_path / f"budget-{minutes}-{bleu[0]}.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    return path


def test_runs_by_budget_and_medians(tmp_path, capsys):
    paths = [
        write(tmp_path, 120, (20.0, 25.0)),
        write(tmp_path, 30, (14.47, 19.44)),
        write(tmp_path, 120, (22.0, 26.0)),
    ]
    budget.main([*map(str, paths), "--figure", str(tmp_path / "budget.png")])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and ".json" in line]
    assert [row.split(" | ")[0] for row in rows] == ["| 30", "| 120", "| 120"]  # budget order
    assert "| 128 x 3 | AMD EPYC x 2 | 5867 / 3135 | en-ro 14.47 (2.34) · ro-en 19.44 (2.34) |" in rows[0]
    runs = [lever_run(json.loads(p.read_text()), p.name) for p in paths]
    assert budget.medians(runs) == {"en-ro": [(30.0, 14.47), (120.0, 21.0)], "ro-en": [(30.0, 19.44), (120.0, 25.5)]}
    assert (tmp_path / "budget.png").stat().st_size > 10_000


def test_runs_of_another_command_are_refused(tmp_path, capsys):
    other = write(tmp_path, 60, (1.0, 1.0), command="bash recipes/train.sh --pairs en-ro=x --minutes 30")
    with pytest.raises(SystemExit) as exit:
        budget.main([str(write(tmp_path, 30, (14.0, 19.0))), str(other)])
    assert exit.value.code == 2
    assert "REPORT: the runs are of different commands" in capsys.readouterr().err
