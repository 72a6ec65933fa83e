"""Greedy decoding (XLM's ``generate``), for online back-translation: no beam search's bookkeeping."""

import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from xlm_fairseq.modules.attention import KVCache
from xlm_fairseq.modules.transformer import XLMTransformer

GREEDY_SYNC_EVERY = 8  # decoding steps on an accelerator between two "all finished?" checks


@torch.inference_mode()
def generate_greedy(
    decoder: XLMTransformer,
    src_enc: Tensor,
    src_padding_mask: Tensor,
    tgt_langs: Tensor,
    max_len: int,
    eos: int,
    min_len: int = 0,
    shrink: Optional[bool] = None,
) -> Tuple[Tensor, Tensor]:
    """Greedy translation by ``decoder`` (a decoder stack) of the encoder output ``src_enc``.

    At most ``max_len`` words, then ``</s>``; ``</s>`` may come first (an empty sentence, as in XLM)
    unless ``min_len`` is 1; ``<pad>`` is never chosen (here it would be hidden as padding). Token for
    token what fairseq's SequenceGenerator gives at beam 1 with the same ``--min-len`` and a length
    limit of ``max_len``. Keys/values live in one :class:`KVCache` sized for ``max_len`` steps. On CPU
    finished sentences leave the batch; on an accelerator the batch keeps its shape and is asked
    whether all have finished every ``GREEDY_SYNC_EVERY`` steps only, so that steps do not wait for
    the device (``shrink`` chooses otherwise). Returns (B x (max_len + 1) tokens: each sentence's
    words, ``</s>``, then ``<pad>``; B lengths, ``</s>`` included)."""
    pad = decoder.pad_index
    bs = src_enc.size(0)
    device = src_enc.device
    shrink = device.type == "cpu" if shrink is None else shrink
    out = torch.full((bs, max_len + 1), pad, dtype=torch.long, device=device)
    lengths = torch.full((bs,), max_len + 1, dtype=torch.long, device=device)
    finished = torch.zeros(bs, dtype=torch.bool, device=device)
    alive = torch.arange(bs, device=device)
    cache = KVCache(capacity=max_len)
    word = torch.full((bs, 1), eos, dtype=torch.long, device=device)
    for step in range(max_len + 1):
        if step == max_len:
            if shrink:
                out[alive, step] = eos
            else:
                out[:, step] = out[:, step].fill_(eos).masked_fill(finished, pad)
            break
        x = decoder(word, langs=tgt_langs, causal=True, src_enc=src_enc, src_padding_mask=src_padding_mask, cache=cache)
        scores = decoder.pred_layer(x[:, -1])
        scores[:, pad] = -math.inf
        if step < min_len:
            scores[:, eos] = -math.inf
        word = scores.argmax(-1)
        if not shrink:
            word = word.masked_fill(finished, pad)
            out[:, step] = word
            ended = word.eq(eos)
            lengths = lengths.masked_fill(ended, step + 1)
            finished = finished | ended
            if (step + 1) % GREEDY_SYNC_EVERY == 0 and finished.all():
                break
            word = word[:, None]
            continue
        out[alive, step] = word
        done = word.eq(eos)
        if done.any():
            lengths[alive[done]] = step + 1
            keep = (~done).nonzero().squeeze(1)
            if keep.numel() == 0:
                break
            alive, word, tgt_langs = alive[keep], word[keep], tgt_langs[keep]
            src_enc, src_padding_mask = src_enc[keep], src_padding_mask[keep]
            cache.select(keep)
        word = word[:, None]
    return out, lengths
