"""Raw text -> fairseq data-bin for xlm-fairseq (see ``preprocess/prepare.py`` and README.md).

The text normalisation used by ``python -m preprocess.prepare`` is importable from here without
pulling in fairseq or torch::

    from preprocess import normalize_and_tokenize, detokenize

(The names are resolved lazily: importing ``preprocess.prepare`` eagerly here would make
``python -m preprocess.prepare`` warn that the module was imported twice.)
"""

_EXPORTS = (
    "SPECIAL_SYMBOLS",
    "MASK_SYMBOL",
    "detokenize",
    "normalize_and_tokenize",
    "normalize_line",
    "normalize_romanian",
    "remove_non_printing",
    "remove_romanian_diacritics",
)

__all__ = list(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        from preprocess import prepare

        return getattr(prepare, name)
    raise AttributeError(f"module 'preprocess' has no attribute {name!r}")
