"""The one parser of language lists and objective steps (``en,de``; ``en-de``; ``en-de-en``)."""

import re
from typing import Iterable, List, Optional, Sequence, Tuple

from preprocess.errors import UserError

LANG_PATTERN = r"[A-Za-z][A-Za-z0-9_]*"


def parse_steps(
    value: str, option: str, sizes: Sequence[int] = (1,), known: Optional[Iterable[str]] = None
) -> List[Tuple[str, ...]]:
    """``'en,de-en'`` -> ``[('en',), ('de', 'en')]``: comma-separated items of ``sizes`` languages
    joined by ``-``, none listed twice, each a language code (and one of ``known`` when given).
    An empty value gives ``[]``."""
    items = [x.strip() for x in str(value or "").split(",")]
    if items == [""]:
        return []
    known = None if known is None else list(known)
    steps = []
    for item in items:
        parts = tuple(item.split("-"))
        if not item or len(parts) not in sizes or not all(re.fullmatch(LANG_PATTERN, p) for p in parts):
            shapes = " or ".join("-".join(["xx"] * n) for n in sizes)
            raise UserError(f"{option} {value!r}: cannot parse {item!r} (expected {shapes}, comma-separated)")
        if known is not None:
            for lang in parts:
                if lang not in known:
                    raise UserError(f"{option}: language {lang!r} is not in --langs {','.join(known)}")
        if parts in steps:
            raise UserError(f"{option} {value!r}: {item!r} is listed twice")
        steps.append(parts)
    return steps


def parse_langs(value: str, option: str = "--langs", known: Optional[Iterable[str]] = None) -> List[str]:
    """``'en,de'`` -> ``['en', 'de']`` (see :func:`parse_steps`)."""
    return [lang for (lang,) in parse_steps(value, option, (1,), known)]


def base_lang(lang: str) -> str:
    """The language a tokeniser knows: ``en_US`` -> ``en``, ``zh-Hans`` -> ``zh``."""
    return (lang or "en").split("_")[0].split("-")[0].lower()
