"""Word segmentation for scripts written without spaces (Chinese, Japanese, Thai): the pre-tokeniser of
the text pipeline for those languages, and the BLEU tokenisation of text in them.

XLM segments zh with the Stanford segmenter, ja with KyTea and th with PyThaiNLP (its ``tokenize.sh``),
in place of Moses' tokeniser, after the same punctuation normalisation. Here each is a maintained PyPI
package, an optional extra of this package (``pip install 'xlm-fairseq[zh]'``, ``[ja]``, ``[th]``):

====  ============  =====================================================
lang  segmenter     package
====  ============  =====================================================
zh    ``jieba``     jieba (its default dictionary, HMM for unknown words)
ja    ``mecab``     mecab-python3 + ipadic (what sacreBLEU's ``ja-mecab`` uses)
th    ``pythainlp`` PyThaiNLP's ``newmm`` (XLM's choice for Thai)
====  ============  =====================================================

``preprocess/`` picks a language's default segmenter (``--segment LANG=NAME`` chooses another, or
``none``) and records the choice in ``text_pipeline.json``, so that everything that reads a model
(training, ``fairseq-generate``, the hubs, the exports, the lexicon probe) segments as its data was.

Joining words back: text of these languages has no spaces between words, so detokenisation removes
them, except between two words of letters and digits in a script with spaces (``Linux 系统`` keeps
one); :func:`bleu_tokenize` names the sacreBLEU tokeniser that scores a language (``zh``,
``ja-mecab``; Thai text is scored on its segmented words)."""

import functools
import logging
import re
from typing import Callable, Dict, List, Optional

from preprocess.errors import UserError
from preprocess.langs import base_lang

# segmenter name -> (the language it segments, the package to install, the extra of this package)
SEGMENTERS = {
    "jieba": ("zh", "jieba", "zh"),
    "mecab": ("ja", "mecab-python3 ipadic", "ja"),
    "pythainlp": ("th", "pythainlp", "th"),
}
DEFAULT_SEGMENTER = {lang: name for name, (lang, _, _) in SEGMENTERS.items()}
NONE = "none"
UNSPACED_LANGS = frozenset(DEFAULT_SEGMENTER)
# sacreBLEU's tokenisers for a target language (default: 13a); Thai has none offline: its words come from
# the segmenter and sacreBLEU then splits on spaces only (``none``)
BLEU_TOKENIZERS = {"zh": "zh", "ja": "ja-mecab"}
_SPACED_WORD = re.compile(r"^[0-9A-Za-z\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff]")  # a Latin/Greek/Cyrillic/digit edge


def default_segmenter(lang: str) -> Optional[str]:
    """The segmenter ``preprocess/`` gives ``lang`` unless told otherwise (None: Moses' tokeniser)."""
    return DEFAULT_SEGMENTER.get(base_lang(lang))


def parse_segmenters(values, langs) -> Dict[str, str]:
    """``--segment`` values (``LANG=NAME``, NAME a segmenter or ``none``) over the languages' defaults ->
    {lang: segmenter} for the languages that are segmented."""
    chosen = {lang: default_segmenter(lang) for lang in langs}
    for value in values or ():
        lang, sep, name = str(value).partition("=")
        if not sep or not lang or not name:
            raise UserError(f"--segment {value!r}: expected LANG=NAME (NAME one of {', '.join(SEGMENTERS)}, or none)")
        if lang not in langs:
            raise UserError(f"--segment {value!r}: language {lang!r} is not in --langs {','.join(langs)}")
        if name != NONE and name not in SEGMENTERS:
            raise UserError(
                f"--segment {value!r}: unknown segmenter {name!r} (one of {', '.join(SEGMENTERS)}, or none)"
            )
        chosen[lang] = None if name == NONE else name
    return {lang: name for lang, name in chosen.items() if name}


def check_segmenters(segmenters: Dict[str, str], what: str) -> Dict[str, str]:
    """``segmenters`` as stored in a pipeline's settings, checked: {lang: known segmenter name}."""
    if not isinstance(segmenters, dict) or not all(
        isinstance(k, str) and v in SEGMENTERS for k, v in segmenters.items()
    ):
        raise UserError(f"{what}: segmenters must map languages to one of {', '.join(SEGMENTERS)}, got {segmenters!r}")
    return dict(segmenters)


def _missing(name: str) -> UserError:
    lang, package, extra = SEGMENTERS[name]
    return UserError(
        f"segmenting '{lang}' text needs {package} (the '{name}' segmenter): "
        f"pip install {package}  (or: pip install 'xlm-fairseq[{extra}]')"
    )


