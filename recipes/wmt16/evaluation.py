"""The evaluation steps of the WMT16 recipes' tools (``recipes/wmt16/tools.py``, the command
line): hypotheses out of fairseq-generate's output, references tokenised as ``preprocess/`` does
(:mod:`preprocess.text`), Romanian without diacritics, the BLEU table. Each ``cmd_*`` takes the
parsed arguments, writes its output whole or not at all and raises
:class:`preprocess.errors.UserError` on a user error."""

import json
import os
import re
import sys
from typing import Dict, Optional

from preprocess.errors import UserError
from preprocess.files import atomic_write
from preprocess.pipeline import require_pipeline
from preprocess.text import detokenize, normalize_and_tokenize, remove_romanian_diacritics
from recipes.wmt16.data import need_file


def _pipeline(data: Optional[str]):
    return require_pipeline(data, "--data") if data else None


def cmd_hyps(args) -> None:
    """H- lines -> tokenised hypotheses (the pieces joined by the data-bin's pipeline), D- lines (that
    pipeline's detokenised text, as fairseq-generate prints them) -> detokenised hypotheses."""
    need_file(args.gen, "fairseq-generate output")
    pipeline = _pipeline(args.data)
    hyps: Dict[int, str] = {}
    detoks: Dict[int, str] = {}
    with open(args.gen, encoding="utf-8") as f:
        for line in f:
            if line.startswith(("H-", "D-")):
                head, _, rest = line.rstrip("\n").partition("\t")
                _, _, text = rest.partition("\t")
                (hyps if line[0] == "H" else detoks)[int(head[2:])] = text
    n = max(hyps) + 1 if hyps else 0
    if args.expect_lines_of:
        need_file(args.expect_lines_of, "reference")
        with open(args.expect_lines_of, "rb") as f:
            expected = sum(1 for _ in f)
        missing = [i for i in range(expected) if i not in hyps]
        if missing or n > expected:
            raise UserError(
                f"{args.gen}: {len(hyps)} hypotheses for the {expected} sentences of "
                f"{args.expect_lines_of} ({len(missing)} missing, first id {missing[0] if missing else '-'}); "
                "was a sentence skipped as too long?"
            )
        n = expected
    with atomic_write(args.out_tok) as tok, atomic_write(args.out_detok) as detok:
        for i in range(n):
            text = hyps.get(i, "")
            if pipeline is not None:
                text = pipeline.join_text(text)
            tok.write(text + "\n")
            detok.write((detoks[i] if pipeline is not None and i in detoks else detokenize(text, args.lang)) + "\n")
    print(f"{args.out_detok}: {n} hypotheses ({args.lang}, detokenised); {args.out_tok}: tokenised")


def cmd_tokenize_ref(args) -> None:
    need_file(args.ref, "reference")
    pipeline = _pipeline(args.data)
    with open(args.ref, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    with atomic_write(args.out) as out:
        if pipeline is not None:  # the words of the data-bin's pipeline (its Romanian and lowercasing too)
            tokenized = [pipeline.tokenize(line, args.lang) for line in lines]
        else:
            tokenized = normalize_and_tokenize(lines, args.lang, args.ro_remove_diacritics)
        for line in tokenized:
            out.write(line + "\n")
    print(f"{args.out}: {len(lines)} reference lines tokenised as preprocess/ does ({args.lang})")


def cmd_strip_diacritics(args) -> None:
    need_file(args.ref, "reference")
    with open(args.ref, encoding="utf-8") as f, atomic_write(args.out) as out:
        n = 0
        for line in f:
            out.write(remove_romanian_diacritics(line.rstrip("\n")) + "\n")
            n += 1
    print(f"{args.out}: {n} lines without Romanian diacritics")


def _read_score(path: str) -> Optional[str]:
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        text = f.read().strip()
    m = re.search(r"=\s*([0-9.]+)", text)
    return m.group(1) if m else None


def cmd_summary(args) -> None:
    """The table of stage 5: per direction, tokenised BLEU greedy (XLM's logged test BLEU) and at beam
    5, sacreBLEU at beam 5 (and without diacritics into Romanian), the paper's number."""
    paper = json.loads(args.paper) if args.paper else {}
    rows = []
    for direction in args.directions:
        d = os.path.join(args.eval_dir, direction)
        rows.append(
            (
                direction,
                _read_score(os.path.join(d, "beam1", "tokenized_bleu.txt")),
                _read_score(os.path.join(d, "beam5", "tokenized_bleu.txt")),
                _read_score(os.path.join(d, "beam5", "sacrebleu.txt")),
                _read_score(os.path.join(d, "beam5", "sacrebleu.nodiacritics.txt")),
                paper.get(direction),
            )
        )
    show_nodiac = any(r[4] is not None for r in rows)
    header = (
        ["direction", "tokenised BLEU greedy (XLM's)", "tokenised BLEU beam 5", "sacreBLEU beam 5 (detok, raw ref)"]
        + (["sacreBLEU beam 5 (ref w/o diacritics)"] if show_nodiac else [])
        + ["paper (tokenised)"]
    )
    table = [header]
    for direction, greedy, tok, sacre, nodiac, ref in rows:
        row = [direction, greedy or "-", tok or "-", sacre or "-"] + ([nodiac or "-"] if show_nodiac else [])
        table.append(row + [str(ref) if ref else "-"])
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]
    text = "\n".join(lines) + "\n"
    with atomic_write(os.path.join(args.eval_dir, "summary.txt")) as out:
        out.write(text)
    sys.stdout.write(text)
