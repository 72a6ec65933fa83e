"""fairseq's encoder and decoder interfaces around XLM stacks (``modules/transformer.py``)."""

from typing import Dict, List, Optional

import torch
from fairseq.models import FairseqEncoder, FairseqIncrementalDecoder
from torch import Tensor

from xlm_fairseq.modules.attention import KVCache
from xlm_fairseq.modules.transformer import XLMTransformer


def expand_langs(langs: Optional[Tensor], tokens: Tensor) -> Optional[Tensor]:
    if langs is None or langs.dim() == 2:
        return langs
    return langs[:, None].expand_as(tokens)


class XLMEncoder(FairseqEncoder):
    """Wraps an encoder-side :class:`XLMTransformer` in fairseq's encoder interface.

    ``tgt_langs`` only passes through: fairseq's generator calls the decoder with the encoder output
    alone, and XLM's decoder needs the target language at every position.
    """

    def __init__(self, dictionary, transformer: XLMTransformer):
        super().__init__(dictionary)
        self.transformer = transformer

    def forward(self, src_tokens, src_lengths=None, src_langs=None, tgt_langs=None, **kwargs):
        x = self.transformer(src_tokens, langs=expand_langs(src_langs, src_tokens))
        return {
            "encoder_out": [x],  # B x T x C
            "encoder_padding_mask": [src_tokens.eq(self.transformer.pad_index)],
            "tgt_langs": [] if tgt_langs is None else [tgt_langs],
        }

    def reorder_encoder_out(self, encoder_out: Dict[str, List[Tensor]], new_order):
        """Rows ``new_order`` of the decoder's batch. fairseq's generators repeat each sentence for its
        beam and then reorder hypotheses within sentences, so the source stays one row per sentence,
        read by ``group`` consecutive rows (the encoder-decoder attention reads it once for them all):
        no copy of B x beam sources at every step. An order of any other kind gets a source per row."""
        source, padding_mask = encoder_out["encoder_out"][0], encoder_out["encoder_padding_mask"][0]
        n, group = source.size(0), encoder_out.get("group", [1])[0]
        sentences = new_order // group  # of each new row
        new_group = group if group > 1 else new_order.numel() // n
        by_group = sentences.view(-1, new_group) if new_group and new_order.numel() % new_group == 0 else None
        if by_group is not None and bool(by_group.eq(by_group[:, :1]).all()):
            sentences, group = by_group[:, 0], new_group
        else:
            group = 1
        if not (sentences.numel() == n and torch.equal(sentences, torch.arange(n, device=sentences.device))):
            source, padding_mask = source.index_select(0, sentences), padding_mask.index_select(0, sentences)
        langs = [t.index_select(0, new_order) for t in encoder_out["tgt_langs"]]
        return {"encoder_out": [source], "encoder_padding_mask": [padding_mask], "tgt_langs": langs, "group": [group]}

    def max_positions(self):
        return self.transformer.max_positions


class XLMDecoder(FairseqIncrementalDecoder):
    def __init__(self, dictionary, transformer: XLMTransformer):
        super().__init__(dictionary)
        self.transformer = transformer

    def forward(
        self,
        prev_output_tokens,
        encoder_out=None,
        incremental_state=None,
        features_only: bool = False,
        tgt_langs=None,
        **kwargs,
    ):
        if tgt_langs is None:
            if not encoder_out or not encoder_out["tgt_langs"]:
                raise ValueError("the XLM decoder needs the target language (tgt_langs)")
            tgt_langs = encoder_out["tgt_langs"][0]
        tokens, cache = prev_output_tokens, None
        if incremental_state is not None:  # one new step; earlier ones are in the cache
            cache = self.get_incremental_state(incremental_state, "cache")
            if cache is None:
                cache = KVCache()
            tokens = prev_output_tokens[:, -1:]
        x = self.transformer(
            tokens,
            langs=expand_langs(tgt_langs, tokens),
            causal=True,
            src_enc=encoder_out["encoder_out"][0],
            src_padding_mask=encoder_out["encoder_padding_mask"][0],
            cache=cache,
        )
        if incremental_state is not None:
            self.set_incremental_state(incremental_state, "cache", cache)
        if not features_only:
            x = self.transformer.pred_layer(x)
        return x, {"attn": [None], "inner_states": None}

    def reorder_incremental_state(self, incremental_state, new_order):
        cache = self.get_incremental_state(incremental_state, "cache")
        if cache is not None:
            cache.select(new_order)
            self.set_incremental_state(incremental_state, "cache", cache)

    def max_positions(self):
        return self.transformer.max_positions
