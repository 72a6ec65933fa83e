"""The text of one ``recipes/train.sh`` run: the user's raw files read and checked, held-out sets split off
by blocks of consecutive lines, training text with none of their sentences, and -- without supervision --
monolingual text in which no line is the translation of a line on the other side.

Pure Python (no fairseq; torch only for ``--lexicon``'s induction): it runs before anything trains, so that
every bad input is refused in seconds with one line naming the option and the file."""

import dataclasses
import math
import random
import time
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from preprocess.errors import UserError
from preprocess.langs import parse_langs
from preprocess.segment import segmenter
from recipes.train.plan import TINY

BLOCK = 50  # held-out sets are blocks of this many consecutive lines: documents, not scattered sentences
TEST_SHARE, TEST_MAX = 0.05, 1000
VALID_SHARE, VALID_MAX = 0.025, 500


@dataclasses.dataclass
class Pairs:
    """Line-aligned text of languages ``src`` and ``tgt``."""

    src: str
    tgt: str
    src_lines: List[str]
    tgt_lines: List[str]

    @property
    def name(self) -> str:
        return f"{self.src}-{self.tgt}"

    def __len__(self) -> int:
        return len(self.src_lines)

    def side(self, lang: str) -> List[str]:
        """The lines in ``lang`` ([] for a language not of the pair)."""
        return self.src_lines if lang == self.src else self.tgt_lines if lang == self.tgt else []

    def select(self, keep: Sequence[int]) -> "Pairs":
        return Pairs(self.src, self.tgt, [self.src_lines[i] for i in keep], [self.tgt_lines[i] for i in keep])

    def __add__(self, other: "Pairs") -> "Pairs":
        return Pairs(self.src, self.tgt, self.src_lines + other.side(self.src), self.tgt_lines + other.side(self.tgt))


# ------------------------------------------------------------------------------------------------
# reading and checking
# ------------------------------------------------------------------------------------------------


