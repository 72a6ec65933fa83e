"""Whole texts through a translator of sentences, their layout kept.

A text is cut at its line breaks (a sentence never spans one), each line into sentences by
``sentencex`` (Wikimedia's rule-based segmenter: ~300 languages, each falling back along its family),
and a sentence the model cannot take whole into parts: after clause punctuation first, else at a space,
else between the words of the model's stored segmenter (zh, ja, th), else between characters; nothing
is cut off. The sentences of every text go to the translator in one call, so that its engine batches
them, and each translation goes back where its source was: line breaks, blank lines, indentation and
the whitespace between sentences as they were. Sentences of Chinese and Japanese follow each other
without a space; a translation out of them gets one, a translation into them none.

::

    texts = translate_texts(["Erster Satz. Zweiter Satz.\\n\\nNeuer Absatz."], "de", "en", translate, fits)
"""

import re
from typing import Callable, List, Optional, Sequence, Tuple, Union

from sentencex import segment as sentencex_segment

from preprocess.langs import base_lang

LINE_BREAK = re.compile(r"(\r\n|\r|\n)")
# cut a long sentence after these first (with the space after them, in scripts with spaces)
CLAUSE_END = re.compile(r"(?:[,;:](?=\s)|[，、；：])\s*")
SPACE = re.compile(r"\s+")
# languages whose sentences follow each other without a space (Thai writes one between sentences)
NO_SPACE_BETWEEN_SENTENCES = frozenset({"zh", "ja"})

# a text's layout: strings kept as they are, and sentences as the indexes of their parts in the sources
Layout = List[Union[str, Tuple[int, ...]]]


def sentences(line: str, lang: str) -> List[str]:
    """The sentences of one line, each with the whitespace around it, so that they join back into it."""
    found = list(sentencex_segment(base_lang(lang), line))
    return found if "".join(found) == line else [line]


def cut(sentence: str, fits: Callable[[str], bool], words: Optional[Callable[[str], List[str]]] = None) -> List[str]:
    """``sentence`` as parts that each ``fits``, cut where the sentence breaks most naturally near its
    middle; whitespace at a cut is dropped."""
    if len(sentence) < 2 or fits(sentence):
        return [sentence]
    at = _cut_point(sentence, words)
    left, right = sentence[:at].rstrip(), sentence[at:].lstrip()
    if not left or not right:  # only whitespace on one side: cut between characters instead
        at = len(sentence) // 2
        left, right = sentence[:at], sentence[at:]
    return cut(left, fits, words) + cut(right, fits, words)


def _cut_point(sentence: str, words) -> int:
    """Where to cut: the kind of boundary that reads best (clause end, space, segmenter word, character)
    that has a candidate in the middle half of the sentence, the candidate nearest the middle."""
    n = len(sentence)
    tiers = [
        [m.end() for m in CLAUSE_END.finditer(sentence)],
        [m.start() for m in SPACE.finditer(sentence)],
        _word_ends(sentence, words) if words else [],
    ]
    for tier in tiers:
        inside = [i for i in tier if n / 4 <= i <= 3 * n / 4]
        if inside:
            return min(inside, key=lambda i: abs(i - n / 2))
    edges = [i for tier in tiers for i in tier if 0 < i < n]
    return min(edges, key=lambda i: abs(i - n / 2)) if edges else n // 2


def _word_ends(sentence: str, words) -> List[int]:
    """Offsets in ``sentence`` after each word of the segmenter (the words it finds in order)."""
    ends, at = [], 0
    for word in words(sentence):
        found = sentence.find(word, at)
        if found < 0:
            break
        at = found + len(word)
        ends.append(at)
    return ends


def layout(text: str, lang: str, fits, words, sources: List[str]) -> Layout:
    """``text`` as kept strings and sentences; the sentences' parts are appended to ``sources``."""
    parts: Layout = []
    for line in LINE_BREAK.split(text):
        if not line.strip():  # a line break, an empty or blank line
            parts.append(line)
            continue
        for sentence in sentences(line, lang):
            core = sentence.strip()
            if not core:
                parts.append(sentence)
                continue
            start = sentence.index(core)
            if start:
                parts.append(sentence[:start])
            pieces = cut(core, fits, words)
            parts.append(tuple(range(len(sources), len(sources) + len(pieces))))
            sources.extend(pieces)
            if sentence[start + len(core) :]:
                parts.append(sentence[start + len(core) :])
    return parts


def assemble(parts: Layout, translations: Sequence[str], lang: str) -> str:
    """The translated text in ``lang``: the layout's strings, and each sentence's translated parts."""
    unspaced = base_lang(lang) in NO_SPACE_BETWEEN_SENTENCES
    joiner = "" if unspaced else " "
    out: List[str] = []
    previous_sentence = False
    for part in parts:
        if isinstance(part, str):
            if unspaced and previous_sentence and part.strip(" ") == "":
                continue  # the space after a sentence, in a language without one
            out.append(part)
            previous_sentence = False
            continue
        if previous_sentence and not unspaced:
            out.append(" ")  # two sentences written without a space, translated into a language with one
        out.append(joiner.join(t.strip() for t in (translations[i] for i in part) if t.strip()))
        previous_sentence = True
    return "".join(out)


def translate_texts(
    texts: Sequence[str],
    src: str,
    tgt: str,
    translate: Callable[[List[str]], List[str]],
    fits: Callable[[str], bool],
    words: Optional[Callable[[str], List[str]]] = None,
) -> List[str]:
    """Each text translated from ``src`` into ``tgt`` with its layout kept. ``translate``: sentences ->
    their translations, in one call; ``fits``: whether the model takes a sentence whole; ``words``:
    the source's words in order, for cutting a long sentence of a script without spaces."""
    sources: List[str] = []
    layouts = [layout(text, src, fits, words, sources) for text in texts]
    translations = translate(sources) if sources else []
    if len(translations) != len(sources):
        raise RuntimeError(f"{len(sources)} sentences gave {len(translations)} translations")
    return [assemble(parts, translations, tgt) for parts in layouts]
