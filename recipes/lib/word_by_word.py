"""Word-by-word pseudo pairs from a lexicon induced without pairs, as anchors for unsupervised MT.

    python -m recipes.lib.word_by_word --mono MONO.en --mono MONO.de --langs en,de --out PREFIX

An MLM pretrained on 2 cores for a quarter of an hour does not align two languages on its own
(recipes/README.md, "--unsupervised"). This tries anchors from count vectors instead: each
language's words get PPMI co-occurrence vectors reduced by SVD (Levy, Goldberg & Dagan 2015), the
words spelled the same in both seed an orthogonal map (Smith et al. 2017; Søgaard et al. 2018's
"identical strings"), and Procrustes alternates with a dictionary of CSLS neighbours among the
frequent words (Conneau et al. 2018; Artetxe et al. 2018's self-learning). Every line is then
translated word by word: PREFIX.SRC/PREFIX.TGT pair each line of each language with its word-by-word
translation (one side real, the other made here), which TLM reads as pairs (Lample et al. 2018 started
from word-by-word translation too). No pair of the corpus is read. The quickstart does not use it:
on text with no hidden pairs the lexicon finds ~6 % of frequent words and UNMT stays at copying
(recipes/README.md, "--unsupervised with anchors", which gives the experiment's commands)."""

import argparse
import re
import sys
import time
from collections import Counter
from pathlib import Path

import torch

from recipes.lib.experiments import read_lines
from xlm_fairseq.evaluation.lexicon import CSLS_K

TOKEN = re.compile(r"\w+(?:[-.]\w+)*|[^\w\s]")
SEED_WORD = re.compile(r"[^\W\d_]{4,}")  # identical strings that seed the map: words of 4+ letters
VOCABULARY, MIN_COUNT, WINDOW, DIM = 20000, 3, 5, 300
FREQUENT, ITERATIONS, CHUNK = 4000, 5, 2048


def tokens(line: str) -> list:
    return TOKEN.findall(line.lower())


def count_vectors(lines, size=VOCABULARY, window=WINDOW, dim=DIM):
    """(words, vectors): the `size` most frequent words seen MIN_COUNT times, by frequency, and their
    PPMI co-occurrence rows (weighted 1/distance, context counts smoothed by 0.75) reduced by SVD."""
    sentences = [tokens(line) for line in lines]
    counts = Counter(w for s in sentences for w in s)
    words = [w for w, c in counts.most_common(size) if c >= MIN_COUNT]
    index = {w: i for i, w in enumerate(words)}
    rows, cols, weights = [], [], []
    for s in sentences:
        ids = [index.get(w, -1) for w in s]
        for i, a in enumerate(ids):
            if a < 0:
                continue
            for j in range(max(0, i - window), min(len(ids), i + window + 1)):
                if j != i and ids[j] >= 0:
                    rows.append(a)
                    cols.append(ids[j])
                    weights.append(1.0 / abs(i - j))
    n = len(words)
    m = torch.sparse_coo_tensor(
        [rows, cols], torch.tensor(weights, dtype=torch.float64), (n, n), check_invariants=False
    ).coalesce()
    (r, c), v = m.indices(), m.values()
    total = v.sum()
    word_sum = torch.zeros(n, dtype=torch.float64).index_add_(0, r, v)
    context = torch.zeros(n, dtype=torch.float64).index_add_(0, c, v) ** 0.75
    pmi = torch.log(v * total / word_sum[r] / (context[c] / context.sum() * total))
    keep = pmi > 0
    ppmi = torch.sparse_coo_tensor(
        torch.stack([r[keep], c[keep]]), pmi[keep].float(), (n, n), check_invariants=False
    ).coalesce()
    with torch.random.fork_rng():  # a fixed start for the randomised SVD, the caller's RNG left as it was
        torch.manual_seed(0)
        u, s, _ = torch.svd_lowrank(ppmi, q=min(dim, n - 1), niter=4)
    return words, normalized(u * s.sqrt())


def normalized(v):
    """Unit length, mean-centred, unit length again (Artetxe et al. 2018)."""
    v = torch.nn.functional.normalize(v, dim=1)
    return torch.nn.functional.normalize(v - v.mean(0), dim=1)


