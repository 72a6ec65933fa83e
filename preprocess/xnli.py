"""XNLI-1.0 and MultiNLI (or XNLI-MT's English training file) -> the classification layout of
``preprocess/classification.py``, what ``--task xlm_classification`` reads::

    xlm-fairseq-xnli OUT --xnli XNLI-1.0 --mnli multinli_1.0 [--langs en,de,fr] [--force]

writes ``OUT/train.en.tsv`` (MultiNLI's training pairs, ``multinli_1.0_train.txt``; or, as XLM's
``get-data-xnli.sh`` takes it, ``--mnli-train XNLI-MT-1.0/multinli/multinli.train.en.tsv``) and
``OUT/{valid,test}.{lang}.tsv`` (``xnli.dev.tsv`` / ``xnli.test.tsv``, one file per language):
columns ``id``, ``label`` (entailment / neutral / contradiction; XNLI-MT's "contradictory" is
renamed as XLM does), ``text`` (premise) and ``text_b`` (hypothesis), raw text: the model's own
pipeline tokenises it. Rows without a gold label (``-``) or with an empty sentence are left out
and counted. OUT appears whole or not at all; an existing OUT is replaced only with ``--force``."""

import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from preprocess.classification import tsv_path, write_tsv
from preprocess.errors import ArgumentParser, UserError, run_command
from preprocess.files import staged_dir
from preprocess.langs import parse_langs

LABELS = ("entailment", "neutral", "contradiction")
RENAMED = {"contradictory": "contradiction"}  # XNLI-MT's spelling (XLM's get-data-xnli.sh)
MNLI_TRAIN = "multinli_1.0_train.txt"
XNLI_SPLITS = {"valid": "xnli.dev.tsv", "test": "xnli.test.tsv"}

Rows = Tuple[List[str], List[str], List[str], List[str]]  # ids, labels, premises, hypotheses


def _read_table(path: str, wanted: Dict[str, Sequence[str]]) -> Tuple[Dict[str, int], List[List[str]]]:
    """(column -> index, rows) of a tab-separated file with a header; ``wanted`` maps our names to
    the header names that may hold them (``id`` may be missing: rows are then numbered)."""
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file")
    with open(path, encoding="utf-8", errors="strict", newline="\n") as f:
        try:
            lines = f.read().split("\n")
        except UnicodeDecodeError as e:
            raise UserError(f"{path}: invalid UTF-8 ({e})") from None
    header = lines[0].rstrip("\r").split("\t") if lines else []
    columns = {}
    for ours, names in wanted.items():
        found = next((header.index(n) for n in names if n in header), None)
        if found is None and ours != "id":
            raise UserError(f"{path}: no {' or '.join(names)} column in the header (has: {', '.join(header)})")
        if found is not None:
            columns[ours] = found
    return columns, [line.rstrip("\r").split("\t") for line in lines[1:] if line.strip()]


def read_pairs(path: str, lang: Optional[str] = None) -> Tuple[Dict[str, Rows], int]:
    """The labelled pairs of an XNLI or MultiNLI file, per language (MultiNLI: all ``en``), and
    how many rows were left out."""
    wanted = {"label": ("gold_label", "label"), "text": ("sentence1", "premise"), "text_b": ("sentence2", "hypo")}
    wanted["id"] = ("pairID",)
    if lang is None:
        wanted["lang"] = ("language",)
    columns, table = _read_table(path, wanted)
    out: Dict[str, Rows] = {}
    skipped = 0
    for n, fields in enumerate(table, 1):
        if len(fields) <= max(columns.values()):
            raise UserError(f"{path}:{n + 1}: {len(fields)} fields, too few for the header")
        label = RENAMED.get(fields[columns["label"]].strip(), fields[columns["label"]].strip())
        premise, hypothesis = (" ".join(fields[columns[c]].split()) for c in ("text", "text_b"))
        if label not in LABELS or not premise or not hypothesis:
            skipped += 1
            continue
        row_lang = lang or fields[columns["lang"]].strip()
        ids, labels, premises, hypotheses = out.setdefault(row_lang, ([], [], [], []))
        ids.append(fields[columns["id"]].strip() if "id" in columns else str(n))
        labels.append(label)
        premises.append(premise)
        hypotheses.append(hypothesis)
    return out, skipped


def convert(out_dir: str, xnli_dir: str, mnli: Optional[str], langs: Optional[List[str]], force: bool) -> Dict:
    if os.path.exists(out_dir) and not force:
        raise UserError(f"{out_dir} exists; give --force to replace it")
    if mnli and os.path.isdir(mnli):
        mnli = os.path.join(mnli, MNLI_TRAIN)
    splits = {split: read_pairs(os.path.join(xnli_dir, name)) for split, name in XNLI_SPLITS.items()}
    if mnli:
        splits["train"] = read_pairs(mnli, "en")
    available = sorted(splits["valid"][0])
    for lang in langs or []:
        if lang not in available:
            raise UserError(f"--langs: '{lang}' is not an XNLI language ({','.join(available)})")
    written = {}
    with staged_dir(out_dir) as tmp:
        for split, (per_lang, skipped) in splits.items():
            for lang, (ids, labels, premises, hypotheses) in sorted(per_lang.items()):
                if langs and lang not in langs:
                    continue
                with open(tsv_path(tmp, split, lang), "w", encoding="utf-8", newline="\n") as f:
                    written[f"{split}.{lang}"] = write_tsv(f, ids, labels, premises, hypotheses)
            written[f"{split} left out"] = skipped
    return written


def main(argv=None) -> int:
    p = ArgumentParser(
        name="xnli",
        prog="xlm-fairseq-xnli",
        description=__doc__.split("\n\n")[0],
        examples=["xlm-fairseq-xnli data/xnli --xnli XNLI-1.0 --mnli multinli_1.0 --langs en,de,fr"],
    )
    p.add_argument("out_dir", metavar="OUT", help="the directory to write (the classification layout)")
    p.add_argument("--xnli", required=True, help="the XNLI-1.0 directory (xnli.dev.tsv, xnli.test.tsv)")
    p.add_argument("--mnli", help=f"the multinli_1.0 directory or its {MNLI_TRAIN}")
    p.add_argument("--mnli-train", help="or XNLI-MT-1.0/multinli/multinli.train.en.tsv (XLM's choice)")
    p.add_argument("--langs", help="languages to write (default: all 15)")
    p.add_argument("--force", action="store_true", help="replace an existing OUT")

    def run(argv):
        args = p.parse_args(argv)
        if args.mnli and args.mnli_train:
            raise UserError("give --mnli or --mnli-train, not both")
        langs = parse_langs(args.langs, "--langs") if args.langs else None
        written = convert(args.out_dir, args.xnli, args.mnli or args.mnli_train, langs, args.force)
        for name, n in written.items():
            print(f"{name}: {n} rows")
        return 0

    return run_command("xnli", run, argv)


if __name__ == "__main__":
    sys.exit(main())
