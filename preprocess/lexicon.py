"""A bilingual lexicon from two monolingual texts alone, and how a lexicon is scored.

    xlm-fairseq-lexicon induce --mono de=TEXT.de --mono en=TEXT.en --out DIR [--dict de-en.txt]

Induction (after Wang's coocmap, 2023, and Artetxe et al.'s self-learning, 2018): each language's
``--words`` most frequent tokens get co-occurrence counts within ``--window`` tokens (weighted 1/distance).
A word is described by its counts with the words of the current dictionary, so the two languages share
coordinates through it (the square root of the counts, centred and normalised). The first dictionary is
the strings spelled alike in both texts (commands, file names, numbers, names, punctuation) of similar
frequency rank; each round adds the pairs that are each other's nearest neighbour by CSLS among the
``--frequent`` most frequent words, and the final vectors translate every word by CSLS. No pair of
sentences is read.

DIR gets ``lexicon.SRC-TGT.txt`` and ``lexicon.TGT-SRC.txt`` (MUSE's format: ``word translation`` a
line, one translation per word, words only) and ``lexicon.json`` (settings, seconds, dictionary sizes,
and with ``--dict`` the precision against that dictionary)."""

import json
import math
import re
import sys
import time
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from preprocess.errors import ArgumentParser, UserError, run_command
from preprocess.files import atomic_write

# a word's characters: letters, digits and the combining marks that Python's \w leaves out (Thai vowels and tones,
# Devanagari signs), so that a word of those scripts stays one token
_MARKS = "".join(re.escape(chr(c)) for c in range(0x300, 0x10000) if unicodedata.category(chr(c)).startswith("M"))
_WORD = rf"[\w{_MARKS}]"
TOKEN = re.compile(rf"{_WORD}+(?:[-.]{_WORD}+)*|[^\w{_MARKS}\s]")
CSLS_K = 10
TOP_K = (1, 5)
WORDS, WINDOW, FREQUENT, ITERATIONS, RANK_RATIO = 8000, 15, 4000, 6, 4.0
BANDS = (1000, 2000)  # "frequent words": queries and candidates among this many most frequent of each side


def tokens(line: str) -> List[str]:
    return TOKEN.findall(line.lower())


def is_word(token: str) -> bool:
    """Letters (and the combining marks of scripts like Thai), hyphens allowed inside."""
    core = token.replace("-", "")
    return bool(core) and any(c.isalpha() for c in core) and all(unicodedata.category(c)[0] in "LM" for c in core)


def read_dictionary(path: str, option: str = "--dict") -> Dict[str, List[str]]:
    """MUSE's format: ``src tgt`` a line -> {source word: [its translations]} (lowercased)."""
    pairs: Dict[str, List[str]] = defaultdict(list)
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                fields = line.split()
                if not fields:
                    continue
                if len(fields) != 2:
                    raise UserError(f"{path}:{number}: expected 'source target', got {line.strip()[:60]!r} ({option})")
                src, tgt = (w.lower() for w in fields)
                if tgt not in pairs[src]:
                    pairs[src].append(tgt)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file ({option})") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: invalid UTF-8 ({e}) ({option})") from None
    if not pairs:
        raise UserError(f"{path}: no word pairs ({option})")
    return dict(pairs)


# ------------------------------------------------------------------------------------------------
# retrieval: CSLS and precision@k (MUSE's word translation), shared with the LM probe
# ------------------------------------------------------------------------------------------------


def centred(v: torch.Tensor) -> torch.Tensor:
    """Unit length, mean-centred, unit length again (Artetxe et al. 2018)."""
    v = torch.nn.functional.normalize(v, dim=1)
    return torch.nn.functional.normalize(v - v.mean(0), dim=1)


def csls_scores(similarity: torch.Tensor, src_to_tgt: torch.Tensor, tgt_to_src: torch.Tensor, k: int = CSLS_K):
    """MUSE's CSLS: 2 cos(x, y) - r_T(x) - r_S(y), r the mean cosine of the k nearest neighbours in
    the other language (x's among the target words, y's among the source words)."""
    r_t = src_to_tgt.topk(min(k, src_to_tgt.size(1)), dim=1).values.mean(1)
    r_s = tgt_to_src.topk(min(k, tgt_to_src.size(1)), dim=1).values.mean(1)
    return 2 * similarity - r_t[:, None] - r_s[None, :]