def read_text(path: str, option: str, max_lines: Optional[int] = None) -> List[str]:
    """The lines of a raw UTF-8 file (at most ``max_lines``); one line naming ``option`` and the file when it
    is missing, not UTF-8 or holds no text."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{option}: {path}: no such file")
    lines = []
    try:
        with open(p, "rb") as f:
            for number, raw in enumerate(f, 1):
                if max_lines is not None and number > max_lines:
                    break
                try:
                    lines.append(raw.decode("utf-8").rstrip("\r\n"))
                except UnicodeDecodeError as e:
                    raise UserError(f"{option}: {path}: not UTF-8 text (line {number}, byte {e.start + 1})") from None
    except OSError as e:
        raise UserError(f"{option}: {path}: cannot read ({e.strerror})") from None
    if not any(line.strip() for line in lines):
        raise UserError(f"{option}: {path}: no text (empty or blank lines only)")
    return lines


def parse_assignment(value: str, option: str, shape: str) -> Tuple[Optional[str], str, str]:
    """``[NAME:]KEY=PATH`` -> (NAME or None, KEY, PATH)."""
    key, sep, path = value.partition("=")
    name = None
    if ":" in key:
        name, _, key = key.partition(":")
    if not sep or not key or not path or (name is not None and not name):
        raise UserError(f"{option} {value!r}: expected {shape}")
    return name, key, path


def parse_pair(key: str, option: str, langs: Optional[Sequence[str]] = None) -> Tuple[str, str]:
    parts = key.split("-")
    if len(parts) != 2 or parts[0] == parts[1]:
        raise UserError(f"{option} {key!r}: expected two different languages, like en-ro")
    parse_langs(",".join(parts), option, langs)
    return parts[0], parts[1]


def read_pairs(prefix: str, src: str, tgt: str, option: str, max_lines: Optional[int] = None) -> Pairs:
    a = read_text(f"{prefix}.{src}", option, max_lines)
    b = read_text(f"{prefix}.{tgt}", option, max_lines)
    if len(a) != len(b):
        raise UserError(f"{option}: {prefix}.{src} has {len(a)} lines, {prefix}.{tgt} {len(b)}: not line-aligned")
    return Pairs(src, tgt, a, b)


def same_pair(pairs: Dict[Tuple[str, str], Pairs], src: str, tgt: str) -> Optional[Tuple[str, str]]:
    """The key under which the pair of ``src`` and ``tgt`` is known, in either order."""
    return next((k for k in ((src, tgt), (tgt, src)) if k in pairs), None)


# ------------------------------------------------------------------------------------------------
# held-out sets
# ------------------------------------------------------------------------------------------------


def held_out_blocks(n: int, share: float, most: int, offset: float, cap: Optional[int] = None) -> List[int]:
    """Line numbers of about ``min(share * n, most, cap)`` lines in blocks of :data:`BLOCK` consecutive lines,
    spread evenly over ``n`` lines; ``offset`` (0-1) shifts the blocks within their stride, so that two
    calls with different offsets take different blocks."""
    want = min(int(round(share * n)), most, cap if cap is not None else most)
    blocks = max(1, n // BLOCK)
    count = min(blocks, max(1, math.ceil(want / BLOCK)))
    stride = blocks / count
    lines: List[int] = []
    for k in range(count):
        start = int((k + offset) * stride) * BLOCK
        lines += range(start, min(start + BLOCK, n))
    return lines[:want] if want else []


def split_held_out(pairs: Pairs, need_valid: bool, need_test: bool, cap: Optional[int] = None):
    """(train, valid or None, test or None): valid and test as blocks of consecutive lines (documents,
    when the file follows them), never the same block."""
    n = len(pairs)
    if n < 4 * BLOCK and (need_valid or need_test):
        raise UserError(
            f"--pairs {pairs.name}: {n} pairs are too few to split off valid and test sets "
            f"(need {4 * BLOCK}); give --valid and --test"
        )
    test = held_out_blocks(n, TEST_SHARE, TEST_MAX, 0.25, cap) if need_test else []
    taken = set(test)
    valid = [i for i in held_out_blocks(n, VALID_SHARE, VALID_MAX, 0.75, cap) if i not in taken] if need_valid else []
    taken |= set(valid)
    train = [i for i in range(n) if i not in taken]
    return pairs.select(train), pairs.select(valid) if need_valid else None, pairs.select(test) if need_test else None


def without_sentences(lines: List[str], seen: set) -> List[int]:
    """Indices of the lines that are not in ``seen`` (compared stripped)."""
    return [i for i, line in enumerate(lines) if line.strip() not in seen]


def keep_out(train: Pairs, held: Sequence[Pairs]) -> Tuple[Pairs, int]:
    """``train`` without a pair whose either side is a sentence of a held-out set: (pairs, how many dropped)."""
    seen = {lang: {s.strip() for h in held for s in h.side(lang)} for lang in (train.src, train.tgt)}
    keep = [
        i
        for i in range(len(train))
        if train.src_lines[i].strip() not in seen[train.src] and train.tgt_lines[i].strip() not in seen[train.tgt]
    ]
    return train.select(keep), len(train) - len(keep)


# ------------------------------------------------------------------------------------------------
# unsupervised: monolingual text without hidden pairs
# ------------------------------------------------------------------------------------------------


def unpaired(mono: Dict[str, List[str]], corpora: Sequence[Pairs]) -> Tuple[Dict[str, List[str]], Dict[str, int]]:
    """Monolingual text for unsupervised MT from monolingual lines and parallel corpora, as Lample et al.
    (2018) made it: each corpus gives the source side of its first half and the target side of its second
    (the source language is the first of its pair); a line of a corpus's target language is then dropped
    when any of its translations in that corpus is in the source language's text (software manuals repeat
    sentences across documents, so a line of the second half may translate one of the first). Returns
    ({lang: lines, no line twice}, {lang: lines dropped})."""
    text: Dict[str, List[str]] = defaultdict(list)
    for lang, lines in mono.items():
        text[lang] += lines
    for corpus in corpora:
        half = len(corpus) // 2
        text[corpus.src] += corpus.src_lines[:half]
        text[corpus.tgt] += corpus.tgt_lines[half:]
    text = {lang: list(dict.fromkeys(lines)) for lang, lines in text.items()}
    dropped: Dict[str, int] = defaultdict(int)
    for corpus in corpora:
        translations = defaultdict(set)  # target line -> its source lines anywhere in the corpus
        for s, t in zip(corpus.src_lines, corpus.tgt_lines):
            translations[t].add(s)
        on_source_side = set(text[corpus.src])
        kept = [t for t in text[corpus.tgt] if not translations[t] & on_source_side]
        dropped[corpus.tgt] += len(text[corpus.tgt]) - len(kept)
        text[corpus.tgt] = kept
    return text, dict(dropped)


def lexicon_text(
    mono: Dict[str, List[str]],
    keys: Sequence[Tuple[str, str]],
    uses: Sequence[str],
    notes: List[str],
    segmenters: Optional[Dict[str, str]] = None,
):
    """({pair: Pairs}, {lang: lines}, {pair: Lexicon}) from a lexicon induced for each pair from its two
    languages' unpaired text (``preprocess/lexicon.py``): every line of that text beside its word-by-word
    translation (for TLM and MT, ``--lexicon tlm,mt``), every line code-switched by it (for MLM, ``cs``), and the
    lexicon itself (its word vectors, ``emb``); no line of a real pair is read. A language of ``segmenters``
    (a script without spaces) is read as its segmenter's words, and its lines are given in them."""
    from preprocess.lexicon import agreement, induce
    from preprocess.segment import segment
    from recipes.train.word_by_word import CODE_SWITCH_RATE, code_switched, pseudo_pairs

    segmenters = segmenters or {}
    words = {
        lang: [segment(line, segmenters[lang]) for line in mono[lang]] if lang in segmenters else mono[lang]
        for lang in {x for key in keys for x in key}
    }
    pairs, switched, lexicons, agrees = {}, defaultdict(list), {}, {}
    rng = random.Random(1)
    for a, b in keys:
        start = time.time()
        lexicons[(a, b)] = induced = induce(a, words[a], b, words[b])
        to_b, to_a = induced.translations(), induced.translations(reverse=True)
        made = []
        if "tlm" in uses or "mt" in uses:
            pairs[(a, b)] = Pairs(a, b, *pseudo_pairs(words[a], words[b], to_b, to_a))
            made.append(f"{len(pairs[(a, b)])} word-by-word pairs")
        if "cs" in uses:
            for lang, other in ((a, to_b), (b, to_a)):
                switched[lang] += [code_switched(line, other, CODE_SWITCH_RATE, rng) for line in words[lang]]
            made.append(f"{len(mono[a]) + len(mono[b])} lines code-switched")
        agrees[(a, b)] = agreed = agreement(induced, to_b, to_a)
        notes.append(
            f"lexicon {a}-{b}: {len(to_b)} {a} and {len(to_a)} {b} words from the unpaired text (seeded by "
            f"{induced.seeds} strings spelled alike; of the 1,000 most frequent words, {agreed[0]:.0f} % of {a}'s "
            f"and {agreed[1]:.0f} % of {b}'s come back to themselves translated there and back), "
            f"{' and '.join(made + ['its word vectors'] * ('emb' in uses))}, {time.time() - start:.0f} s"
        )
    return pairs, dict(switched), lexicons, agrees


