"""What the XLM tasks share: one dictionary, a language list, their own criterion, objective loops."""

import logging
import os
from typing import List

from fairseq.data import Dictionary, data_utils, indexed_dataset
from fairseq.tasks import FairseqTask

from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.tasks import parse_lang_list

logger = logging.getLogger(__name__)

MASK_SYMBOL = "<special1>"  # XLM's MASK_WORD; preprocess/ and the converter put it in dict.txt


def load_dictionary(data: str) -> Dictionary:
    path = os.path.join(data.split(os.pathsep)[0], "dict.txt")
    if not os.path.isfile(path):
        raise XLMUserError(f"{path}: no dictionary; make the data-bin with `python -m preprocess.prepare`")
    dictionary = Dictionary.load(path)
    if MASK_SYMBOL not in dictionary.indices:
        dictionary.add_symbol(MASK_SYMBOL)  # deterministic: same size on every load
    return dictionary


class XLMTask(FairseqTask):
    """Base of ``cross_lingual_lm`` and ``translation_lm``."""

    criterion_name = "xlm_cross_entropy"
    builds_decoder = False

    def __init__(self, cfg, dictionary: Dictionary):
        super().__init__(cfg)
        self.dictionary = dictionary
        self.set_langs(cfg.langs)
        self.mask_idx = dictionary.index(MASK_SYMBOL)

    def set_langs(self, langs: str):
        self.langs: List[str] = parse_lang_list(langs or "", "--langs")
        self.lang2id = {lang: i for i, lang in enumerate(self.langs)}

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        dictionary = load_dictionary(cfg.data)
        logger.info(f"dictionary: {len(dictionary)} types")
        return cls(cfg, dictionary)

    @property
    def source_dictionary(self):
        return self.dictionary

    @property
    def target_dictionary(self):
        return self.dictionary

    def _path(self, split, name):
        return os.path.join(self.cfg.data.split(os.pathsep)[0], f"{split}.{name}")

    def _load(self, path):
        return data_utils.load_indexed_dataset(path, self.dictionary, combine=False)

    def _pair_datasets(self, split, a, b):
        """Parallel data of a and b, stored as {split}.{x}-{y}.{lang} in either order."""
        for x, y in sorted({(a, b), (b, a)}):
            prefix = self._path(split, f"{x}-{y}")
            if indexed_dataset.dataset_exists(f"{prefix}.{a}", impl="mmap"):
                return self._load(f"{prefix}.{a}"), self._load(f"{prefix}.{b}"), f"{prefix}.{a}"
        return None, None, self._path(split, f"{min(a, b)}-{max(a, b)}.{a}")

    def build_criterion(self, cfg):
        """The task brings its own loss: ``--criterion`` may be left out (fairseq then passes its
        default, cross_entropy); anything else is refused rather than silently ignored."""
        from xlm_fairseq.criterions import build_task_criterion

        return build_task_criterion(self, cfg)

    def run_objectives(self, sample, model, criterion, keys, weights=None, optimizer=None, ignore_grad=False, batch_fn=None):
        """Loss of each objective ``key`` of ``sample`` (times its weight), back-propagated one by one
        when training (so only one objective's graph is alive at a time)."""
        total_loss, total_size, logs = 0.0, 0, {}
        for key in keys:
            batch = sample.get(key)
            if not batch:
                continue
            if batch_fn is not None:
                batch = batch_fn(key, batch)
            loss, sample_size, log = criterion(model, batch, key=key)
            if weights is not None:
                loss = loss * weights[key]
            if optimizer is not None:
                if ignore_grad:
                    loss = loss * 0
                optimizer.backward(loss)
            total_loss += loss.detach().item()
            total_size += sample_size
            for k, v in log.items():
                logs[k] = logs.get(k, 0) + v
        return total_loss, total_size, logs