def retrieval_precision(src_vecs, src_words, src_all_vecs, tgt_vecs, tgt_words, gold: List[List[str]]) -> dict:
    """Precision@k (%) of NN and CSLS retrieval of each source word among ``tgt_words``; ``gold``:
    each source word's translations. A source word's own spelling is no candidate: identical strings
    are what seeds induction, and MUSE's dictionaries leave them out too."""
    normalize = torch.nn.functional.normalize
    src, tgt, src_all = normalize(src_vecs, dim=-1), normalize(tgt_vecs, dim=-1), normalize(src_all_vecs, dim=-1)
    similarity = src @ tgt.T
    tgt_index = {w.lower(): j for j, w in enumerate(tgt_words)}
    own = [(i, tgt_index[w.lower()]) for i, w in enumerate(src_words) if w.lower() in tgt_index]
    result = {}
    for method, scores in (("nn", similarity), ("csls", csls_scores(similarity, similarity, tgt @ src_all.T))):
        scores = scores.clone()
        for i, j in own:
            scores[i, j] = -float("inf")
        ranked = scores.topk(min(max(TOP_K), scores.size(1)), dim=1).indices.tolist()
        for k in TOP_K:
            hits = [any(tgt_words[j].lower() in answers for j in row[:k]) for row, answers in zip(ranked, gold)]
            result[f"{method}_p@{k}"] = round(100.0 * sum(hits) / max(len(hits), 1), 2)
    return result


def score_vectors(src_words, src_vecs, tgt_words, tgt_vecs, gold: Dict[str, List[str]], bands=BANDS) -> dict:
    """Word translation precision of vectors in one space, words in frequency order: among all words
    (``all``) and among the ``band`` most frequent words of each side (queries and candidates)."""
    src_idx = [i for i, w in enumerate(src_words) if is_word(w)]
    tgt_idx = [j for j, w in enumerate(tgt_words) if is_word(w)]
    result = {}
    for name, n in [("all", None)] + [(str(b), b) for b in bands]:
        s, t = src_idx[:n], tgt_idx[:n]
        candidates = {tgt_words[j] for j in t}
        queries = [i for i in s if any(a in candidates for a in gold.get(src_words[i], ()))]
        if not queries:
            continue
        scores = retrieval_precision(
            src_vecs[queries],
            [src_words[i] for i in queries],
            src_vecs[s],
            tgt_vecs[t],
            [tgt_words[j] for j in t],
            [gold[src_words[i]] for i in queries],
        )
        result[name] = {"queries": len(queries), "candidates": len(t), **scores}
    return result


# ------------------------------------------------------------------------------------------------
# induction
# ------------------------------------------------------------------------------------------------


def cooccurrences(sentences: Sequence[List[str]], size: int, window: int):
    """(words, counts): the ``size`` most frequent tokens, most frequent first, and their symmetric
    co-occurrence counts within ``window`` tokens of a sentence, weighted 1/distance (dense)."""
    counts = Counter(w for s in sentences for w in s)
    words = [w for w, _ in counts.most_common(size)]
    index = {w: i for i, w in enumerate(words)}
    ids: List[int] = []
    for s in sentences:  # a window of -1s after each sentence: no pair across sentences
        ids.extend(index.get(w, -1) for w in s)
        ids.extend([-1] * window)
    ids_np = np.array(ids, dtype=np.int64)
    n = len(words)
    matrix = np.zeros(n * n, dtype=np.float64)
    for d in range(1, window + 1):
        a, b = ids_np[:-d], ids_np[d:]
        ok = (a >= 0) & (b >= 0)
        matrix += np.bincount(a[ok] * n + b[ok], minlength=n * n) / d
    matrix = matrix.reshape(n, n)
    return words, torch.from_numpy(matrix + matrix.T).float()


def seed_pairs(src_words: List[str], tgt_words: List[str], rank_ratio: float) -> List[tuple]:
    """The strings spelled alike on both sides (longer than one character, or a digit), whose frequency
    ranks differ by less than ``rank_ratio`` times: "die" is German's most frequent word and a rare
    English one, "gimp" is frequent in both."""
    tgt_index = {w: j for j, w in enumerate(tgt_words)}
    return [
        (i, tgt_index[w])
        for i, w in enumerate(src_words)
        if w in tgt_index
        and (len(w) > 1 or w.isdigit())
        and abs(math.log((i + 1) / (tgt_index[w] + 1))) < math.log(rank_ratio)
    ]


