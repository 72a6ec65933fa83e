"""The text pipeline's subwords: sentencepiece (our data-bins) or XLM's fastBPE codes (released
models). Pure Python; no torch or fairseq. Both split Moses-tokenised text into the pieces of
``dict.txt`` and join pieces back into tokenised text; :mod:`preprocess.pipeline` puts the words
before them."""

import os
from typing import Dict, Iterable, List, Sequence, Tuple

from preprocess.errors import UserError

Merge = Tuple[str, str, int]


def parse_bpe_codes(lines: Iterable[str], what: str) -> List[Merge]:
    """fastBPE codes or HF merges (``a b [count]`` per line, a ``#version`` header allowed) ->
    [(a, b, count)] in merge order; a missing count becomes a decreasing stand-in."""
    merges = []
    try:
        for n, line in enumerate(lines, 1):
            line = line.rstrip("\n")
            if not line.strip() or (n == 1 and line.startswith("#version")):
                continue
            parts = line.split()
            if len(parts) not in (2, 3) or (len(parts) == 3 and not parts[2].isdigit()):
                raise UserError(f"{what} line {n}: expected 'a b [count]' (fastBPE codes), got {line.strip()[:60]!r}")
            merges.append((parts[0], parts[1], int(parts[2]) if len(parts) == 3 else None))
    except UnicodeDecodeError as e:
        raise UserError(f"{what}: invalid UTF-8 ({e.reason} at byte {e.start})") from None
    total = len(merges)
    return [(a, b, c if c is not None else total - i) for i, (a, b, c) in enumerate(merges)]


def read_bpe_codes(path: str, what: str = "") -> List[Merge]:
    """:func:`parse_bpe_codes` of a file; refuses a missing file or one without merges."""
    label = f"{what} {path}".strip()
    if not os.path.isfile(path):
        raise UserError(f"{label}: no such file")
    with open(path, encoding="utf-8") as f:
        merges = parse_bpe_codes(f, label)
    if not merges:
        raise UserError(f"{label}: no merges in it ('a b [count]' per line)")
    return merges


def write_bpe_codes(merges: Sequence[Merge], f) -> None:
    for a, b, c in merges:
        f.write(f"{a} {b} {c}\n")


class XLMBPE:
    """fastBPE's applier: a word is split into characters with ``</w>`` on the last one; the
    adjacent pair of lowest rank is merged everywhere until no pair has a rank. Pieces come out in
    XLM's spelling: ``th@@`` for a non-final piece, ``e`` for the final one."""

    def __init__(self, merges: Sequence[Merge]):
        self.ranks: Dict[Tuple[str, str], int] = {}
        for a, b, _ in merges:
            self.ranks.setdefault((a, b), len(self.ranks))
        self._cache: Dict[str, List[str]] = {}

    def bpe(self, word: str) -> List[str]:
        if word in self._cache:
            return self._cache[word]
        symbols = list(word[:-1]) + [word[-1] + "</w>"]
        while len(symbols) > 1:
            best, best_rank = None, None
            for pair in zip(symbols, symbols[1:]):
                rank = self.ranks.get(pair)
                if rank is not None and (best_rank is None or rank < best_rank):
                    best, best_rank = pair, rank
            if best is None:
                break
            merged, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == best[0] and symbols[i + 1] == best[1]:
                    merged.append(symbols[i] + symbols[i + 1])
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            symbols = merged
        pieces = [s + "@@" for s in symbols[:-1]] + [symbols[-1][: -len("</w>")]]
        if len(self._cache) < 100_000:
            self._cache[word] = pieces
        return pieces


class XLMBPESubwords(XLMBPE):
    """Subwords from XLM's fastBPE codes file: ``th@@ e``."""

    kind = "xlm_bpe"

    def __init__(self, codes_path: str):
        super().__init__(read_bpe_codes(codes_path))

    def split(self, tokenized: str) -> List[str]:
        return [p for w in tokenized.split() for p in self.bpe(w)]

    def join(self, pieces: Sequence[str]) -> str:
        text = " ".join(pieces).replace("@@ ", "")
        return text[:-2] if text.endswith("@@") else text


class SentencePieceSubwords:
    """Subwords from a sentencepiece model (``preprocess/``'s data-bins): ``▁th e``."""

    kind = "sentencepiece"

    def __init__(self, spm_path: str):
        import sentencepiece as spm

        self.sp = spm.SentencePieceProcessor(model_file=spm_path)

    def split(self, tokenized: str) -> List[str]:
        return list(self.sp.encode(tokenized, out_type=str)) if tokenized.strip() else []

    def join(self, pieces: Sequence[str]) -> str:
        # as fairseq's post_process("sentencepiece"): any string is a piece (an <unk> marker too)
        return "".join(pieces).replace("\u2581", " ").strip()


SUBWORD_MODELS = {XLMBPESubwords.kind: XLMBPESubwords, SentencePieceSubwords.kind: SentencePieceSubwords}
