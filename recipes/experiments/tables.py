"""The tables of the READMEs and docs/, generated from the results records.

A measured run is a record: a JSON object with at least ``date``, ``machine``, ``commit``, ``command``
and its figures. Records live in ``recipes/results/`` and ``bench/results/``, one run per ``.json``
file or one per line of a ``.jsonl`` file. A table in a markdown file is written between two markers,
the first naming what it shows as JSON::

    <!-- table {"from": "recipes/results/quickstart.jsonl", "where": {"current": true},
               "columns": [["run", "id"], ["BLEU de→en", "figures.bleu_de_en", "{:.1f}"]]} -->
    (generated)
    <!-- /table -->

``from``: paths or globs relative to the repository root; ``where``: a record's path and the value it
must hold (a list: one of them); ``sort``: a path to order rows by; ``columns``: header, path and an
optional format. A path is dot-separated keys; ``name[key=value,...]`` picks the first element of a
list whose keys hold those values (``bleu[set=test,direction=de-en].bleu``). Numbers without a format
are written as stored, thousands separated.

    python -m recipes.experiments.tables            # rewrite every table of the documents
    python -m recipes.experiments.tables --check    # exit 1 naming each table that differs from its records
    python -m recipes.experiments.tables FILE.md    # only these files (any path)
"""

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [
    "README.md",
    "preprocess/README.md",
    "recipes/README.md",
    "recipes/data/README.md",
    "bench/README.md",
    "docs/*.md",
]
REQUIRED = ("date", "machine", "commit", "command")
TABLE = re.compile(r"(<!-- table (\{.*?\}) -->\n)(.*?)(<!-- /table -->)", re.S)
STEP = re.compile(r"^([^\[\]]+)(?:\[(.+)\])?$")


class TableError(ValueError):
    pass


def documents(root: Path = ROOT) -> List[Path]:
    return sorted({p for pattern in DOCUMENTS for p in root.glob(pattern)})


def load_records(spec_from, root: Path = ROOT) -> List[Dict[str, Any]]:
    """Every record of the files ``spec_from`` names, in file then line order; each checked for the
    fields a record must have."""
    patterns = [spec_from] if isinstance(spec_from, str) else list(spec_from)
    records = []
    for pattern in patterns:
        paths = sorted(root.glob(pattern))
        if not paths:
            raise TableError(f"{pattern}: no such results file")
        for path in paths:
            text = path.read_text(encoding="utf-8")
            if path.suffix == ".jsonl":
                rows = [(n, json.loads(line)) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
            else:
                rows = [(None, json.loads(text))]
            for n, record in rows:
                where = f"{path.relative_to(root)}" + (f" line {n}" if n else "")
                missing = [k for k in REQUIRED if k not in record]
                if missing:
                    raise TableError(f"{where}: a record needs {', '.join(missing)}")
                records.append(record)
    return records


def lookup(record: Any, path: str) -> Any:
    value = record
    for part in path.split("."):
        m = STEP.match(part)
        if not m:
            raise TableError(f"bad path {path!r}")
        key, selector = m.groups()
        value = value.get(key) if isinstance(value, dict) else None
        if selector is not None and isinstance(value, list):
            wanted = dict(kv.split("=", 1) for kv in selector.split(","))
            value = next((v for v in value if all(str(v.get(k)) == w for k, w in wanted.items())), None)
        if value is None:
            return None
    return value


def cell(value: Any, fmt: Optional[str]) -> str:
    if value is None:
        return "—"
    if fmt:
        return fmt.format(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if "e" in repr(value):
            return repr(value)
        whole, _, frac = repr(abs(value)).partition(".")
        return ("-" if value < 0 else "") + f"{int(whole):,}" + (f".{frac}" if frac != "0" else "")
    if isinstance(value, list):
        return ", ".join(cell(v, None) for v in value)
    return str(value)


def matches(record: Dict[str, Any], where: Dict[str, Any]) -> bool:
    for path, wanted in where.items():
        value = lookup(record, path)
        if isinstance(wanted, list):  # one of them
            if value not in wanted:
                return False
        elif value != wanted:
            return False
    return True


def render(spec: Dict[str, Any], root: Path = ROOT) -> str:
    records = [r for r in load_records(spec["from"], root) if matches(r, spec.get("where", {}))]
    if not records:
        raise TableError(f"no record of {spec['from']} matches {spec.get('where')}")
    if "sort" in spec:
        records.sort(key=lambda r: (lookup(r, spec["sort"]) is None, lookup(r, spec["sort"])))
    columns = spec["columns"]
    right = [any(isinstance(lookup(r, c[1]), (int, float)) for r in records) for c in columns]
    lines = ["| " + " | ".join(c[0] for c in columns) + " |"]
    lines.append("|" + "|".join("---:" if r else "---" for r in right) + "|")
    for record in records:
        row = [cell(lookup(record, c[1]), c[2] if len(c) > 2 else None) for c in columns]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def regenerate(text: str, where: str, root: Path = ROOT) -> str:
    def one(m):
        try:
            spec = json.loads(m.group(2))
        except json.JSONDecodeError as e:
            raise TableError(f"{where}: a table's marker is not JSON: {e}") from None
        try:
            return m.group(1) + render(spec, root) + m.group(4)
        except TableError as e:
            raise TableError(f"{where}: {e}") from None

    return TABLE.sub(one, text)


def stale(paths: Iterable[Path], root: Path = ROOT) -> List[str]:
    """The documents whose tables differ from what their records give."""
    texts = {p: p.read_text(encoding="utf-8") for p in paths}
    return [str(p) for p, text in texts.items() if regenerate(text, str(p), root) != text]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recipes.experiments.tables", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say which documents' tables are stale (exit 1)")
    parser.add_argument("files", nargs="*", type=Path, help="markdown files (default: the READMEs and docs/*.md)")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.files] or documents(ROOT)
    try:
        if args.check:
            bad = stale(paths, ROOT)
            for path in bad:
                print(f"tables: {path}: a table differs from its records; run python -m recipes.experiments.tables")
            return 1 if bad else 0
        for path in paths:
            text = path.read_text(encoding="utf-8")
            new = regenerate(text, str(path), ROOT)
            if new != text:
                path.write_text(new, encoding="utf-8")
                print(f"tables: {path} rewritten")
    except (TableError, json.JSONDecodeError) as e:
        print(f"tables: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
