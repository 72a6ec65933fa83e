"""The XLM dictionary: a data-bin's (or a model's) ``dict.txt`` with the mask symbol guaranteed."""

import hashlib
import io
import os
from typing import List

from fairseq.data import Dictionary

from preprocess.layout import DICT_FILE, MASK_SYMBOL


def load_dictionary(path: str) -> Dictionary:
    """``dict.txt`` (or the directory holding it) as fairseq reads it, plus XLM's mask symbol when
    the file lacks it (deterministic: the same size on every load)."""
    if os.path.isdir(path):
        path = os.path.join(path, DICT_FILE)
    dictionary = Dictionary.load(path)
    if MASK_SYMBOL not in dictionary.indices:
        dictionary.add_symbol(MASK_SYMBOL)
    dictionary.source_file = path  # named in errors about it
    return dictionary


def dictionary_digest(dictionary: Dictionary) -> str:
    """SHA-256 of the symbols in index order: what a model's embedding rows mean (counts do not matter)."""
    return hashlib.sha256("\n".join(dictionary.symbols).encode("utf-8")).hexdigest()


def dictionary_to_state(dictionary: Dictionary) -> List[str]:
    """The lines of its ``dict.txt`` (``symbol count``), for a checkpoint to carry."""
    n = dictionary.nspecial
    return [f"{symbol} {count}" for symbol, count in zip(dictionary.symbols[n:], dictionary.count[n:])]


def dictionary_from_state(lines: List[str]) -> Dictionary:
    """The dictionary of :func:`dictionary_to_state`, as ``load_dictionary`` would read its file."""
    dictionary = Dictionary()
    dictionary.add_from_file(io.StringIO("".join(line + "\n" for line in lines)))
    if MASK_SYMBOL not in dictionary.indices:
        dictionary.add_symbol(MASK_SYMBOL)
    return dictionary
