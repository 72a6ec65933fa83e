"""recipes/experiments/tables.py: a table between markers is written from the records it names, and a table
that differs from them, a record without its date, machine, commit or command, or a marker naming no
record, is reported by file."""

import json

import pytest

from recipes.experiments import tables

RUNS = [
    {
        "id": "a",
        "date": "2026-01-02",
        "machine": "cpu",
        "commit": "abc",
        "command": "x --fast",
        "figures": {"bleu": 9.25, "lines": 1500},
        "bleu": [{"set": "test", "direction": "de-en", "bleu": 3.0}],
    },
    {
        "id": "b",
        "date": "2026-01-01",
        "machine": "gpu",
        "commit": "def",
        "command": "x",
        "figures": {"bleu": 11.0},
        "bleu": [],
    },
]
SPEC = {
    "from": "results/runs.jsonl",
    "sort": "date",
    "columns": [
        ["run", "id"],
        ["BLEU", "figures.bleu"],
        ["lines", "figures.lines"],
        ["test de-en", "bleu[set=test,direction=de-en].bleu", "{:.1f}"],
    ],
}


@pytest.fixture
def root(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RUNS))
    (tmp_path / "doc.md").write_text(
        f"Before.\n\n<!-- table {json.dumps(SPEC)} -->\nstale\n<!-- /table -->\n\nAfter.\n"
    )
    return tmp_path


def test_a_table_is_written_from_its_records(root):
    doc = root / "doc.md"
    assert tables.stale([doc], root) == [str(doc)]
    text = tables.regenerate(doc.read_text(), "doc.md", root)
    assert text.startswith("Before.\n\n<!-- table ") and text.endswith("<!-- /table -->\n\nAfter.\n")
    body = text.split(" -->\n", 1)[1].split("<!-- /table -->")[0]
    assert body == (
        "| run | BLEU | lines | test de-en |\n"
        "|---|---:|---:|---:|\n"
        "| b | 11 | — | — |\n"  # sorted by date; what a record lacks is a dash
        "| a | 9.25 | 1,500 | 3.0 |\n"
    )
    doc.write_text(text)
    assert tables.stale([doc], root) == []


def test_numbers_keep_their_sign_and_digits():
    assert [tables.cell(v, None) for v in (-0.3, -1234.5, 0.0, 2.0, 12345, 1e-05)] == [
        "-0.3",
        "-1,234.5",
        "0",
        "2",
        "12,345",
        "1e-05",
    ]


def test_where_selects_records(root):
    spec = dict(SPEC, where={"machine": ["gpu", "tpu"]})
    assert tables.render(spec, root).count("\n") == 3  # header, rule, one row
    with pytest.raises(tables.TableError, match="no record of results/runs.jsonl matches"):
        tables.render(dict(SPEC, where={"machine": "tpu"}), root)


def test_a_record_needs_its_provenance(root):
    bad = dict(RUNS[0])
    del bad["command"]
    (root / "results" / "runs.jsonl").write_text(json.dumps(RUNS[1]) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(tables.TableError, match=r"results/runs.jsonl line 2: a record needs command"):
        tables.render(SPEC, root)


def test_a_missing_results_file_names_the_document(root):
    doc = root / "doc.md"
    doc.write_text(doc.read_text().replace("results/runs.jsonl", "results/gone.jsonl"))
    with pytest.raises(tables.TableError, match=r"doc.md: results/gone.jsonl: no such results file"):
        tables.regenerate(doc.read_text(), "doc.md", root)


def test_the_command_checks_and_rewrites(root, monkeypatch, capsys):
    monkeypatch.setattr(tables, "ROOT", root)
    doc = str(root / "doc.md")
    assert tables.main(["--check", doc]) == 1
    assert "a table differs from its records" in capsys.readouterr().out
    assert tables.main([doc]) == 0
    assert tables.main(["--check", doc]) == 0
