"""The zip of every objective's batches that one fairseq update draws from."""

import logging
from collections import OrderedDict

import numpy as np
from fairseq.data import RoundRobinZipDatasets

from xlm_fairseq.errors import XLMUserError

from .batching import batches_of

logger = logging.getLogger(__name__)


class ObjectiveZipDataset(RoundRobinZipDatasets):
    """The objectives' batches zipped: batch j of an epoch holds batch j of every objective, each
    batched on its own (its own items fill ``--max-tokens``, in length order: XLM batches each
    objective apart, parallel data grouped by size), so an MLM batch is as large beside TLM pairs as
    alone. An objective with fewer batches cycles, each round drawing new masks and noise. Every batch
    holds every objective, in validation too: fairseq sums the logging outputs of data-parallel ranks
    by key, so the ranks' batches must log the same objectives.

    Items are filtered per objective: by ``max_sizes`` (key -> limit on each column of the dataset's
    sizes, e.g. (source, target); XLM's training length filter) and by fairseq's ``max_positions``.
    An index names (objective k, position p): ``k * POSITIONS + p``, the item ``order[p % n]`` of the
    objective's n ordered items in round ``p // n``.

    ``drawing`` names, per objective key, the datasets whose random draws (masks, noise) depend on the
    round: before an item is read, the zip sets their ``round``. The task that builds an objective's
    stack of datasets says which of them draw."""

    POSITIONS = 2**40

    def __init__(self, datasets, max_sizes=None, drawing=None, **kwargs):
        super().__init__(datasets, **kwargs)
        self.max_sizes = max_sizes or {}
        self.drawing = {key: list(found) for key, found in (drawing or {}).items()}
        self.keys = list(self.datasets)

    def filter_indices_by_size(self, indices, max_positions=None):
        for key, dataset in self.datasets.items():
            limits = [(self.max_sizes.get(key), "subword limit")]
            if max_positions is not None:
                limits.append(
                    (max_positions[key] if isinstance(max_positions, dict) else max_positions, "max positions")
                )
            for limit, what in limits:
                if limit is None:
                    continue
                order = self._ordered_indices[key]
                sizes = np.asarray(dataset.sizes)[order]
                if sizes.ndim == 2:
                    limit = np.broadcast_to(np.asarray(limit, dtype=np.float64), (sizes.shape[1],))
                    keep = (sizes <= limit[None, :]).all(axis=1)
                else:
                    keep = sizes <= (limit[0] if isinstance(limit, tuple) else limit)
                if not keep.all():
                    logger.info(f"{key}: {int((~keep).sum())} of {len(keep)} samples over the {what} ({limit}) skipped")
                self._ordered_indices[key] = order[keep]
                if not len(self._ordered_indices[key]):
                    raise XLMUserError(f"{key}: no training sample is within the {what} ({limit})")
        return np.arange(len(self)), []

    def batch_by_size(self, indices, max_tokens=None, max_sentences=None, required_batch_size_multiple=1):
        """Every objective's batches of its ordered items, zipped to as many batches as the longest list
        (``indices``, fairseq's ``arange(len(self))``, only says the zip has been ordered and filtered)."""
        per_objective = []
        for key, dataset in self.datasets.items():
            order = self._ordered_indices[key]
            sizes = np.asarray(dataset.num_tokens_vec(order), dtype=np.int64)
            per_objective.append(
                batches_of(np.arange(len(order)), sizes, max_tokens, max_sentences, required_batch_size_multiple)
            )
        count = max(len(batches) for batches in per_objective)
        zipped = []
        for j in range(count):
            parts = []
            for k, (key, batches) in enumerate(zip(self.keys, per_objective)):
                rounds, b = divmod(j, len(batches))
                parts.append(k * self.POSITIONS + rounds * len(self._ordered_indices[key]) + batches[b])
            zipped.append(np.concatenate(parts))
        return zipped

    def locate(self, index):
        """(objective key, its item's index in its dataset, round) of a zip index."""
        k, position = divmod(int(index), self.POSITIONS)
        order = self._ordered_indices[self.keys[k]]
        rounds, p = divmod(position, len(order))
        return self.keys[k], order[p], rounds

    def item(self, key, position):
        """The item at ``position`` of objective ``key``; a position past its items is a new round of
        random draws (masks, noise) over the same items."""
        return self[self.keys.index(key) * self.POSITIONS + int(position)][1]

    def __getitem__(self, index):
        key, i, rounds = self.locate(index)
        for drawing in self.drawing.get(key, ()):
            drawing.round = rounds
        return key, self.datasets[key][i]

    def num_tokens(self, index):
        key, i, _ = self.locate(index)
        return self.datasets[key].num_tokens(i)

    def size(self, index):
        key, i, _ = self.locate(index)
        return self.datasets[key].size(i)

    def collater(self, samples):
        """{objective: its collated batch} for the objectives that have items in ``samples``."""
        if not samples:
            return None
        grouped = OrderedDict((key, []) for key in self.keys)
        for key, item in samples:
            grouped[key].append(item)
        return OrderedDict((key, self.datasets[key].collater(items)) for key, items in grouped.items() if items)

    def ordered_indices(self):
        self._ordered_indices = None  # the parent caches the first order forever
        return super().ordered_indices()

    def set_epoch(self, epoch):
        super().set_epoch(epoch)
        for dataset in self.datasets.values():
            if hasattr(dataset, "set_epoch"):
                dataset.set_epoch(epoch)

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return False
