"""Piece embeddings from an induced lexicon's word vectors, for pretraining from aligned inputs
(``train.sh --unsupervised --lexicon emb``; Artetxe et al. 2018 and Lample et al. 2018 start unsupervised MT
from cross-lingual embeddings).

The lexicon's words of both languages live in one space (their co-occurrence with the dictionary's words,
``preprocess/lexicon.py``); one SVD of both reduces it to the model's width. A piece's vector is the mean of
the vectors of the words it is a piece of (each word as spelled in lower case and capitalised, a word's
vector shared among its pieces); a piece of no such word keeps the model's random init (a NaN row,
``--init-embeddings``). The rows are whitened (:func:`whitened`) and have unit norm, as the random init's
have in expectation (std dim^-0.5)."""

from pathlib import Path
from typing import List

import torch
import torch.nn.functional as F

from preprocess.lexicon import Lexicon, is_word


def word_vectors(lexicon: Lexicon, dim: int):
    """[(lang, word)], [words x dim]: both languages' words, their vectors reduced to ``dim`` together."""
    keyed, parts = [], []
    for lang, words, vectors in (
        (lexicon.src, lexicon.src_words, lexicon.src_vectors),
        (lexicon.tgt, lexicon.tgt_words, lexicon.tgt_vectors),
    ):
        keep = [i for i, w in enumerate(words) if is_word(w)]
        keyed += [(lang, words[i]) for i in keep]
        parts.append(F.normalize(vectors[keep], dim=1))
    joint = torch.cat(parts)
    _, _, vt = torch.linalg.svd(joint - joint.mean(0), full_matrices=False)
    return keyed, F.normalize(joint @ vt[:dim].T, dim=1)


def piece_embeddings(lexicon: Lexicon, pipeline, symbols: List[str], dim: int) -> torch.Tensor:
    """[len(symbols) x dim]: the rows for ``--init-embeddings`` (NaN where no word has the piece)."""
    keyed, vectors = word_vectors(lexicon, dim)
    index = {s: i for i, s in enumerate(symbols)}
    sums, weights = torch.zeros(len(symbols), dim), torch.zeros(len(symbols))
    for (lang, word), vector in zip(keyed, vectors):
        for form in dict.fromkeys((word, word.capitalize())):
            ids = [index[p] for p in pipeline.pieces(form, lang) if p in index]
            for i in ids:
                sums[i] += vector / len(ids)
                weights[i] += 1 / len(ids)
    out = torch.full((len(symbols), dim), float("nan"))
    has = weights > 0
    out[has] = whitened(F.normalize(sums[has], dim=1))
    return out


def whitened(rows: torch.Tensor) -> torch.Tensor:
    """``rows`` centred and given equal variance in every direction (their principal components scaled to one
    size: a linear map, so that pieces of both languages keep where they are to each other), then unit norm.
    The word vectors' few leading components otherwise dominate, and an LM started from them can stay on MLM's
    unigram plateau, depending on the seed (recipes/README.md, "A lexicon from the unpaired text")."""
    centred = rows - rows.mean(0)
    _, s, vt = torch.linalg.svd(centred, full_matrices=False)
    keep = s > s[0] * 1e-6
    white = centred @ vt[keep].T / s[keep]
    if white.size(1) < rows.size(1):  # fewer rows than dimensions: the rest stays zero
        white = F.pad(white, (0, rows.size(1) - white.size(1)))
    return F.normalize(white, dim=1)


def write_piece_embeddings(lexicon: Lexicon, data_bin: Path, dim: int, out: Path) -> int:
    """Writes ``out`` for ``--init-embeddings`` from ``data_bin``'s pipeline and dictionary; the rows set."""
    from preprocess.pipeline import require_pipeline
    from xlm_fairseq.data.dictionary import load_dictionary

    pipeline = require_pipeline(str(data_bin), "--data")
    weights = piece_embeddings(lexicon, pipeline, load_dictionary(str(data_bin)).symbols, dim)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(weights, out)
    return int((~weights.isnan().any(1)).sum())
