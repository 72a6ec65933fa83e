#!/usr/bin/env python3
"""Unpaired en/de text four times the quickstart sample's, for the `--unsupervised` anchor experiment.

    python recipes/data/make_unpaired.py --out DIR [--manpages de|both] [SHARED_DATA_DIR]

Writes DIR/unpaired.en and DIR/unpaired.de (recipes/README.md, "--unsupervised with anchors"):
  * English: the sample's mono.en and the English of the first half of its parallel text and of the
    shared manuals (SHARED_DATA_DIR/en-de/docs, the superset of the sample's docs.natural);
  * German: the sample's mono.de, the German of the second half, and SHARED_DATA_DIR/mono/manpages.de;
  * with --manpages both, SHARED_DATA_DIR/mono/manpages.en too. The German man pages translate many
    of the English ones, which the shared corpus does not align, so that text may hold pairs no
    check can drop; the default leaves the English pages out.
As recipes.train.corpus.unpaired does (the text of recipes/train.sh --unsupervised), a German line is
dropped when any of its translations in the manuals is among the English lines. No line is one of the
sample's valid or test lines (compared lower-cased, spaces collapsed) or has over MAX_WORDS words. The
output is determined by the input files.
"""

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from recipes.train.corpus import Pairs, unpaired  # noqa: E402

MAX_WORDS = 60
SAMPLE = ROOT / "recipes" / "data" / "en-de-docs"


def read_lines(path):
    return Path(path).read_text(encoding="utf-8").split("\n")[:-1]


def normal(line):
    return re.sub(r"\s+", " ", line.strip().lower())


def short(line):
    return line.strip() and len(line.split()) <= MAX_WORDS


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "data_dir",
        nargs="?",
        type=Path,
        default=ROOT.parent / "shared" / "data",
        help="shared corpus directory (default: ../shared/data next to the repository)",
    )
    p.add_argument("--out", type=Path, required=True, help="output directory for unpaired.en and unpaired.de")
    p.add_argument(
        "--manpages",
        choices=("de", "both"),
        default="de",
        help="the man-page sentences of German only (default), or of both languages",
    )
    args = p.parse_args()

    held_out = {
        normal(line)
        for split in ("valid", "test")
        for lang in ("en", "de")
        for line in read_lines(SAMPLE / f"{split}.en-de.{lang}")
    }
    docs = zip(read_lines(args.data_dir / "en-de/docs.en"), read_lines(args.data_dir / "en-de/docs.de"), strict=True)
    usable = [
        (e, d) for e, d in docs if short(e) and short(d) and normal(e) not in held_out and normal(d) not in held_out
    ]
    pairs = list(zip(read_lines(SAMPLE / "train.en-de.en"), read_lines(SAMPLE / "train.en-de.de"))) + usable
    mono = {"en": read_lines(SAMPLE / "mono.en"), "de": read_lines(SAMPLE / "mono.de")}
    text, dropped = unpaired(mono, [Pairs("en", "de", [e for e, _ in pairs], [d for _, d in pairs])])
    dropped = dropped.get("de", 0)
    args.out.mkdir(parents=True, exist_ok=True)
    for lang in ("en", "de"):
        if lang == "de" or args.manpages == "both":
            text[lang] += [line for line in read_lines(args.data_dir / f"mono/manpages.{lang}") if short(line)]
        lines = [line for line in dict.fromkeys(text[lang]) if line.strip() and normal(line) not in held_out]
        (args.out / f"unpaired.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        print(f"{args.out}/unpaired.{lang}: {len(lines):,} lines, {sum(len(line.split()) for line in lines):,} words")
    print(f"({dropped:,} German lines of the manuals dropped as translations of English ones)")


if __name__ == "__main__":
    main()
