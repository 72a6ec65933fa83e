"""Word-by-word pseudo pairs from a lexicon induced without pairs, as anchors for unsupervised MT.

    python -m recipes.train.word_by_word --mono MONO.en --mono MONO.de --langs en,de --out PREFIX

The lexicon is ``preprocess/lexicon.py``'s (``xlm-fairseq-lexicon induce``): co-occurrence counts over a
dictionary that starts from the strings spelled alike and grows by mutual CSLS neighbours. Every line is
then translated word by word: PREFIX.SRC/PREFIX.TGT pair each line of each language with its word-by-word
translation (one side real, the other made here), which TLM reads as pairs (Lample et al. 2018 started
from word-by-word translation too). No pair of the corpus is read; ``train.sh --unsupervised
--lexicon`` makes the same pairs inside the run."""

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from preprocess.errors import UserError
from preprocess.lexicon import TOKEN, induce, is_word

CODE_SWITCH_RATE = 0.25  # of the words with a translation; CSP and CoSDA-ML switch 15-50 %


def word_by_word(line: str, dictionary: dict) -> str:
    """The line's tokens, each word in the dictionary replaced by its translation (lower case); other
    words, numbers and punctuation are kept."""
    return " ".join(dictionary.get(t.lower(), t) if is_word(t) else t for t in TOKEN.findall(line))


def code_switched(line: str, dictionary: dict, rate: float, rng: random.Random) -> str:
    """The line with each word that has a translation replaced by it with probability ``rate`` (spacing and
    other tokens as they were): code-switching for MLM, so that a language's context predicts the other's words
    (Yang et al. 2020, CSP; Qin et al. 2020, CoSDA-ML)."""

    def switch(m):
        word = m.group(0)
        other = dictionary.get(word.lower()) if is_word(word) else None
        return other if other is not None and rng.random() < rate else word

    return TOKEN.sub(switch, line)


def pseudo_pairs(src_lines: Sequence[str], tgt_lines: Sequence[str], to_tgt: Dict[str, str], to_src: Dict[str, str]):
    """(source side, target side): every line of each language beside its word-by-word translation."""
    pairs: List[Tuple[str, str]] = [(line, word_by_word(line, to_tgt)) for line in src_lines]
    pairs += [(word_by_word(line, to_src), line) for line in tgt_lines]
    return [a for a, _ in pairs], [b for _, b in pairs]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m recipes.train.word_by_word", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--mono", type=Path, action="append", required=True, help="monolingual text, one per language of --langs"
    )
    p.add_argument("--langs", required=True, help="SRC,TGT")
    p.add_argument("--out", required=True, help="prefix of the pseudo pairs: PREFIX.SRC and PREFIX.TGT")
    args = p.parse_args(argv)
    langs = args.langs.split(",")
    if len(langs) != 2 or not all(langs) or langs[0] == langs[1] or len(args.mono) != 2:
        p.error(f"--langs: two different languages, one --mono each (got {args.langs!r} and {len(args.mono)} --mono)")
    start = time.time()
    texts = []
    for path in args.mono:
        try:
            texts.append(path.read_text(encoding="utf-8").splitlines())
        except (OSError, UnicodeDecodeError) as e:
            sys.exit(f"word_by_word: {path}: {e}")
    (s, t), (src_lines, tgt_lines) = langs, texts
    try:
        induced = induce(s, src_lines, t, tgt_lines)
    except UserError as e:
        sys.exit(f"word_by_word: {e}")
    to_tgt, to_src = induced.translations(), induced.translations(reverse=True)
    sides = pseudo_pairs(src_lines, tgt_lines, to_tgt, to_src)
    for lang, side in zip(langs, sides):
        Path(f"{args.out}.{lang}").write_text("".join(line + "\n" for line in side), encoding="utf-8")
    examples = ", ".join(f"{w} -> {to_src[w]}" for w in list(to_src)[100:104])
    print(
        f"lexicon: {len(to_tgt)} {s} and {len(to_src)} {t} words, map seeded by {induced.seeds} spelled alike "
        f"({examples}); {len(sides[0])} word-by-word pairs in {time.time() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
