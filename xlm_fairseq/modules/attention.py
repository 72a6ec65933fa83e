"""Multi-head attention with XLM's parameter names (``q_lin``, ``k_lin``, ``v_lin``, ``out_lin``), and
the key/value caches of incremental decoding and of beam search."""

from typing import Dict, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from xlm_fairseq.modules.kernels import CPUAttentionWithDropout

INITIAL_CACHE_STEPS = 16  # self-attention buffers start this long and double when full


class KVCache:
    """What a decoder keeps between steps: per self-attention layer the keys/values of the steps so far,
    in buffers written in place (doubling when full: no concatenation per step); per encoder-decoder
    attention layer the source's keys/values, projected once. ``length`` steps are stored; the stack
    calls :meth:`advance` after each step. The one cache of greedy decoding (``generation.py``) and of
    fairseq's incremental decoding (``SequenceGenerator``).

    The source may have one row per sentence where the steps have one per hypothesis (a beam's
    ``group`` of consecutive rows, see ``XLMEncoder.reorder_encoder_out``)."""

    def __init__(self, capacity: int = INITIAL_CACHE_STEPS):
        self.capacity = max(1, capacity)
        self.length = 0
        self.steps: Dict[int, Tuple[Tensor, Tensor]] = {}  # layer -> (B x H x capacity x D) x 2
        # the buffers a reordering writes into, so that it never allocates (nor faults in fresh pages)
        self.spare: Dict[int, Tuple[Tensor, Tensor]] = {}
        self.source: Dict[int, Tuple[Tensor, Tensor]] = {}  # layer -> (B / group x H x S x D) x 2
        self.qkv: Dict[int, Tuple[Tensor, Tensor]] = {}  # layer -> self-attention's q, k, v weights as one

    def fused_qkv(self, layer: int, attention: "MultiHeadAttention") -> Tuple[Tensor, Tensor]:
        """Layer ``layer``'s q, k, v projections as one (3C x C weight, 3C bias), built at its first step:
        a decoding step's projections of a few rows are mostly a call's fixed cost (3 of 128 x 128 in
        bf16 on CPU: ~55 us each, one of 128 x 384: ~85 us), and the weights do not change while it decodes."""
        if layer not in self.qkv:
            lins = (attention.q_lin, attention.k_lin, attention.v_lin)
            self.qkv[layer] = (torch.cat([m.weight for m in lins]), torch.cat([m.bias for m in lins]))
        return self.qkv[layer]

    def append(self, layer: int, k: Tensor, v: Tensor) -> Tuple[Tensor, Tensor]:
        """Store this step's keys/values (B x H x T x D) after the earlier ones; all of them so far."""
        end = self.length + k.size(2)
        if layer not in self.steps or self.steps[layer][0].size(2) < end:
            size = max(end, self.capacity if layer not in self.steps else 2 * self.steps[layer][0].size(2))
            grown = tuple(x.new_empty(x.size(0), x.size(1), size, x.size(3)) for x in (k, v))
            if layer in self.steps:
                for new, old in zip(grown, self.steps[layer]):
                    new[:, :, : self.length] = old[:, :, : self.length]
            self.steps[layer] = grown
            self.spare.pop(layer, None)
        keys, values = self.steps[layer]
        keys[:, :, self.length : end] = k
        values[:, :, self.length : end] = v
        return keys[:, :, :end], values[:, :, :end]

    def advance(self, steps: int) -> None:
        self.length += steps

    def select(self, order: Tensor) -> None:
        """Keep the batch rows ``order`` (a beam's reordering, or finished sentences leaving). Only the
        steps stored so far are copied, into the spare buffers, which then swap with the current ones.
        The source's keys/values are the same for every hypothesis of a sentence, so a reordering within
        beams leaves them; only when the batch changes size are they selected (as fairseq's
        ``MultiheadAttention`` does): per sentence kept, the first of its ``group`` rows names it."""
        if not self.steps:  # nothing decoded yet (and so no source projected)
            return
        rows = next(iter(self.steps.values()))[0].size(0)
        self._select_steps(order)
        if order.numel() == rows:
            return
        for i, (k, v) in self.source.items():
            group = rows // k.size(0)
            sentences = order if group == 1 else order[::group] // group
            self.source[i] = (k.index_select(0, sentences), v.index_select(0, sentences))

    def _select_steps(self, rows: Tensor) -> None:
        """Keep the buffers' rows ``rows`` (dim 0): the steps stored so far are copied into the spare
        buffers, which then swap with the current ones (no allocation, no fresh pages)."""
        n = rows.numel()
        for i, (k, v) in self.steps.items():
            spare = self.spare.get(i)
            if spare is None or spare[0].size(0) < n:  # (growing the buffers drops the spare)
                spare = (torch.empty_like(k[:n]), torch.empty_like(v[:n]))
            spare = tuple(buf[:n] for buf in spare)
            for old, new in zip((k, v), spare):
                torch.index_select(old[:, :, : self.length], 0, rows, out=new[:, :, : self.length])
            self.steps[i], self.spare[i] = spare, (k, v)

    def visible(self) -> Optional[Tensor]:
        """Which of the stored steps a query may see: here all of its own row's (None)."""
        return None


