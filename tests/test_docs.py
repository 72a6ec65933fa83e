"""The READMEs and docs/ as a newcomer reads them: every table is what its records give, no dated
narrative or issue number outside the generated tables, the README finds install, quickstart, serving
and one's own languages early and indexes every page of docs/. (The commands the docs show:
test_commands.py.)"""

import re

import pytest
from conftest import ROOT

from recipes.experiments import tables

DOCUMENTS = [str(p.relative_to(ROOT)) for p in tables.documents(ROOT)]
DATE = re.compile(r"(?<![-/\w])20\d\d-\d\d-\d\d(?![-.\w])")  # a date in a file name names a record
ISSUE = re.compile(r"(?<![\w/&#])#\d+\b")


def prose(doc):
    """(line number, line) of a document, its generated tables (markers included) left out."""
    lines, inside = [], False
    for number, line in enumerate((ROOT / doc).read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("<!-- table "):
            inside = True
        elif line.startswith("<!-- /table -->"):
            inside = False
        elif not inside:
            lines.append((number, line))
    return lines


def test_the_documents_are_found():
    assert {"README.md", "recipes/README.md", "bench/README.md", "docs/serving.md"} <= set(DOCUMENTS)


def test_every_table_is_what_its_records_give():
    assert tables.stale(tables.documents(ROOT), ROOT) == [], "run: python -m recipes.experiments.tables"


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_no_dated_narrative_or_issue_number(doc):
    """Dates and issue numbers belong to records: a generated table may show them, the prose may not."""
    found = [f"{doc}:{n}: {line.strip()[:100]}" for n, line in prose(doc) if DATE.search(line) or ISSUE.search(line)]
    assert not found, found


def first_line(pattern, lines):
    return next(n for n, line in lines if re.search(pattern, line))


def test_readme_finds_the_newcomers_path_early():
    lines = prose("README.md")
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 220
    assert first_line(r"^    bash scripts/setup.sh", lines) < 100  # install
    assert first_line(r"^    TORCH_BUILD=cu", lines) < 100  # a GPU install
    assert first_line(r"recipes/quickstart.sh", lines) < 100
    whole = list(enumerate((ROOT / "README.md").read_text(encoding="utf-8").splitlines(), 1))
    assert first_line(r"^<!-- table .*quickstart", whole) < 100  # its expected result
    assert first_line(r"^    xlm-fairseq-export ", lines) < 100  # serving
    assert first_line(r"^    bash recipes/train.sh ", lines) < 150  # one's own languages


def test_readme_indexes_every_page_of_docs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\((docs/[\w-]+\.md)\)", readme))
    pages = {str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")}
    assert linked == pages, (sorted(pages - linked), sorted(linked - pages))


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_the_files_a_doc_names_exist(doc):
    """A path in backquotes that names a file of this repository (a .md, .py, .sh or results file) exists."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    named = set(
        re.findall(
            r"`((?:docs|recipes|bench|preprocess|xlm_fairseq|tests)/[\w/.-]+\.(?:md|py|sh|json|jsonl|png))`", text
        )
    )
    missing = sorted(p for p in named if not (ROOT / p).exists() and "*" not in p)
    assert not missing, missing


SECTION = re.compile(r"`((?:docs/[\w-]+|recipes/README|bench/README|preprocess/README)\.md)`\)?,? \(?\"([^\"]+)\"")


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_the_sections_a_doc_points_to_exist(doc):
    """`FILE.md`, "Section": a heading of FILE begins with that name."""
    text = (ROOT / doc).read_text(encoding="utf-8").replace("\n", " ")
    missing = []
    for path, name in SECTION.findall(text):
        headings = [
            h.lstrip("#").strip() for h in (ROOT / path).read_text(encoding="utf-8").splitlines() if h.startswith("#")
        ]
        if not any(h.startswith(name) for h in headings):
            missing.append(f'{path}, "{name}"')
    assert not missing, missing
