"""What an objective may use of the task that trains it (:class:`ObjectiveContext`): the dictionary, the
language ids, the seed, XLM's sentence length limit, the masking of MLM-like objectives and the data-bin's
readers. Its own options come apart, as a dataclass of its class (``Objective.Options``)."""

from typing import Optional, Tuple

from xlm_fairseq.objectives.base import MissingData


class ObjectiveContext:
    """A narrow view of ``task``: read when an objective builds its datasets, never before (the dictionary
    and the language list may come with a checkpoint, after the objectives are made)."""

    def __init__(self, task):
        self._task = task

    @property
    def dictionary(self):
        return self._task.dictionary

    @property
    def lang2id(self):
        return self._task.lang2id

    @property
    def seed(self) -> int:
        return self._task.cfg.seed

    @property
    def max_sentence_len(self) -> int:
        """XLM's --max_len: training sentences with more subwords on a side are dropped."""
        return self._task.cfg.max_sentence_len

    @property
    def mask(self):
        """The masking of MLM, TLM and span masking (``data/masking.py``'s MaskedLMConfig): the task's
        --mask-prob, --mask-keep-rand and --sample-alpha (``cross_lingual_lm``'s options)."""
        return self._task.mask_cfg

    @property
    def mask_idx(self) -> int:
        return self._task.mask_idx

    def data_path(self, split: str, name: str, epoch: int = 1) -> str:
        """The data-bin prefix of ``{split}.{name}`` read in ``epoch``."""
        return self._task.data_path(split, name, epoch)

    def load_indexed(self, path: str):
        """The binarised data at ``path`` (without .bin/.idx); None when there is none."""
        return self._task.load_indexed(path)

    def pair_datasets(
        self, split: str, a: str, b: str, epoch: int = 1
    ) -> Tuple[Optional[object], Optional[object], str]:
        """Parallel data of a and b: (a's, b's, the prefix of a's file); (None, None, where it was looked for)."""
        return self._task.pair_datasets(split, a, b, epoch)

    def monolingual(self, split: str, lang: str, epoch: int = 1):
        """(the sentences of ``lang`` on ``split``, their data-bin path); MissingData when there are none."""
        path = self.data_path(split, lang, epoch)
        sentences = self.load_indexed(path)
        if sentences is None:
            raise MissingData(path, f"missing monolingual data {path}.bin")
        return sentences, path