def unpaired_leaks(text: Dict[str, List[str]], corpora: Sequence[Pairs]) -> int:
    """How many pairs of the corpora have both sides in ``text`` (0 for :func:`unpaired`'s output)."""
    sets = {lang: set(lines) for lang, lines in text.items()}
    return sum(
        1
        for c in corpora
        for s, t in zip(c.src_lines, c.tgt_lines)
        if s in sets.get(c.src, ()) and t in sets.get(c.tgt, ())
    )


# ------------------------------------------------------------------------------------------------
# what each split of a run gets
# ------------------------------------------------------------------------------------------------


def held_cap(args):
    return TINY["held_lines"] if args.tiny else None


def prepared_text(inputs, args, lexicon: Sequence[str] = (), segmenters: Optional[Dict[str, str]] = None) -> dict:
    """``lexicon``: with --unsupervised, the uses of a lexicon induced from the unpaired text (``parse_lexicon``).
    What each split gets: {"train": {pair: Pairs}, "mono": {lang: lines}, "switched": {lang: code-switched
    lines for MLM only}, "lexicons": {pair: Lexicon}, "valid"/"test": {pair: Pairs}, "notes": [...]}; the
    held-out sets split off where none were given, and their sentences kept out of the training text."""
    notes, held = [], {"valid": {}, "test": {}}
    rest, train, switched, lexicons, agrees = {}, {}, {}, {}, {}
    cap = held_cap(args)
    for key, pairs in inputs.pairs.items():
        # without parallel text (--unsupervised from --mono alone) the held-out sets are the user's, if any
        need = {split: key not in inputs.held[split] and inputs.parallel for split in held}
        rest[key], valid, test = split_held_out(pairs, need["valid"], need["test"], cap)
        for split, got in (("valid", valid), ("test", test)):
            if got is None and key not in inputs.held[split]:
                continue
            held[split][key] = got if got is not None else inputs.held[split][key]
            if got is not None:
                notes.append(f"{split} {key[0]}-{key[1]}: {len(got)} pairs split off as blocks of {BLOCK} lines")
    # no sentence in two splits, across pairs too (an English test sentence of en-de is no en-ro training pair):
    # valid keeps none of any test, training text none of any valid or test
    tests = list(held["test"].values())
    for key in held["valid"]:
        held["valid"][key], _ = keep_out(held["valid"][key], tests)
    for key in rest:
        train[key], dropped = keep_out(rest[key], tests + list(held["valid"].values()))
        if dropped:
            notes.append(f"train {key[0]}-{key[1]}: {dropped} pairs dropped (a side is in valid or test)")
    seen = defaultdict(set)
    for split in held.values():
        for pairs in split.values():
            for lang in (pairs.src, pairs.tgt):
                seen[lang] |= {s.strip() for s in pairs.side(lang)}
    mono = {}
    for lang, lines in inputs.mono.items():
        mono[lang] = [lines[i] for i in without_sentences(lines, seen[lang]) if lines[i].strip()]
        if len(mono[lang]) < len(lines):
            notes.append(f"mono {lang}: {len(lines) - len(mono[lang])} lines left out (blank, or in valid or test)")
    if args.unsupervised:
        mono, dropped = unpaired(mono, list(train.values()))
        kept = ", ".join(f"{len(mono.get(lang, []))} {lang} lines" for lang in inputs.langs)
        lost = ", ".join(f"{n} {lang}" for lang, n in dropped.items() if n)
        notes.append(
            f"unpaired: {kept}" + (f" ({lost} lines dropped as translations of the other side)" if lost else "")
        )
        train = {}  # no real pair
    else:
        for lang in inputs.langs:
            if lang not in mono:
                mono[lang] = list(
                    dict.fromkeys(s for p in train.values() if lang in (p.src, p.tgt) for s in p.side(lang))
                )
    valid_mono = {}
    validated = {lang for pairs in held["valid"].values() for lang in (pairs.src, pairs.tgt)}
    for lang in inputs.langs:
        # a language without a valid pair (monolingual text only, or a pretrained LM's language kept):
        # blocks of its text validate MLM and translation's round trips
        if lang not in validated and mono.get(lang):
            lines = mono[lang]
            taken = set(held_out_blocks(len(lines), VALID_SHARE, VALID_MAX, 0.75, cap))
            if not taken:
                continue
            valid_mono[lang] = [line for i, line in enumerate(lines) if i in taken]
            mono[lang] = [line for i, line in enumerate(lines) if i not in taken]
            notes.append(f"valid {lang}: {len(taken)} lines of its text split off as blocks of {BLOCK} lines")
    if args.unsupervised and lexicon:  # from the training text only
        train, switched, lexicons, agrees = lexicon_text(mono, list(inputs.pairs), lexicon, notes, segmenters)
    for lang in inputs.langs:
        if not any(line.strip() for line in mono.get(lang, [])):
            raise UserError(f"no training text left in {lang} once valid and test sets are taken out")
    return {
        "train": train,
        "mono": mono,
        "switched": switched,
        "lexicons": lexicons,
        "lexicon_agreement": agrees,
        "valid": held["valid"],
        "test": held["test"],
        "valid_mono": valid_mono,
        "notes": notes,
    }


def words_and_characters(text: dict, segmenters: Dict[str, str]) -> Tuple[Dict[str, int], int]:
    """Training words per language (a segmenter's words for scripts without spaces) and distinct characters."""
    words, chars = defaultdict(int), set()
    lines_of = defaultdict(list)
    for lang, lines in text["mono"].items():
        lines_of[lang] += lines
    for pairs in text["train"].values():
        lines_of[pairs.src] += pairs.src_lines
        lines_of[pairs.tgt] += pairs.tgt_lines
    for lang, lines in lines_of.items():
        lines = list(dict.fromkeys(lines))  # a language's monolingual text may be its sides of the pairs
        if lang in segmenters:  # a sample's words, scaled: segmenting is slow
            cut, sample = segmenter(segmenters[lang]), lines[:5000]
            words[lang] = int(sum(len(cut(line)) for line in sample) * len(lines) / max(len(sample), 1))
        else:
            words[lang] = sum(len(line.split()) for line in lines)
        for line in lines[:200000]:
            chars.update(line)
    return dict(words), len(chars)
