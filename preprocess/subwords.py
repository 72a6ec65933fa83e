"""The text pipeline's subwords: sentencepiece (our data-bins) or XLM's fastBPE codes (released
models), and the pipeline a data-bin or model directory describes. Pure Python; no torch or fairseq.

Both pipelines give the pieces of ``dict.txt`` for a line of text and join pieces back to text."""

import json
import os
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from preprocess import layout
from preprocess.errors import UserError
from preprocess.text import detokenize, lowercase_and_remove_accent, normalize_line

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


class XLMBPETokenizer(XLMBPE):
    """XLM's ``tools/tokenize.sh`` as Hugging Face's ``XLMTokenizer`` runs it (non-printing
    characters deleted, Romanian diacritics removed as for XLM's en-ro model), optional lowercasing
    and accent removal, then fastBPE."""

    kind = "xlm_bpe"

    def __init__(self, codes_path: str, lowercase: bool = True):
        super().__init__(read_bpe_codes(codes_path))
        self.lowercase = lowercase

    def words(self, text: str, lang: str) -> List[str]:
        words = normalize_line(text, lang, ro_remove_diacritics=True, non_printing="").split()
        if self.lowercase:
            words = [lowercase_and_remove_accent(w) for w in words]
        return [w for w in words if w]

    def pieces(self, text: str, lang: str) -> List[str]:
        return [p for w in self.words(text, lang) for p in self.bpe(w)]

    def detokenize(self, pieces: Sequence[str], lang: str) -> str:
        text = " ".join(pieces).replace("@@ ", "")
        if text.endswith("@@"):
            text = text[:-2]
        return detokenize(text, lang)


class SentencePieceTokenizer:
    """``preprocess/``'s pipeline (:func:`preprocess.text.normalize_line`), then sentencepiece."""

    kind = "spm"

    def __init__(self, spm_path: str, ro_remove_diacritics: bool = False):
        import sentencepiece as spm

        self.sp = spm.SentencePieceProcessor(model_file=spm_path)
        self.ro_remove_diacritics = ro_remove_diacritics

    def words(self, text: str, lang: str) -> List[str]:
        return normalize_line(text, lang, self.ro_remove_diacritics).split()

    def pieces(self, text: str, lang: str) -> List[str]:
        words = self.words(text, lang)
        return list(self.sp.encode(" ".join(words), out_type=str)) if words else []

    def detokenize(self, pieces: Sequence[str], lang: str) -> str:
        return detokenize(self.sp.decode_pieces(list(pieces)), lang)


def _read_json(path: str) -> dict:
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def tokenizer_from_dirs(dirs: Sequence[Optional[str]]):
    """The text pipeline of the first directory that describes one (``spm.model``, or
    ``bpe.codes`` with ``xlm_tokenizer.json``), or None."""
    for d in dict.fromkeys(x for x in dirs if x):
        info = _read_json(os.path.join(d, layout.XLM_TOKENIZER_FILE))
        spm_path = os.path.join(d, layout.SPM_MODEL_FILE)
        if os.path.isfile(spm_path) and info.get("type", "spm") == "spm":
            options = _read_json(os.path.join(d, layout.MANIFEST_FILE)).get("options")
            ro_remove = bool(options.get("ro_remove_diacritics", False)) if isinstance(options, dict) else False
            return SentencePieceTokenizer(spm_path, ro_remove)
        codes = os.path.join(d, info.get("bpe_codes") or layout.BPE_CODES_FILE)
        if os.path.isfile(codes):
            return XLMBPETokenizer(codes, bool(info.get("lowercase_and_remove_accent", True)))
        if info.get("type") == "xlm_bpe":
            raise UserError(
                f"{d}: no {layout.BPE_CODES_FILE}; copy the model's released BPE codes file there (see its README.md)"
            )
    return None
