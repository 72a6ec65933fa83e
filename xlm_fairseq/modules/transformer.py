"""XLM's transformer stack (``TransformerModel`` of XLM's ``src/model/transformer.py``).

Names follow XLM (and Hugging Face's ``modeling_xlm.py``) so that the two read side by side and
checkpoints convert by renaming only: ``position_embeddings``, ``lang_embeddings``, ``embeddings``,
``layer_norm_emb``, ``attentions.N.{q,k,v,out}_lin``, ``layer_norm1.N``, ``encoder_attn.N``,
``layer_norm15.N``, ``ffns.N.lin{1,2}``, ``layer_norm2.N``, ``pred_layer.proj``. That is also why a
layer is not one ``Block`` module: XLM and HF keep one list per sub-layer, and so do our checkpoints.

Layout differences from XLM: tensors are batch-first (B x T x C) and padding is on the right, as in
Hugging Face. Sentences are ``</s> w1 .. wn </s>`` (XLM uses ``</s>`` as the start symbol too).
Input = token + learned position + language embedding -> LayerNorm (eps 1e-12) -> dropout; post-LN
layers with exact GELU; the output layer is tied to the input embedding, with its own bias.
"""

from typing import Dict, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from xlm_fairseq.modules.attention import KVCache, MultiHeadAttention
from xlm_fairseq.modules.compiled import CompiledStack
from xlm_fairseq.modules.kernels import dropout

LAYER_NORM_EPS = 1e-12  # XLM's value; torch's default 1e-5 would change outputs of converted models
# bf16 on CPU: oneDNN compiles a kernel for every new matrix shape (a large share of a TLM run's time,
# bench/README.md), so batches are padded to multiples of these (rows, length; output-layer rows)
BF16_CPU_BUCKETS = (4, 16, 64)


def bf16_on_cpu(x: Tensor) -> bool:
    return x.dtype == torch.bfloat16 and x.device.type == "cpu" and not torch.compiler.is_compiling()


