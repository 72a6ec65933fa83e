"""Classification data: one TSV file per split and language, ``{split}.{lang}.tsv``, with a header
line naming the columns ``id``, ``label`` and ``text`` (and ``text_b`` for sentence pairs, as in
XNLI); any order, other columns ignored. Raw text, one row a line, no quoting (a tab never occurs
inside a field). Read by ``--task xlm_classification`` and ``xlm-fairseq-classify``; XNLI-1.0 and
MultiNLI are converted into it by ``xlm-fairseq-xnli``.

Every problem is one :class:`UserError` naming the file (and line): missing file, invalid UTF-8,
no header, a missing column, a row whose field count differs from the header's, an empty text,
a file without rows."""

import dataclasses
import os
from typing import Dict, Iterator, List, Optional, Tuple

from preprocess.errors import UserError
from preprocess.inputs import decode_utf8_line
from preprocess.layout import classification_file

COLUMNS = ("id", "label", "text")
PAIR_COLUMN = "text_b"


@dataclasses.dataclass
class ClassificationRows:
    """The rows of one file, column by column (``labels``/``texts_b`` None when the file has none)."""

    path: str
    ids: List[str]
    labels: Optional[List[str]]
    texts: List[str]
    texts_b: Optional[List[str]]

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def is_pair(self) -> bool:
        return self.texts_b is not None


def tsv_path(directory: str, split: str, lang: str) -> str:
    return os.path.join(directory, classification_file(split, lang))


def split_langs(directory: str, split: str) -> List[str]:
    """The languages that have a ``{split}.{lang}.tsv`` in ``directory``, sorted."""
    prefix, suffix = f"{split}.", ".tsv"
    names = os.listdir(directory) if os.path.isdir(directory) else []
    langs = [n[len(prefix) : -len(suffix)] for n in names if n.startswith(prefix) and n.endswith(suffix)]
    return sorted(lang for lang in langs if lang and "." not in lang)


def _lines(path: str) -> Iterator[Tuple[int, str]]:
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            yield lineno, decode_utf8_line(raw.rstrip(b"\n").rstrip(b"\r"), path, lineno)


def read_tsv(path: str, need_label: bool = True) -> ClassificationRows:
    """The rows of ``path``; ``need_label=False`` accepts a file without a ``label`` column (text to
    classify)."""
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file")
    lines = _lines(path)
    first = next(lines, None)
    if first is None or not first[1].strip():
        raise UserError(f"{path}: empty file; expected a header line naming the columns {', '.join(COLUMNS)}")
    header = first[1].lstrip("\ufeff").split("\t")
    column: Dict[str, int] = {}
    for i, name in enumerate(header):
        column.setdefault(name.strip(), i)
    required = [c for c in COLUMNS if need_label or c != "label"]
    missing = [c for c in required if c not in column]
    if missing:
        raise UserError(
            f"{path}: no '{missing[0]}' column in the header (it has: {', '.join(header)}); "
            f"expected {', '.join(COLUMNS)} [, {PAIR_COLUMN}] separated by tabs"
        )
    has_label, is_pair = "label" in column, PAIR_COLUMN in column
    rows = ClassificationRows(path, [], [] if has_label else None, [], [] if is_pair else None)
    for lineno, line in lines:
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != len(header):
            raise UserError(f"{path}:{lineno}: {len(fields)} tab-separated fields, the header has {len(header)}")
        text = fields[column["text"]].strip()
        text_b = fields[column[PAIR_COLUMN]].strip() if is_pair else None
        for name, value in (("text", text), (PAIR_COLUMN, text_b)):
            if value is not None and not value:
                raise UserError(f"{path}:{lineno}: empty '{name}'")
        rows.ids.append(fields[column["id"]].strip())
        rows.texts.append(text)
        if is_pair:
            rows.texts_b.append(text_b)
        if has_label:
            label = fields[column["label"]].strip()
            if not label:
                raise UserError(f"{path}:{lineno}: empty 'label'")
            rows.labels.append(label)
    if not rows.ids:
        raise UserError(f"{path}: no rows after the header")
    return rows


def write_tsv(f, ids, labels, texts, texts_b=None) -> int:
    """Rows in this layout to the open text file ``f`` (tabs and newlines inside fields become
    spaces); returns how many were written."""
    columns = ["id", "label", "text"] + ([PAIR_COLUMN] if texts_b is not None else [])
    f.write("\t".join(columns) + "\n")
    n = 0
    for row in zip(ids, labels, texts, *([texts_b] if texts_b is not None else [])):
        f.write("\t".join(" ".join(str(v).split()) for v in row) + "\n")
        n += 1
    return n