def features(counts: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
    """Each word's co-occurrence with the dictionary's words of its language: square root, centred."""
    return centred(counts[:, columns].sqrt())


@dataclass
class Lexicon:
    """Two languages' words (most frequent first) and vectors in one space, and the dictionary that
    made the space (index pairs)."""

    src: str
    tgt: str
    src_words: List[str]
    tgt_words: List[str]
    src_vectors: torch.Tensor
    tgt_vectors: torch.Tensor
    pairs: torch.Tensor
    seeds: int

    def translations(self, reverse: bool = False) -> Dict[str, str]:
        """{word: its CSLS-nearest word of the other language}, words only."""
        a, b = (self.tgt_vectors, self.src_vectors) if reverse else (self.src_vectors, self.tgt_vectors)
        a_words, b_words = (self.tgt_words, self.src_words) if reverse else (self.src_words, self.tgt_words)
        keep_a = [i for i, w in enumerate(a_words) if is_word(w)]
        keep_b = [j for j, w in enumerate(b_words) if is_word(w)]
        a, b = a[keep_a], b[keep_b]
        similarity = a @ b.T
        best = csls_scores(similarity, similarity, similarity.T).argmax(1).tolist()
        return {a_words[i]: b_words[keep_b[j]] for i, j in zip(keep_a, best)}


def agreement(lexicon: Lexicon, to_tgt: Dict[str, str], to_src: Dict[str, str], frequent: int = BANDS[0]):
    """How far a lexicon agrees with itself, with no dictionary to score it: the share (%) of the ``frequent``
    most frequent words of each side that its translations ``to_tgt`` and ``to_src`` bring back to themselves
    (src -> tgt -> src, tgt -> src -> tgt)."""

    def share(words, there, back):
        asked = [w for w in words if is_word(w)][:frequent]
        return round(100.0 * sum(back.get(there.get(w, "")) == w for w in asked) / max(len(asked), 1), 1)

    return share(lexicon.src_words, to_tgt, to_src), share(lexicon.tgt_words, to_src, to_tgt)


def induce(
    src: str,
    src_lines: Sequence[str],
    tgt: str,
    tgt_lines: Sequence[str],
    words: int = WORDS,
    window: int = WINDOW,
    frequent: int = FREQUENT,
    iterations: int = ITERATIONS,
    rank_ratio: float = RANK_RATIO,
) -> Lexicon:
    """The lexicon of two texts (see the module's docstring)."""
    src_words, src_counts = cooccurrences([tokens(line) for line in src_lines], words, window)
    tgt_words, tgt_counts = cooccurrences([tokens(line) for line in tgt_lines], words, window)
    seed = seed_pairs(src_words, tgt_words, rank_ratio)
    if len(seed) < 2:
        raise UserError(
            f"{src} and {tgt} texts share {len(seed)} tokens of similar frequency: nothing to seed the lexicon with"
        )
    seed_t = torch.tensor(seed)
    pairs = seed_t
    k = min(frequent, len(src_words), len(tgt_words))
    for _ in range(iterations):
        x = features(src_counts[:k], pairs[:, 0])
        z = features(tgt_counts[:k], pairs[:, 1])
        similarity = x @ z.T
        scores = csls_scores(similarity, similarity, similarity.T)
        forward, backward = scores.argmax(1), scores.argmax(0)
        mutual = (backward[forward] == torch.arange(k)).nonzero().squeeze(1)
        pairs = torch.cat([seed_t, torch.stack([mutual, forward[mutual]], 1)]).unique(dim=0)
    return Lexicon(
        src,
        tgt,
        src_words,
        tgt_words,
        features(src_counts, pairs[:, 0]),
        features(tgt_counts, pairs[:, 1]),
        pairs,
        len(seed),
    )


def read_text(path: str, option: str) -> List[str]:
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file ({option})") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: invalid UTF-8 ({e}) ({option})") from None


def parse_mono(values: Sequence[str]) -> Dict[str, str]:
    """``--mono LANG=FILE`` twice -> {lang: file}, in the order given."""
    mono: Dict[str, str] = {}
    for value in values:
        lang, sep, path = value.partition("=")
        if not sep or not lang or not path:
            raise UserError(f"--mono: expected LANG=FILE, got {value!r}")
        if lang in mono:
            raise UserError(f"--mono: {lang} given twice")
        mono[lang] = path
    if len(mono) != 2:
        raise UserError(f"--mono: a lexicon is between two languages, got {len(mono)} ({', '.join(mono) or 'none'})")
    return mono


