"""An objective's key: its family and languages in one string (``mlm_en``, ``tlm_en-de``, ``bt_en-de-en``),
the name of its batches in a sample and the prefix of its metrics (``mlm_en_ppl``)."""

from dataclasses import dataclass
from typing import Tuple


@dataclass(frozen=True)
class ObjectiveKey:
    """``bt`` over ``(en, de, en)``: back-translation en -> de -> en; ``tlm`` over ``(en, de)``."""

    family: str
    langs: Tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.family}_{'-'.join(self.langs)}"

    @property
    def direction(self) -> str:
        """``de-en``: how BLEU metrics name a translation objective's languages."""
        return "-".join(self.langs)

    @property
    def source(self) -> str:
        return self.langs[0]

    @property
    def target(self) -> str:
        """The language predicted: an MT direction's target, BT's original language."""
        return self.langs[-1]

    @classmethod
    def parse(cls, key: str) -> "ObjectiveKey":
        family, _, langs = key.partition("_")
        parts = tuple(langs.split("-"))
        if not family or not all(parts):
            raise ValueError(f"not an objective key: {key!r}")
        return cls(family, parts)
