#!/usr/bin/env python3
"""Monolingual text and held-out parallel sets from parallel corpora, for unsupervised MT from monolingual
text alone (``recipes/train.sh --unsupervised --mono ... --test ...``) measured on documents it never saw.

    python recipes/data/make_unpaired_test.py en-ro --held-from PREFIX [--pairs PREFIX ...] --out DIR

``PREFIX`` names line-aligned ``PREFIX.SRC`` / ``PREFIX.TGT`` (``SRC-TGT`` the first argument). Writes:
  * ``DIR/test.SRC-TGT.{SRC,TGT}``: 5 % of ``--held-from``'s lines (at most 1,000) as blocks of 50 consecutive
    lines, documents when the file follows them (``recipes/train/corpus.py``'s blocks, as train.sh splits);
  * ``DIR/valid.SRC-TGT.{SRC,TGT}``: 2.5 % (at most 500) more, other blocks: a parallel valid set that the
    training run never reads (to measure how checkpoints chosen without it fare,
    ``python -m recipes.experiments.criterion``);
  * ``DIR/mono.SRC``, ``DIR/mono.TGT``: the unpaired halves of ``--held-from``'s other lines and of every
    ``--pairs`` corpus (``unpaired``: the source side of each first half, the target side of each second,
    without a target line whose translation is on the source side), no line of either held-out set.
The output is determined by the input files."""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from preprocess.errors import UserError  # noqa: E402
from recipes.train.corpus import keep_out, parse_pair, read_pairs, split_held_out, unpaired  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("pair", metavar="SRC-TGT", help="the languages, e.g. en-ro")
    p.add_argument("--held-from", required=True, metavar="PREFIX", help="the corpus the held-out sets come from")
    p.add_argument("--pairs", action="append", default=[], metavar="PREFIX", help="another corpus (repeatable)")
    p.add_argument("--out", type=Path, required=True, help="output directory")
    args = p.parse_args(argv)
    try:
        src, tgt = parse_pair(args.pair, "SRC-TGT")
        held = read_pairs(args.held_from, src, tgt, "--held-from")
        rest, valid, test = split_held_out(held, True, True)
        corpora = [rest] + [read_pairs(prefix, src, tgt, "--pairs") for prefix in args.pairs]
        corpora = [keep_out(c, [valid, test])[0] for c in corpora]
    except UserError as e:
        sys.exit(f"make_unpaired_test: error: {e}")
    mono, dropped = unpaired({}, corpora)
    args.out.mkdir(parents=True, exist_ok=True)

    def write(name, lines):
        (args.out / name).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")

    for split, pairs in (("test", test), ("valid", valid)):
        for lang in (src, tgt):
            write(f"{split}.{src}-{tgt}.{lang}", pairs.side(lang))
    for lang in (src, tgt):
        write(f"mono.{lang}", mono[lang])
    print(
        f"{args.out}: test {len(test)} and valid {len(valid)} pairs of {args.held_from}; mono.{src} "
        f"{len(mono[src])} lines, mono.{tgt} {len(mono[tgt])} ({dropped.get(tgt, 0)} dropped as translations "
        "of the other side)"
    )


if __name__ == "__main__":
    main()
