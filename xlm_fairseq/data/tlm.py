"""TLM samples (XLM's ``concat_batches``): ``</s> s1 </s> </s> s2 </s>``, positions restarting at the
second ``</s>``, language ids per half."""

import numpy as np
import torch
from fairseq.data import FairseqDataset


class TLMPairDataset(FairseqDataset):
    """Items of ``src`` / ``tgt`` are ``w1 .. wn </s>`` (fairseq binarisation). Pairs with a side of
    more than ``max_len`` subwords are dropped at construction (XLM's ``--max_len``, per side)."""

    def __init__(self, src, tgt, src_lang_id: int, tgt_lang_id: int, eos: int, max_len: int):
        assert len(src) == len(tgt), "parallel datasets differ in length"
        self.src, self.tgt = src, tgt
        self.src_lang_id, self.tgt_lang_id = src_lang_id, tgt_lang_id
        self.eos = eos
        src_sizes, tgt_sizes = np.asarray(src.sizes), np.asarray(tgt.sizes)
        all_sizes = src_sizes + tgt_sizes + 2
        self.index = np.nonzero((src_sizes - 1 <= max_len) & (tgt_sizes - 1 <= max_len))[0]
        self.n_dropped = len(src) - len(self.index)
        self.sizes = all_sizes[self.index]

    def __len__(self):
        return len(self.index)

    def __getitem__(self, i):
        j = self.index[i]
        eos = torch.LongTensor([self.eos])
        s1, s2 = torch.cat([eos, self.src[j]]), torch.cat([eos, self.tgt[j]])
        return {
            "tokens": torch.cat([s1, s2]),
            "positions": torch.cat([torch.arange(len(s1)), torch.arange(len(s2))]),
            "langs": torch.cat([torch.full_like(s1, self.src_lang_id), torch.full_like(s2, self.tgt_lang_id)]),
        }

    def num_tokens(self, i):
        return self.sizes[i]

    def size(self, i):
        return self.sizes[i]