class BeamKVCache(KVCache):
    """A beam search's cache, kept by sentence: a step's keys/values stay where they were computed (per
    self-attention layer S x H x steps x beam x D, the ``beam`` hypotheses of a sentence side by side),
    and each hypothesis' ancestry (S x beam x steps) says which of its sentence's hypotheses computed
    each of its steps. A reordering of the beams rewrites the ancestry instead of copying every layer's
    keys and values (bench/README.md, "Beam reorder"). Self-attention reads a sentence's steps x beam keys
    as one matrix (no copy: steps outermost), its ``beam`` queries together, and :meth:`visible` hides
    from each hypothesis the steps that are not its ancestors'."""

    def __init__(self, beam: int, capacity: int):
        super().__init__(capacity)
        self.beam = beam
        self.ancestry: Optional[Tensor] = None
        self._visible: Optional[Tensor] = None

    def append(self, layer: int, k: Tensor, v: Tensor) -> Tuple[Tensor, Tensor]:
        """Store this step's keys/values ((S x beam) x H x 1 x D); all of a sentence's so far,
        S x H x (steps x beam) x D."""
        rows, heads, _, dim = k.shape
        if layer not in self.steps:
            shape = (rows // self.beam, heads, self.capacity, self.beam, dim)
            self.steps[layer] = (k.new_empty(shape), v.new_empty(shape))
            if self.ancestry is None:
                self.ancestry = torch.empty(shape[0], self.beam, self.capacity, dtype=torch.long, device=k.device)
        keys, values = self.steps[layer]
        keys[:, :, self.length] = k.view(-1, self.beam, heads, dim).transpose(1, 2)
        values[:, :, self.length] = v.view(-1, self.beam, heads, dim).transpose(1, 2)
        end = self.length + 1
        return keys[:, :, :end].flatten(2, 3), values[:, :, :end].flatten(2, 3)

    def visible(self) -> Tensor:
        """S x 1 x beam x (steps x beam): hypothesis h sees at each step its ancestor's keys only."""
        if self._visible is None:
            beams = torch.arange(self.beam, device=self.ancestry.device)
            self.ancestry[:, :, self.length] = beams  # this step's keys are each hypothesis' own
            self._visible = (self.ancestry[:, :, : self.length + 1, None] == beams).flatten(2).unsqueeze(1)
        return self._visible

    def advance(self, steps: int) -> None:
        assert steps == 1, "a beam search decodes one step at a time"
        super().advance(steps)
        self._visible = None

    def select(self, order: Tensor) -> None:
        """Hypothesis rows ``order`` go on, each from a hypothesis of its own sentence (a beam search's
        reordering, and finished sentences leaving): the ancestry follows, and only when sentences
        leave are their keys/values dropped."""
        if self.ancestry is None:
            return
        parents = order.view(-1, self.beam)
        sentences = parents[:, 0] // self.beam
        parents = parents % self.beam
        if sentences.numel() != self.ancestry.size(0):  # finished sentences leave
            self._select_steps(sentences)
            self.source = {
                i: (k.index_select(0, sentences), v.index_select(0, sentences)) for i, (k, v) in self.source.items()
            }
            self.ancestry = self.ancestry.index_select(0, sentences)
        done = self.ancestry[:, :, : self.length]
        done.copy_(done.gather(1, parents[:, :, None].expand_as(done)))


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention: self-attention (``kv`` None) or attention over ``kv``.

    With a :class:`KVCache` (incremental decoding), self-attention appends the new steps to layer
    ``layer``'s buffers and attends over all of them; encoder-decoder attention projects the source once.
    """

    def __init__(self, n_heads: int, dim: int, dropout: float):
        super().__init__()
        assert dim % n_heads == 0, "dim must be a multiple of n_heads"
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.dropout = dropout
        self.q_lin = nn.Linear(dim, dim)
        self.k_lin = nn.Linear(dim, dim)
        self.v_lin = nn.Linear(dim, dim)
        self.out_lin = nn.Linear(dim, dim)

    def _heads(self, x: Tensor) -> Tensor:  # B x T x C -> B x H x T x D
        return x.view(x.size(0), -1, self.n_heads, self.head_dim).transpose(1, 2)

    def forward(
        self,
        x: Tensor,
        key_padding_mask: Optional[Tensor] = None,
        kv: Optional[Tensor] = None,
        causal: bool = False,
        cache: Optional[KVCache] = None,
        layer: int = 0,
    ) -> Tensor:
        bs, qlen, dim = x.size()
        # a decoding step in bf16 on CPU attends in fp32, its caches kept in fp32: oneDNN's bf16 matmuls of a
        # query or a beam's few per row cost more than fp32's (measured in bench/README.md); and it projects
        # q, k, v as one (in fp32 on CPU three are as fast: left so)
        upcast = cache is not None and x.dtype == torch.bfloat16 and x.device.type == "cpu"
        if kv is None and upcast:
            q, k, v = (self._heads(y) for y in F.linear(x, *cache.fused_qkv(layer, self)).float().split(dim, -1))
        elif kv is None:  # self-attention
            q, k, v = self._heads(self.q_lin(x)), self._heads(self.k_lin(x)), self._heads(self.v_lin(x))
        else:
            q = self._heads(self.q_lin(x))
            q = q.float() if upcast else q
            if cache is not None and layer in cache.source:  # source already projected
                k, v = cache.source[layer]
            else:
                k, v = self._heads(self.k_lin(kv)), self._heads(self.v_lin(kv))
                if cache is not None:  # laid out once as the steps' matmuls read them (no copy per step)
                    k, v = (k.float(), v.float()) if upcast else (k, v)
                    k, v = k.contiguous(), v.contiguous()
                    cache.source[layer] = (k, v)
        visible = None
        if kv is None and cache is not None:
            k, v = cache.append(layer, k, v)
            visible = cache.visible()

        group = bs // k.size(0)
        if group > 1:  # one source row per sentence, for its `group` hypotheses: their queries go together
            q = q.reshape(k.size(0), group, self.n_heads, qlen, self.head_dim).transpose(1, 2)
            q = q.reshape(k.size(0), self.n_heads, group * qlen, self.head_dim)
        # softmax(q k^T / sqrt(head_dim)) v; neither path keeps the B x H x qlen x klen weights for the
        # backward pass: torch's fused kernels (flash / memory-efficient on GPU, flash on CPU), or on
        # CPU training with attention dropout, where torch falls back to the unfused maths, our own
        klen = k.size(2)
        allowed, is_causal = None, False
        if causal and qlen > 1:
            if key_padding_mask is None and qlen == klen:
                is_causal = True
            else:  # query i (at absolute step klen-qlen+i) sees keys 0..klen-qlen+i
                allowed = torch.ones(qlen, klen, dtype=torch.bool, device=x.device).tril(klen - qlen)[None, None]
        if key_padding_mask is not None:
            keys = ~key_padding_mask[:, None, None, :]
            allowed = keys if allowed is None else allowed & keys
        if visible is not None:
            allowed = visible if allowed is None else allowed & visible
        on_cpu, drops = x.device.type == "cpu", self.training and self.dropout > 0
        # (a compiled stack's attention with dropout is torch's: the compiler cannot trace our kernel's seed)
        with_dropout = on_cpu and drops and not torch.compiler.is_compiling()
        decoding = cache is not None and not is_causal and not self.training
        by_matmuls = on_cpu and not drops and (decoding or q.dtype != torch.float32)
        if is_causal and (with_dropout or by_matmuls):  # our paths take the causal mask as a tensor
            allowed = torch.ones(qlen, klen, dtype=torch.bool, device=x.device).tril()[None, None]
        if with_dropout:
            context = CPUAttentionWithDropout.apply(q * self.head_dim**-0.5, k, v, allowed, self.dropout)
        elif by_matmuls:
            # two small matmuls: for a decoding step on CPU (a query or a beam's few per row) they cost less
            # than the flash kernel's tiling, and in bf16 the CPU flash kernel's backward pass is slower
            # than this (bench/README.md)
            w = torch.matmul(q * self.head_dim**-0.5, k.transpose(-1, -2))
            if allowed is not None:
                w = w.masked_fill(~allowed, torch.finfo(w.dtype).min)  # a row with no key: uniform, not NaN
            context = torch.matmul(w.softmax(-1), v)
        else:
            context = F.scaled_dot_product_attention(
                q, k, v, attn_mask=allowed, dropout_p=self.dropout if self.training else 0.0, is_causal=is_causal
            )
        if group > 1:
            context = context.view(k.size(0), self.n_heads, group, qlen, self.head_dim).transpose(1, 2)
            context = context.reshape(bs, self.n_heads, qlen, self.head_dim)
        context = context.transpose(1, 2).reshape(bs, qlen, dim)
        return self.out_lin(context.to(x.dtype) if upcast else context)