def csls_nearest(src, tgt, k=CSLS_K):
    """For every row of src, the row of tgt nearest by CSLS (the probe's `csls_scores`), a chunk of
    rows at a time: 20,000 x 20,000 similarities would take 1.6 GB."""

    def mean_top(a, b):
        return torch.cat(
            [(a[i : i + CHUNK] @ b.T).topk(min(k, len(b)), dim=1).values.mean(1) for i in range(0, len(a), CHUNK)]
        )

    r_src, r_tgt = mean_top(src, tgt), mean_top(tgt, src)
    return torch.cat(
        [
            (2 * src[i : i + CHUNK] @ tgt.T - r_src[i : i + CHUNK, None] - r_tgt[None]).argmax(1)
            for i in range(0, len(src), CHUNK)
        ]
    )


def induce_map(src_words, src, tgt_words, tgt):
    """The orthogonal map of src's vectors into tgt's: seeded by the words spelled the same in both,
    then refined by Procrustes on the CSLS neighbours of the frequent words, both ways."""
    tgt_index = {w: i for i, w in enumerate(tgt_words)}
    seed = [(i, tgt_index[w]) for i, w in enumerate(src_words) if w in tgt_index and SEED_WORD.fullmatch(w)]
    if len(seed) < 2:
        sys.exit("word_by_word: the two texts share fewer than 2 words of 4+ letters: nothing to seed the map with")
    pairs = torch.tensor(seed)
    f = min(FREQUENT, len(src), len(tgt))
    for _ in range(ITERATIONS):
        u, _, vt = torch.linalg.svd(src[pairs[:, 0]].T @ tgt[pairs[:, 1]])
        mapping = u @ vt
        mapped = src[:f] @ mapping
        forward, backward = csls_nearest(mapped, tgt[:f]), csls_nearest(tgt[:f], mapped)
        pairs = torch.cat(
            [torch.stack([torch.arange(f), forward], 1), torch.stack([backward, torch.arange(f)], 1)]
        ).unique(dim=0)
    return mapping, len(seed)


def word_by_word(line: str, dictionary: dict) -> str:
    """The line's tokens, each word in the dictionary replaced by its translation (lower case); other
    words, numbers and punctuation are kept."""
    return " ".join(dictionary.get(t.lower(), t) if t.isalpha() else t for t in TOKEN.findall(line))


def lexicon(src_lines, tgt_lines, dim=DIM):
    """(src -> tgt, tgt -> src) dictionaries and the number of seed words."""
    src_words, src = count_vectors(src_lines, dim=dim)
    tgt_words, tgt = count_vectors(tgt_lines, dim=dim)
    mapping, seeds = induce_map(src_words, src, tgt_words, tgt)
    src = src @ mapping
    to_tgt = {w: tgt_words[j] for w, j in zip(src_words, csls_nearest(src, tgt).tolist())}
    to_src = {w: src_words[j] for w, j in zip(tgt_words, csls_nearest(tgt, src).tolist())}
    return to_tgt, to_src, seeds


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m recipes.lib.word_by_word", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--mono", type=Path, action="append", required=True, help="monolingual text, one per language of --langs"
    )
    p.add_argument("--langs", required=True, help="SRC,TGT")
    p.add_argument("--out", required=True, help="prefix of the pseudo pairs: PREFIX.SRC and PREFIX.TGT")
    p.add_argument("--dim", type=int, default=DIM, help=f"dimension of the word vectors (default {DIM})")
    args = p.parse_args(argv)
    langs = args.langs.split(",")
    if len(langs) != 2 or not all(langs) or langs[0] == langs[1] or len(args.mono) != 2:
        p.error(f"--langs: two different languages, one --mono each (got {args.langs!r} and {len(args.mono)} --mono)")
    start = time.time()
    texts = []
    for path in args.mono:
        try:
            texts.append(read_lines(path))
        except (OSError, UnicodeDecodeError) as e:
            sys.exit(f"word_by_word: {path}: {e}")
    to_tgt, to_src, seeds = lexicon(*texts, dim=args.dim)
    (s, t), (src_lines, tgt_lines) = langs, texts
    pairs = [(line, word_by_word(line, to_tgt)) for line in src_lines] + [
        (word_by_word(line, to_src), line) for line in tgt_lines
    ]
    for i, lang in enumerate(langs):
        Path(f"{args.out}.{lang}").write_text("".join(pair[i] + "\n" for pair in pairs), encoding="utf-8")
    examples = ", ".join(f"{w} -> {to_src[w]}" for w in list(to_src)[100:104])
    print(
        f"lexicon: {len(to_tgt)} {s} and {len(to_src)} {t} words, map seeded by {seeds} spelled alike "
        f"({examples}); {len(pairs)} word-by-word pairs in {time.time() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
