"""Datasets of the translation objectives: AE noise, and batches tagged with their languages; sources
to translate cut to the model's positions."""

import logging
from typing import List, Optional

import torch
from fairseq.data import BaseWrapperDataset, LanguagePairDataset, PrependTokenDataset

from .batching import CompleteBatchesMixin
from .masking import seeded_generator
from .noise import add_noise

logger = logging.getLogger(__name__)


class NoisyDataset(BaseWrapperDataset):
    """Sentences with XLM's denoising noise; the draw depends on (seed, epoch, index, round) only."""

    def __init__(self, dataset, eos, blank, shuffle, dropout, blank_prob, seed):
        super().__init__(dataset)
        self.eos, self.blank = eos, blank
        self.shuffle, self.dropout, self.blank_prob = shuffle, dropout, blank_prob
        self.seed, self.epoch = seed, 1
        self.round = 0  # how often the zip has come round its items (ObjectiveZipDataset's drawing)

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __getitem__(self, index):
        gen = seeded_generator(self.seed, self.epoch, int(index), self.round)
        return add_noise(self.dataset[index], self.eos, self.blank, self.shuffle, self.dropout, self.blank_prob, gen)

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return False


class LangTagDataset(CompleteBatchesMixin, BaseWrapperDataset):
    """A LanguagePairDataset whose batches carry ``src_langs`` / ``tgt_langs`` (one id per sentence)."""

    def __init__(self, dataset: LanguagePairDataset, src_lang_id: int, tgt_lang_id: int):
        super().__init__(dataset)
        self.src_lang_id, self.tgt_lang_id = src_lang_id, tgt_lang_id

    def collater(self, samples, **kwargs):
        batch = self.dataset.collater(samples, **kwargs)
        if batch:
            add_langs(batch, self.src_lang_id, self.tgt_lang_id)
        return batch

    @property
    def sizes(self):
        return self.dataset.sizes

    def num_tokens_vec(self, indices):
        # without it fairseq batches through a per-index path that loses the last short batch
        return self.dataset.num_tokens_vec(indices)

    def filter_indices_by_size(self, indices, max_sizes):
        return self.dataset.filter_indices_by_size(indices, max_sizes)


def pair_dataset(dictionary, source, target, src_lang_id: int, tgt_lang_id: int) -> LangTagDataset:
    """Translation batches of ``source`` -> ``target`` (``target`` may be None: inputs to translate),
    tagged with their languages; the source is XLM's encoder input ``</s> w1 .. wn </s>``."""
    source = PrependTokenDataset(source, dictionary.eos())
    pair = LanguagePairDataset(
        source,
        source.sizes,
        dictionary,
        target,
        target.sizes if target is not None else None,
        dictionary,
        left_pad_source=False,
        left_pad_target=False,
        shuffle=True,
    )
    return LangTagDataset(pair, src_lang_id, tgt_lang_id)


def add_langs(batch, src_lang_id, tgt_lang_id):
    """Tag every sentence of a collated batch with its source and target language id."""
    src_tokens = batch["net_input"]["src_tokens"]
    bsz, device = src_tokens.size(0), src_tokens.device
    batch["net_input"]["src_langs"] = torch.full((bsz,), src_lang_id, dtype=torch.long, device=device)
    batch["net_input"]["tgt_langs"] = torch.full((bsz,), tgt_lang_id, dtype=torch.long, device=device)
    return batch


def cut_to_positions(sources: List[torch.Tensor], limit: Optional[int]) -> List[torch.Tensor]:
    """Sources to translate (``</s> words </s>``) within the model's ``limit`` positions: a longer one
    keeps its first ``limit - 2`` subwords and its final ``</s>``; how many were cut is logged."""
    if limit is None or all(len(t) <= limit for t in sources):
        return sources
    cut = sum(len(t) > limit for t in sources)
    logger.warning(
        f"{cut} of {len(sources)} inputs over the model's {limit} positions: translated from their first "
        f"{limit - 2} subwords"
    )
    return [t if len(t) <= limit else torch.cat([t[: limit - 1], t[-1:]]) for t in sources]
