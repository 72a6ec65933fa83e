"""Raw text -> fairseq data-bin for xlm-fairseq (``xlm-fairseq-prepare``, see README.md).

Floors, each importing only those below it: ``errors``, ``layout``, ``langs``, ``files`` and the text
pipeline (``text``, ``subwords``, ``pipeline``: pure Python, no torch or fairseq), then the data-bin builder
(``inputs``, ``vocab``, ``binarize``, ``manifest``, ``prepare``). Nothing here imports
``xlm_fairseq``. The text pipeline of ``prepare`` is importable from here::

    from preprocess import normalize_and_tokenize, detokenize
"""

from preprocess.layout import MASK_SYMBOL, SPECIAL_SYMBOLS  # noqa: F401
from preprocess.text import (  # noqa: F401
    detokenize,
    normalize_and_tokenize,
    normalize_line,
    normalize_romanian,
    remove_non_printing,
    remove_romanian_diacritics,
)
