"""Objective datasets: XLM's LM batches (MLM / CLM over streams or TLM pairs) and the zip of all
objectives that one fairseq update draws from."""

import logging
from collections import OrderedDict

import numpy as np
import torch
from fairseq.data import FairseqDataset, RoundRobinZipDatasets, TokenBlockDataset, data_utils

from xlm_fairseq.errors import XLMUserError

from .batching import batches_of
from .masking import MaskedLMConfig, eval_pred_mask, mask_tokens, seeded_generator

logger = logging.getLogger(__name__)


def stream_dataset(dataset, tokens_per_sample: int, pad: int, eos: int) -> TokenBlockDataset:
    """XLM's ``StreamDataset``: sentences (each ending in ``</s>``) concatenated into one stream and
    cut into blocks of ``tokens_per_sample`` (XLM's ``--bptt``)."""
    return TokenBlockDataset(dataset, dataset.sizes, tokens_per_sample, pad=pad, eos=eos, break_mode="none")


def collate_right(values, pad):
    return data_utils.collate_tokens(values, pad, left_pad=False)


class LMObjectiveDataset(FairseqDataset):
    """Turns token sequences into MLM or CLM batches.

    Items of ``dataset`` are either token tensors (a monolingual stream: ``lang_id`` for all tokens,
    positions 0..T-1) or dicts with ``tokens``, ``langs``, ``positions`` (TLM pairs).
    Masking is drawn per batch, as XLM does, from a generator seeded by (seed, epoch, first id) so a
    batch is the same after a resume. With ``evaluation`` the draw ignores the epoch (every
    validation sees the same positions, as XLM's evaluator) and MLM batches also carry
    ``full_mask``: XLM's evaluator's own positions (``eval_pred_mask``), all shown as the mask
    token, with their targets (XLM's validation perplexity, ``*_fullmask_ppl``).
    """

    def __init__(
        self, dataset, objective: str, pad: int, lang_id=None, mask_cfg: MaskedLMConfig = None, seed=1, evaluation=False
    ):
        assert objective in ("mlm", "clm")
        assert objective == "clm" or mask_cfg is not None
        self.dataset = dataset
        self.objective = objective
        self.pad = pad
        self.lang_id = lang_id
        self.mask_cfg = mask_cfg
        self.seed = seed
        self.epoch = 1
        self.evaluation = evaluation
        self.round = 0  # set by ObjectiveZipDataset before each item

    @property
    def sizes(self):
        return self.dataset.sizes

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, index):
        item = self.dataset[index]
        if torch.is_tensor(item):
            item = {"tokens": item, "langs": None, "positions": None}
        return dict(item, id=index, round=self.round)

    def num_tokens(self, index):
        return self.dataset.sizes[index]

    def size(self, index):
        return self.dataset.sizes[index]

    def num_tokens_vec(self, indices):
        return np.asarray(self.dataset.sizes)[indices]

    def ordered_indices(self):
        """Shuffled, then sorted by length: batches of like lengths, few pads (XLM's ``group_by_size``
        for parallel data; stream blocks all have one length, so they stay shuffled)."""
        order = np.random.permutation(len(self))
        return order[np.argsort(np.asarray(self.sizes)[order], kind="mergesort")]

    def set_epoch(self, epoch):
        self.epoch = epoch
        if hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(epoch)

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return False

    def collater(self, samples):
        if not samples:
            return {}
        tokens = collate_right([s["tokens"] for s in samples], self.pad)
        if samples[0]["langs"] is None:
            langs = torch.full_like(tokens, self.lang_id)
        else:
            langs = collate_right([s["langs"] for s in samples], 0)
        if samples[0]["positions"] is None:
            positions = None
        else:
            positions = collate_right([s["positions"] for s in samples], 0)

        extra = {}
        if self.objective == "mlm":
            if self.evaluation:  # the same masks at every validation, as XLM's evaluator
                gen = seeded_generator(self.seed, 0, samples[0]["id"])
            else:
                gen = seeded_generator(self.seed, self.epoch, samples[0]["id"], samples[0].get("round", 0))
            inputs, pred_mask, targets = mask_tokens(tokens, self.mask_cfg, gen)
            if self.evaluation:
                full = eval_pred_mask(tokens, self.pad, self.mask_cfg.mask_prob, gen)
                extra["full_mask"] = {
                    "src_tokens": tokens.masked_fill(full, self.mask_cfg.mask_idx),
                    "pred_mask": full,
                    "target": tokens[full],
                }
        else:  # CLM: every position whose next token is real predicts it
            nxt = tokens.roll(-1, dims=1)
            pred_mask = nxt.ne(self.pad)
            pred_mask[:, -1] = False
            inputs, targets = tokens, nxt[pred_mask]
        return {
            "id": torch.LongTensor([s["id"] for s in samples]),
            "nsentences": len(samples),
            "ntokens": int(tokens.ne(self.pad).sum()),  # input tokens, as fairseq's masked_lm (wps)
            "net_input": {
                "src_tokens": inputs,
                "src_langs": langs,
                "positions": positions,
                "causal": self.objective == "clm",
                "pred_mask": pred_mask,
            },
            "target": targets,
            **extra,
        }


def random_draw_datasets(dataset, depth=6):
    """The datasets with random draws (a ``round`` attribute) inside a stack of wrappers."""
    found = []
    for _ in range(depth):
        if dataset is None:
            break
        if hasattr(dataset, "round"):
            found.append(dataset)
        inner = getattr(dataset, "dataset", None)
        dataset = inner if inner is not None else getattr(dataset, "src", None)
    return found


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
    objective's n ordered items in round ``p // n``."""

    POSITIONS = 2**40

    def __init__(self, datasets, max_sizes=None, **kwargs):
        super().__init__(datasets, **kwargs)
        self.max_sizes = max_sizes or {}
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
        for drawing in random_draw_datasets(self.datasets[key]):
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
