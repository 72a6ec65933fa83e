"""Rows of sentence classification as XLM's XNLI code feeds them to the encoder: ``</s> a </s>``, or for
a pair ``</s> a </s> b </s>`` (XLM's ``concat_batches`` without position reset: positions run on
across the pair), one language id for the whole row, the label's index as target. In training, a
sentence of more than ``max_len - 2`` subwords is cut to its first ``max_len - 2`` (XLM's
``truncate``: ``max_len`` counts the sentence's two ``</s>``); evaluation rows are whole."""

from typing import List, Optional, Sequence

import numpy as np
import torch
from fairseq.data import FairseqDataset, data_utils

from .batching import CompleteBatchesMixin


def encode_row(
    pieces_a: List[int], pieces_b: Optional[List[int]], eos: int, max_len: Optional[int], max_positions: int
):
    """(token ids of the row, whether it was truncated). ``pieces_*`` hold no ``</s>``; ``max_len``
    (None: no limit) bounds each sentence with its two ``</s>`` (XLM's sentences are ``</s> w .. </s>``,
    its truncate keeps ``max_len`` tokens of them), ``max_positions`` the whole row."""
    truncated = False
    sentences = []
    for pieces in (pieces_a, pieces_b):
        if pieces is None:
            continue
        if max_len is not None and len(pieces) + 2 > max_len:
            pieces, truncated = pieces[: max_len - 2], True
        sentences.append(pieces)
    row = [eos]
    for pieces in sentences:
        row += pieces + [eos]
    if len(row) > max_positions:  # a model with fewer positions than the two sentences need
        row, truncated = row[: max_positions - 1] + [eos], True
    return row, truncated


class SentenceClassificationDataset(CompleteBatchesMixin, FairseqDataset):
    """Classification rows (of one or several files and languages), each with its language id and
    (unless unlabelled) its label index; ``model_langs``, the id the model reads each row with
    (``--lang-id``), is its own language's unless given. Batches: ``net_input`` = ``src_tokens``
    (B x T, padded on the right), ``src_lengths``, ``src_langs`` (B, the model's ids); ``langs`` (B,
    the rows' languages: accuracy per language); ``target`` (B); ``id``; ``nsentences``; ``ntokens``."""

    def __init__(
        self,
        rows: Sequence[Sequence[int]],
        langs: Sequence[int],
        labels: Optional[Sequence[int]],
        pad: int,
        shuffle: bool,
        seed: int,
        group_by_length: bool = False,
        model_langs: Optional[Sequence[int]] = None,
    ):
        assert len(rows) == len(langs) and (labels is None or len(labels) == len(rows))
        self.rows = [torch.as_tensor(r, dtype=torch.long) for r in rows]
        self.langs = np.asarray(langs, dtype=np.int64)
        self.model_langs = self.langs if model_langs is None else np.asarray(model_langs, dtype=np.int64)
        assert len(self.model_langs) == len(self.langs)
        self.labels = None if labels is None else np.asarray(labels, dtype=np.int64)
        self.sizes = np.array([len(r) for r in self.rows], dtype=np.int64)
        self.pad, self.shuffle, self.seed, self.epoch = pad, shuffle, seed, 1
        self.group_by_length = group_by_length

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, index):
        item = {"id": index, "tokens": self.rows[index], "lang": int(self.langs[index])}
        item["model_lang"] = int(self.model_langs[index])
        if self.labels is not None:
            item["label"] = int(self.labels[index])
        return item

    def collater(self, samples):
        if not samples:
            return {}
        tokens = data_utils.collate_tokens([s["tokens"] for s in samples], self.pad)
        lengths = torch.LongTensor([len(s["tokens"]) for s in samples])
        batch = {
            "id": torch.LongTensor([s["id"] for s in samples]),
            "net_input": {
                "src_tokens": tokens,
                "src_lengths": lengths,
                "src_langs": torch.LongTensor([s["model_lang"] for s in samples]),
            },
            "langs": torch.LongTensor([s["lang"] for s in samples]),
            "nsentences": len(samples),
            "ntokens": int(lengths.sum()),
        }
        if "label" in samples[0]:
            batch["target"] = torch.LongTensor([s["label"] for s in samples])
        return batch

    def num_tokens(self, index):
        return int(self.sizes[index])

    def num_tokens_vec(self, indices):
        return self.sizes[indices]

    def size(self, index):
        return int(self.sizes[index])

    def set_epoch(self, epoch):
        self.epoch = epoch

    def ordered_indices(self):
        """Shuffling (training): a seeded random order per epoch, so batches are random rows as in
        XLM (where grouping by length would put correlated labels together: MNLI's correlate with
        hypothesis length); with ``group_by_length`` sorted by length, ties in that random order
        (fairseq's ``sentence_prediction``). Without shuffling: by length."""
        if not self.shuffle:
            return np.argsort(self.sizes, kind="stable")
        with data_utils.numpy_seed(self.seed, self.epoch):
            order = np.random.permutation(len(self))
        return order[np.argsort(self.sizes[order], kind="stable")] if self.group_by_length else order

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return not self.shuffle