def add_arguments(p) -> None:
    p.add_argument("--mono", action="append", default=[], metavar="LANG=FILE", help="monolingual text, twice")
    p.add_argument("--out", required=True, help="directory for lexicon.SRC-TGT.txt, lexicon.TGT-SRC.txt, .json")
    p.add_argument("--dict", help="score the lexicon against this MUSE dictionary of the first --mono's language")
    p.add_argument("--words", type=int, default=WORDS, help=f"words per language (default {WORDS})")
    p.add_argument("--window", type=int, default=WINDOW, help=f"co-occurrence window in tokens (default {WINDOW})")
    p.add_argument("--frequent", type=int, default=FREQUENT, help=f"words self-learning pairs up (default {FREQUENT})")
    p.add_argument("--iterations", type=int, default=ITERATIONS, help=f"self-learning rounds (default {ITERATIONS})")


def run_induce(args) -> dict:
    """``induce``'s work: read, induce, write; returns what lexicon.json holds."""
    for name in ("words", "window", "frequent"):
        if getattr(args, name) < 1:
            raise UserError(f"--{name}: expected a number >= 1, got {getattr(args, name)}")
    if args.iterations < 0:
        raise UserError(f"--iterations: expected a number >= 0, got {args.iterations}")
    mono = parse_mono(args.mono)
    gold = read_dictionary(args.dict) if args.dict else None
    out = Path(args.out)
    if out.exists() and any(out.glob("lexicon.*")):
        raise UserError(f"{out}: holds a lexicon already (--out): give a new directory")
    (src, src_path), (tgt, tgt_path) = mono.items()
    start = time.time()
    texts = {lang: read_text(path, "--mono") for lang, path in mono.items()}
    lexicon = induce(
        src, texts[src], tgt, texts[tgt], args.words, args.window, args.frequent, args.iterations, RANK_RATIO
    )
    directions = {f"{src}-{tgt}": lexicon.translations(), f"{tgt}-{src}": lexicon.translations(reverse=True)}
    seconds = round(time.time() - start, 1)
    record = {
        "langs": [src, tgt],
        "mono": {src: src_path, tgt: tgt_path},
        "settings": {k: getattr(args, k) for k in ("words", "window", "frequent", "iterations")},
        "rank_ratio": RANK_RATIO,
        "seed_pairs": lexicon.seeds,
        "dictionary_pairs": len(lexicon.pairs),
        "seconds": seconds,
    }
    if gold is not None:
        record["precision"] = score_vectors(
            lexicon.src_words, lexicon.src_vectors, lexicon.tgt_words, lexicon.tgt_vectors, gold
        )
        record["dict"] = args.dict
    out.mkdir(parents=True, exist_ok=True)
    for direction, table in directions.items():
        with atomic_write(str(out / f"lexicon.{direction}.txt")) as f:
            f.writelines(f"{a} {b}\n" for a, b in table.items())
    with atomic_write(str(out / "lexicon.json")) as f:
        json.dump(record, f, indent=1)
    return record


def report(record: dict) -> str:
    src, tgt = record["langs"]
    lines = [
        f"lexicon {src}-{tgt}: seeded by {record['seed_pairs']} strings spelled alike, "
        f"{record['dictionary_pairs']} pairs after self-learning, {record['seconds']} s"
    ]
    for band, r in record.get("precision", {}).items():
        where = "all words" if band == "all" else f"the {band} most frequent words"
        lines.append(
            f"  {where}: {r['queries']} {src} words, P@1 NN {r['nn_p@1']:.1f} / CSLS {r['csls_p@1']:.1f}, "
            f"P@5 CSLS {r['csls_p@5']:.1f}"
        )
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = ArgumentParser(
        name="lexicon induce",
        prog="xlm-fairseq-lexicon induce",
        description=__doc__.split("\n\n")[0],
        examples=["xlm-fairseq-lexicon induce --mono de=text.de --mono en=text.en --out lexicon/ --dict de-en.txt"],
    )
    add_arguments(p)

    def run(argv):
        record = run_induce(p.parse_args(argv))
        print(report(record))
        return 0

    return run_command("lexicon induce", run, argv)


if __name__ == "__main__":
    sys.exit(main())
