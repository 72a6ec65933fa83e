"""Monolingual text for unsupervised MT from monolingual files and a parallel corpus, with no pair left in.

    python -m recipes.lib.unpaired --mono-src MONO.en --mono-tgt MONO.de --pairs PREFIX --langs en,de --out DIR

Writes DIR/mono.en and DIR/mono.de: each monolingual file plus one half of the parallel corpus
(the source side of its first half, the target side of its second), as Lample et al. (2018) made
monolingual text from a parallel corpus. The sentences of a software manual recur across documents,
so a line of the second half may also be the translation of a line of the first: a target line is
dropped when any of its translations in the corpus is on the source side. What was kept and dropped
is printed on one line."""

import argparse
import sys
from collections import defaultdict
from pathlib import Path

from recipes.lib.experiments import read_lines


def read_or_exit(path: Path) -> list[str]:
    try:
        return read_lines(path)
    except (OSError, UnicodeDecodeError) as e:
        sys.exit(f"unpaired: {path}: {e}")


def unpaired(mono_src, mono_tgt, pairs_src, pairs_tgt):
    """(source lines, target lines, target lines dropped): no target line is a translation of a
    source line as far as the pairs tell."""
    half = len(pairs_src) // 2
    src = list(dict.fromkeys(mono_src + pairs_src[:half]))
    translations = defaultdict(set)  # target line -> its source lines anywhere in the corpus
    for s, t in zip(pairs_src, pairs_tgt):
        translations[t].add(s)
    on_source_side = set(src)
    candidates = list(dict.fromkeys(mono_tgt + pairs_tgt[half:]))
    tgt = [t for t in candidates if not translations[t] & on_source_side]
    return src, tgt, len(candidates) - len(tgt)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m recipes.lib.unpaired", description=__doc__.split("\n\n")[0])
    p.add_argument("--mono-src", type=Path, required=True, help="monolingual text in the first language of --langs")
    p.add_argument("--mono-tgt", type=Path, required=True, help="monolingual text in the second language")
    p.add_argument("--pairs", required=True, help="parallel corpus prefix: PREFIX.SRC and PREFIX.TGT, line-aligned")
    p.add_argument("--langs", required=True, help="SRC,TGT")
    p.add_argument("--out", type=Path, required=True, help="directory for mono.SRC and mono.TGT")
    args = p.parse_args(argv)
    langs = args.langs.split(",")
    if len(langs) != 2 or not all(langs) or langs[0] == langs[1]:
        p.error(f"--langs: two different languages, e.g. en,de (got {args.langs!r})")
    s, t = langs
    pairs_src, pairs_tgt = read_or_exit(Path(f"{args.pairs}.{s}")), read_or_exit(Path(f"{args.pairs}.{t}"))
    if len(pairs_src) != len(pairs_tgt):
        sys.exit(f"unpaired: --pairs: {args.pairs}.{s} has {len(pairs_src)} lines, {args.pairs}.{t} {len(pairs_tgt)}")
    src, tgt, dropped = unpaired(read_or_exit(args.mono_src), read_or_exit(args.mono_tgt), pairs_src, pairs_tgt)
    args.out.mkdir(parents=True, exist_ok=True)
    for lang, lines in ((s, src), (t, tgt)):
        (args.out / f"mono.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    kept = f"{len(src)} {s} lines, {len(tgt)} {t} lines"
    print(f"unpaired: {kept} ({dropped} {t} lines dropped as translations of {s} ones)")


if __name__ == "__main__":
    main()