@functools.lru_cache(maxsize=None)
def segmenter(name: str) -> Callable[[str], List[str]]:
    """The words of a line by segmenter ``name``; UserError naming the package when it is not installed."""
    if name == "jieba":
        try:
            import jieba
        except ImportError:
            raise _missing(name) from None
        jieba.setLogLevel(logging.WARNING)  # its dictionary loading is logged at INFO on stderr
        return lambda line: list(jieba.cut(line, HMM=True))
    if name == "mecab":
        try:
            import ipadic
            import MeCab
        except ImportError:
            raise _missing(name) from None
        tagger = MeCab.Tagger(f"{ipadic.MECAB_ARGS} -Owakati")
        return lambda line: tagger.parse(line).split()
    if name == "pythainlp":
        try:
            from pythainlp.tokenize import word_tokenize
        except ImportError:
            raise _missing(name) from None
        return lambda line: word_tokenize(line, engine="newmm", keep_whitespace=False)
    raise UserError(f"unknown segmenter {name!r} (one of {', '.join(SEGMENTERS)})")


def segment(line: str, name: str) -> str:
    """``line`` cut into words by segmenter ``name``, joined by single spaces."""
    return " ".join(w for w in (w.strip() for w in segmenter(name)(line)) if w)


def join_unspaced(tokens: List[str]) -> str:
    """Words of a language written without spaces -> text: no space between them, except between two
    words of a script with spaces (``Linux 系统`` -> ``Linux系统``, ``GNU Linux`` stays)."""
    out = ""
    for token in tokens:
        if out and _SPACED_WORD.match(out[-1]) and _SPACED_WORD.match(token):
            out += " "
        out += token
    return out


def bleu_tokenize(lang: str) -> str:
    """sacreBLEU's ``tokenize`` for text in ``lang``: ``zh``, ``ja-mecab``, ``none`` (Thai: its words, as
    the segmenter cut them, see :func:`bleu_text`) or ``13a``."""
    lang = base_lang(lang)
    if lang in BLEU_TOKENIZERS:
        return BLEU_TOKENIZERS[lang]
    return NONE if lang in UNSPACED_LANGS else "13a"


def bleu_text(lines: List[str], lang: str) -> List[str]:
    """Text as sacreBLEU with :func:`bleu_tokenize` should read it: Thai segmented into words, the rest as is."""
    if bleu_tokenize(lang) != NONE:
        return list(lines)
    name = default_segmenter(lang)
    return [segment(line, name) for line in lines]


def corpus_bleu(hyps: List[str], refs: List[str], lang: str):
    """sacreBLEU's corpus BLEU of detokenised ``hyps`` against ``refs`` in target language ``lang``, with
    that language's tokenisation (:func:`bleu_tokenize`)."""
    import sacrebleu

    return sacrebleu.corpus_bleu(bleu_text(hyps, lang), [bleu_text(refs, lang)], tokenize=bleu_tokenize(lang))


def corpus_chrf(hyps: List[str], refs: List[str]):
    """sacreBLEU's chrF of detokenised ``hyps`` against ``refs``: character n-grams with spaces removed, so
    it needs no tokenisation and scores every script alike."""
    import sacrebleu

    return sacrebleu.corpus_chrf(hyps, [refs])


def signatures(lang: str) -> Dict[str, str]:
    """sacreBLEU's signatures of :func:`corpus_bleu` into ``lang`` and of :func:`corpus_chrf`."""
    from sacrebleu.metrics import BLEU, CHRF

    found = {}
    for name, metric in (("bleu", BLEU(tokenize=bleu_tokenize(lang))), ("chrf", CHRF())):
        metric.corpus_score(["."], [["."]])  # a signature names the number of references: known once scored
        found[name] = metric.get_signature().format()
    return found


def check_bleu(lang: str, what: str) -> None:
    """BLEU into ``lang`` can be computed here: one line naming the package to install if not (before
    training, rather than at the first validation)."""
    tokenize = bleu_tokenize(lang)
    if tokenize == "ja-mecab":
        try:
            import ipadic  # noqa: F401
            import MeCab  # noqa: F401
        except ImportError:
            raise UserError(
                f"{what}: BLEU into '{lang}' uses sacreBLEU's ja-mecab tokeniser, which needs mecab-python3 and "
                "ipadic: pip install 'sacrebleu[ja]'  (or: pip install 'xlm-fairseq[ja]')"
            ) from None
    elif tokenize == NONE:
        segmenter(default_segmenter(lang))
