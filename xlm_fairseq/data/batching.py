"""Work around a batching bug of fairseq-fixed 0.12.3.1.

Its ``data_utils.batch_by_size`` drops the last ``len(indices) % required_batch_size_multiple``
indices (5 sentences and the default multiple of 8 give no batch at all), so fairseq-generate
would silently skip up to 7 test sentences. Datasets the XLM tasks hand to fairseq's iterators
batch through :func:`batch_by_size_complete`, which puts any dropped indices in a final batch."""

import numpy as np
from fairseq.data import data_utils


def batches_of(indices, num_tokens, max_tokens=None, max_sentences=None, required_batch_size_multiple=1):
    """fairseq's ``batch_by_size`` of ``indices`` (``num_tokens``: each one's tokens, in their order),
    with the indices it drops put in a final batch."""
    indices = np.asarray(indices, dtype=np.int64)
    num_tokens = np.asarray(num_tokens, dtype=np.int64)
    batches = data_utils.batch_by_size(
        indices,
        num_tokens_fn=None,
        num_tokens_vec=num_tokens,
        max_tokens=max_tokens,
        max_sentences=max_sentences,
        required_batch_size_multiple=required_batch_size_multiple,
    )
    batched = np.concatenate(batches) if len(batches) else np.array([], dtype=np.int64)
    missing = np.isin(indices, batched, invert=True)
    if missing.any():
        batches = list(batches) + [indices[missing]]  # in the caller's order
    return batches


def batch_by_size_complete(dataset, indices, max_tokens=None, max_sentences=None, required_batch_size_multiple=1):
    return batches_of(indices, dataset.num_tokens_vec(indices), max_tokens, max_sentences, required_batch_size_multiple)


class CompleteBatchesMixin:
    """``batch_by_size`` that never loses indices (see module doc)."""

    def batch_by_size(self, indices, max_tokens=None, max_sentences=None, required_batch_size_multiple=1):
        return batch_by_size_complete(self, indices, max_tokens, max_sentences, required_batch_size_multiple)
