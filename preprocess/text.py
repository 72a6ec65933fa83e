"""The text pipeline's words: Moses normalisation and tokenisation, Romanian handling, XLM's
lowercasing. Pure Python (sacremoses); no torch or fairseq.

``preprocess/`` runs :func:`normalize_line` on every input line; the hub, validation BLEU and the
recipes call the same functions (subwords: :mod:`preprocess.subwords`). The tokenizer that
``xlm-fairseq-export --hf`` ships (``xlm_fairseq/inference/tokenization_xlm_fairseq.py``) repeats these steps
without this package; ``tests/inference/test_hf_translators.py`` holds the two to the same output."""

import functools
import unicodedata
from typing import Iterable, List, Optional, Sequence, Union

from preprocess.langs import base_lang
from preprocess.segment import UNSPACED_LANGS, join_unspaced, segment

_RO_CEDILLA_TO_COMMA = str.maketrans("şŞţŢ", "șȘțȚ")
_RO_DIACRITICS = str.maketrans("șȘțȚăĂâÂîÎ", "sStTaAaAiI")


def normalize_romanian(text: str) -> str:
    """WMT16 Romanian normalisation: cedilla ş Ş ţ Ţ -> comma-below ș Ș ț Ț (after NFC, so that
    decomposed letters are caught too)."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFC", text).translate(_RO_CEDILLA_TO_COMMA)


def remove_romanian_diacritics(text: str) -> str:
    """WMT16's optional Romanian diacritics removal: ș ț ă â î (either case, cedilla forms too)
    -> s t a a i."""
    return normalize_romanian(text).translate(_RO_DIACRITICS)


def remove_non_printing(text: str, replacement: str = " ") -> str:
    """Every character of unicode category C* (control, format, surrogate, private use, unassigned;
    tab, CR and the BOM among them) becomes ``replacement``, every other whitespace a space."""
    if text.isprintable():  # fast path: no C* / Z* character except ' '
        return text
    return "".join(replacement if unicodedata.category(ch)[0] == "C" else " " if ch.isspace() else ch for ch in text)


def lowercase_and_remove_accent(text: str) -> str:
    """XLM's ``tools/lowercase_and_remove_accent.py``: lowercase, NFD, drop combining marks (Mn)."""
    text = unicodedata.normalize("NFD", text.lower())
    return "".join(ch for ch in text if unicodedata.category(ch) != "Mn").lower()


@functools.lru_cache(maxsize=None)
def _moses(lang: str):
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    # pre_replace_unicode_punct: Moses' replace-unicode-punctuation.perl first, as XLM's tokenize.sh
    return MosesPunctNormalizer(lang=lang, pre_replace_unicode_punct=True), MosesTokenizer(lang=lang)


@functools.lru_cache(maxsize=None)
def _moses_detokenizer(lang: str):
    from sacremoses import MosesDetokenizer

    return MosesDetokenizer(lang=lang)


def normalize_line(line: str, lang: str, ro_remove_diacritics: bool = False, segmenter: Optional[str] = None) -> str:
    """Normalise and Moses-tokenise one line of language ``lang`` (no trailing newline): XLM's
    ``tools/tokenize.sh`` and WMT16's Romanian scripts: unicode punctuation replaced, Moses
    punctuation normalisation, non-printing characters -> space (Moses'
    ``remove-non-printing-char.perl``), Romanian normalisation (``ro``), Moses tokenisation without
    escaping; with ``segmenter`` (a name of :mod:`preprocess.segment`, for a script without spaces)
    that segmenter cuts the words instead of Moses' tokeniser, as XLM's does for zh, ja and th."""
    punct, tokenizer = _moses(base_lang(lang))
    line = remove_non_printing(punct.normalize(line))
    if base_lang(lang) == "ro":
        line = remove_romanian_diacritics(line) if ro_remove_diacritics else normalize_romanian(line)
    line = " ".join(line.split())
    if not line:
        return ""
    if segmenter:
        return segment(line, segmenter)
    return tokenizer.tokenize(line, escape=False, return_str=True)


def tokenize(
    line: str, lang: str, ro_remove_diacritics: bool = False, lowercase: bool = False, segmenter: Optional[str] = None
) -> str:
    """The word level of the text pipeline: :func:`normalize_line`, then (for models trained so,
    like XLM's XNLI-15) :func:`lowercase_and_remove_accent` word by word. Subwords come next
    (:mod:`preprocess.subwords`)."""
    line = normalize_line(line, lang, ro_remove_diacritics, segmenter)
    if lowercase and line:
        line = " ".join(w for w in map(lowercase_and_remove_accent, line.split()) if w)
    return line


def normalize_and_tokenize(
    lines: Union[str, Iterable[str]], lang: str, ro_remove_diacritics: bool = False
) -> Union[str, List[str]]:
    """:func:`normalize_line` on one string (returns a string) or on an iterable of lines (a list)."""
    if isinstance(lines, str):
        return normalize_line(lines, lang, ro_remove_diacritics)
    return [normalize_line(line, lang, ro_remove_diacritics) for line in lines]


def detokenize(text: Union[str, Sequence[str]], lang: str) -> str:
    """Undo Moses tokenisation (sacremoses ``MosesDetokenizer``): ``"Hello , world !"`` ->
    ``"Hello, world!"``; in a language written without spaces (zh, ja, th) the words are joined
    without them (:func:`preprocess.segment.join_unspaced`). Takes a tokenised string or a list of tokens."""
    tokens = text.split() if isinstance(text, str) else list(text)
    if base_lang(lang) in UNSPACED_LANGS:
        return join_unspaced(tokens)
    return _moses_detokenizer(base_lang(lang)).detokenize(tokens)
