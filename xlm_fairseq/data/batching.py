"""Work around a batching bug of fairseq-fixed 0.12.3.1.

Its ``data_utils.batch_by_size`` drops the last ``len(indices) % required_batch_size_multiple``
indices (5 sentences and the default multiple of 8 give no batch at all), so fairseq-generate
would silently skip up to 7 test sentences. Datasets the XLM tasks hand to fairseq's iterators
batch through :func:`batch_by_size_complete`, which puts any dropped indices in a final batch."""

import numpy as np
from fairseq.data import data_utils


def batch_by_size_complete(dataset, indices, max_tokens=None, max_sentences=None, required_batch_size_multiple=1):
    batches = data_utils.batch_by_size(
        indices,
        num_tokens_fn=dataset.num_tokens,
        num_tokens_vec=np.asarray(dataset.num_tokens_vec(indices), dtype=np.int64),
        max_tokens=max_tokens,
        max_sentences=max_sentences,
        required_batch_size_multiple=required_batch_size_multiple,
    )
    batched = np.concatenate(batches) if len(batches) else np.array([], dtype=np.int64)
    missing = np.setdiff1d(np.asarray(indices), batched, assume_unique=False)
    if len(missing):
        # keep the caller's order among the missing ones
        order = np.asarray(indices)[np.isin(np.asarray(indices), missing)]
        batches = list(batches) + [order.astype(np.int64)]
    return batches


class CompleteBatchesMixin:
    """``batch_by_size`` that never loses indices (see module doc)."""

    def batch_by_size(self, indices, max_tokens=None, max_sentences=None, required_batch_size_multiple=1):
        return batch_by_size_complete(self, indices, max_tokens, max_sentences, required_batch_size_multiple)