def sinusoidal_embeddings(n_pos: int, dim: int) -> Tensor:
    """Fixed sin/cos position table of Vaswani et al., as XLM's ``--sinusoidal_embeddings``."""
    pos = torch.arange(n_pos, dtype=torch.float64)[:, None]
    rate = torch.pow(10000.0, 2 * (torch.arange(dim) // 2).double() / dim)[None, :]
    angles = pos / rate
    table = torch.zeros(n_pos, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles[:, 0::2])
    table[:, 1::2] = torch.cos(angles[:, 1::2])
    return table.float()


def count_layers(state: Dict[str, Tensor], prefix: str = "") -> int:
    """How many layers the stack under ``prefix`` of a state dict holds (its ``attentions.N``): the
    weights say it for every format (XLM keeps ``n_layers`` for the encoder, MASS ``n_dec_layers``)."""
    start = prefix + "attentions."
    return len({k[len(start) :].split(".")[0] for k in state if k.startswith(start)})


class TransformerFFN(nn.Module):
    """lin1 -> exact GELU -> lin2 -> dropout (XLM applies no dropout inside the FFN)."""

    def __init__(self, dim: int, hidden_dim: int, dropout: float):
        super().__init__()
        self.lin1 = nn.Linear(dim, hidden_dim)
        self.lin2 = nn.Linear(hidden_dim, dim)
        self.dropout = dropout

    def forward(self, x: Tensor) -> Tensor:
        return dropout(self.lin2(F.gelu(self.lin1(x))), self.dropout, self.training)


class PredLayer(nn.Module):
    """Output projection; its weight is the input embedding matrix, its bias its own."""

    def __init__(self, embeddings: nn.Embedding):
        super().__init__()
        n_words, dim = embeddings.weight.shape
        self.proj = nn.Linear(dim, n_words, bias=True)
        self.proj.weight = embeddings.weight

    def forward(self, x: Tensor) -> Tensor:
        rows = x.shape[:-1].numel()
        if bf16_on_cpu(self.proj.weight) and rows % BF16_CPU_BUCKETS[2]:  # on a bucket's rows, cut back
            scores = self.proj(F.pad(x.reshape(rows, -1), (0, 0, 0, -rows % BF16_CPU_BUCKETS[2])))
            return scores[:rows].view(*x.shape[:-1], -1)
        return self.proj(x)


class XLMTransformer(nn.Module):
    """XLM's TransformerModel: one stack, encoder (``is_decoder=False``) or decoder."""

    def __init__(
        self,
        n_words: int,
        pad_index: int,
        n_langs: int,
        dim: int,
        n_layers: int,
        n_heads: int,
        ffn_dim: int,
        dropout: float,
        attention_dropout: float,
        max_positions: int = 512,
        sinusoidal_positions: bool = False,
        use_lang_emb: bool = True,
        is_decoder: bool = False,
        with_output: bool = True,
    ):
        super().__init__()
        self.pad_index = pad_index
        self.n_langs = n_langs
        self.dim = dim
        self.n_layers = n_layers
        self.dropout = dropout
        self.is_decoder = is_decoder
        self.max_positions = max_positions

        self.position_embeddings = nn.Embedding(max_positions, dim)
        nn.init.normal_(self.position_embeddings.weight, mean=0, std=dim**-0.5)
        if sinusoidal_positions:
            self.position_embeddings.weight.data.copy_(sinusoidal_embeddings(max_positions, dim))
            self.position_embeddings.weight.requires_grad = False
        # XLM: a language embedding only when there is more than one language and it is switched on
        self.use_lang_emb = use_lang_emb and n_langs > 1
        if self.use_lang_emb:
            self.lang_embeddings = nn.Embedding(n_langs, dim)
            nn.init.normal_(self.lang_embeddings.weight, mean=0, std=dim**-0.5)
        self.embeddings = nn.Embedding(n_words, dim, padding_idx=pad_index)
        nn.init.normal_(self.embeddings.weight, mean=0, std=dim**-0.5)
        nn.init.constant_(self.embeddings.weight[pad_index], 0)
        self.layer_norm_emb = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)

        self.attentions = nn.ModuleList()
        self.layer_norm1 = nn.ModuleList()
        self.ffns = nn.ModuleList()
        self.layer_norm2 = nn.ModuleList()
        if is_decoder:
            self.encoder_attn = nn.ModuleList()
            self.layer_norm15 = nn.ModuleList()
        for _ in range(n_layers):
            self.attentions.append(MultiHeadAttention(n_heads, dim, attention_dropout))
            self.layer_norm1.append(nn.LayerNorm(dim, eps=LAYER_NORM_EPS))
            if is_decoder:
                self.encoder_attn.append(MultiHeadAttention(n_heads, dim, attention_dropout))
                self.layer_norm15.append(nn.LayerNorm(dim, eps=LAYER_NORM_EPS))
            self.ffns.append(TransformerFFN(dim, ffn_dim, dropout))
            self.layer_norm2.append(nn.LayerNorm(dim, eps=LAYER_NORM_EPS))
        self.pred_layer = PredLayer(self.embeddings) if with_output else None
        self.compiled: Optional[CompiledStack] = None  # set by compile_stack (--compile)

    def compile_stack(self, name: str, mode: str = "default") -> None:
        """Train through ``torch.compile`` from now on (``--compile``); state dict and outputs unchanged."""
        self.compiled = CompiledStack(self._stack, name, mode)

    def forward(
        self,
        tokens: Tensor,
        langs: Optional[Tensor] = None,
        positions: Optional[Tensor] = None,
        causal: bool = False,
        src_enc: Optional[Tensor] = None,
        src_padding_mask: Optional[Tensor] = None,
        cache: Optional[KVCache] = None,
    ) -> Tensor:
        """tokens, langs, positions: B x T (langs may also be B: one language per sentence). With a
        ``cache`` (incremental decoding) ``tokens`` are the next steps, at positions ``cache.length`` on
        unless given. Returns the last layer's hidden states, B x T x C (zero at padding)."""
        bs, slen = tokens.size()
        rows, length, _ = BF16_CPU_BUCKETS
        off_bucket = bs % rows or slen % length or (src_enc is not None and src_enc.size(1) % length)
        if cache is None and off_bucket and bf16_on_cpu(self.embeddings.weight):
            return self._bucketed(tokens, langs, positions, causal, src_enc, src_padding_mask)
        padding_mask = tokens.eq(self.pad_index)
        # checked in Python, or on CPU, where reading a tensor costs nothing; on an accelerator a check
        # of given positions (TLM, decoding) would wait for the device at every forward
        on_cpu = tokens.device.type == "cpu"
        if positions is None and cache is not None and cache.length:
            positions = torch.arange(cache.length, cache.length + slen, device=tokens.device)[None, :].expand(bs, slen)
            if cache.length + slen > self.max_positions:
                raise ValueError(f"decoding past --max-positions {self.max_positions}")
        elif positions is None:
            if slen > self.max_positions:
                raise ValueError(f"sequence of {slen} positions exceeds --max-positions {self.max_positions}")
            positions = torch.arange(slen, device=tokens.device)[None, :].expand(bs, slen)
        elif on_cpu and positions.max() >= self.max_positions:
            raise ValueError(
                f"sequence of {int(positions.max()) + 1} positions exceeds --max-positions {self.max_positions}"
            )
        if langs is not None and self.use_lang_emb and langs.dim() == 1:
            langs = langs[:, None].expand(bs, slen)
        # --compile: training passes only; decoding (its cache a Python object) and evaluation stay eager
        compiled = self.compiled is not None and cache is None and self.training
        # in incremental decoding the cache holds earlier steps, which are never padding; on CPU a batch
        # without padding drops the mask (torch's fused kernel), elsewhere, and in a compiled stack (one
        # graph for both), it stays rather than sync
        drop_mask = cache is not None or (on_cpu and not compiled and not padding_mask.any())
        key_padding_mask = None if drop_mask else padding_mask
        if compiled:  # MLM's positions are a broadcast row, TLM's a tensor: one layout, one graph
            x = self.compiled(
                tokens, positions.contiguous(), langs, padding_mask, key_padding_mask, causal, src_enc, src_padding_mask
            )
        else:
            x = self._stack(
                tokens, positions, langs, padding_mask, key_padding_mask, causal, src_enc, src_padding_mask, cache
            )
        if cache is not None:
            cache.advance(slen)
        return x

    def _bucketed(self, tokens, langs, positions, causal, src_enc, src_padding_mask) -> Tensor:
        """:meth:`forward` of a batch padded to the shape buckets of bf16 on CPU (rows and length; padding
        is masked, so real positions are unchanged), cut back to its own shape."""
        bs, slen = tokens.size()
        extra_rows, extra_len = -bs % BF16_CPU_BUCKETS[0], -slen % BF16_CPU_BUCKETS[1]
        tokens = F.pad(tokens, (0, extra_len, 0, extra_rows), value=self.pad_index)
        if positions is not None:
            positions = F.pad(positions.expand(bs, slen), (0, extra_len, 0, extra_rows))
        if langs is not None:
            langs = F.pad(langs, (0, extra_len, 0, extra_rows) if langs.dim() == 2 else (0, extra_rows))
        if src_enc is not None:  # encoder-decoder attention reads one source per row
            extra_src = -src_enc.size(1) % BF16_CPU_BUCKETS[1]
            src_enc = F.pad(src_enc, (0, 0, 0, extra_src, 0, extra_rows))
            src_padding_mask = F.pad(src_padding_mask, (0, extra_src, 0, extra_rows), value=True)
        x = self.forward(
            tokens, langs=langs, positions=positions, causal=causal, src_enc=src_enc, src_padding_mask=src_padding_mask
        )
        return x[:bs, :slen]

    def _stack(
        self,
        tokens: Tensor,
        positions: Tensor,
        langs: Optional[Tensor],
        padding_mask: Tensor,
        key_padding_mask: Optional[Tensor],
        causal: bool,
        src_enc: Optional[Tensor],
        src_padding_mask: Optional[Tensor],
        cache: Optional[KVCache] = None,
    ) -> Tensor:
        """Embeddings and layers: what ``--compile`` compiles (no data-dependent branch: those are
        settled in :meth:`forward`)."""
        x = self.embeddings(tokens) + self.position_embeddings(positions)
        if langs is not None and self.use_lang_emb:
            x = x + self.lang_embeddings(langs)
        x = self.layer_norm_emb(x)
        x = dropout(x, self.dropout, self.training)
        keep = (~padding_mask).unsqueeze(-1).type_as(x)
        x = x * keep

        for i in range(self.n_layers):
            attn = self.attentions[i](x, key_padding_mask, causal=causal, cache=cache, layer=i)
            x = self.layer_norm1[i](x + dropout(attn, self.dropout, self.training))
            if self.is_decoder and src_enc is not None:
                attn = self.encoder_attn[i](x, src_padding_mask, kv=src_enc, cache=cache, layer=i)
                x = self.layer_norm15[i](x + dropout(attn, self.dropout, self.training))
            x = self.layer_norm2[i](x + self.ffns[i](x))
            x = x * keep
        return x
