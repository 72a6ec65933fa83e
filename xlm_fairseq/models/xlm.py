"""The XLM transformer (Lample & Conneau, 2019), in one file.

Names follow XLM's ``src/model/transformer.py`` (and Hugging Face's ``modeling_xlm.py``) so that the
two can be read side by side and checkpoints convert by renaming only:
``position_embeddings``, ``lang_embeddings``, ``embeddings``, ``layer_norm_emb``,
``attentions.N.{q,k,v,out}_lin``, ``layer_norm1.N``, ``encoder_attn.N``, ``layer_norm15.N``,
``ffns.N.lin{1,2}``, ``layer_norm2.N``, ``pred_layer.proj``.

Layout differences from XLM: tensors are batch-first (B x T x C) and padding is on the right, as in
Hugging Face. Sentences are ``</s> w1 .. wn </s>`` (XLM uses ``</s>`` as the start symbol too).

One registered model (``xlm_transformer``) serves both uses: under ``cross_lingual_lm`` it is an
encoder-only LM (MLM / TLM / CLM); under ``translation_lm`` the task asks for a decoder, built from the
same layer classes, with encoder-decoder attention.
"""

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.dataclass import FairseqDataclass
from fairseq.models import (
    FairseqEncoder,
    FairseqEncoderDecoderModel,
    FairseqEncoderModel,
    FairseqIncrementalDecoder,
    register_model,
    register_model_architecture,
)
from omegaconf import II
from torch import Tensor

from preprocess.langs import parse_langs
from xlm_fairseq.classification_hub import XLMClassificationHubInterface
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.hub import (
    NOT_A_TRANSLATION_MODEL,
    XLMHubInterface,
    is_classifier,
    is_translation_model,
    load_checkpoint,
)
from xlm_fairseq.safe_load import CHECKPOINT_LANGS
from xlm_fairseq.translation_hub import XLMTranslationHubInterface

LAYER_NORM_EPS = 1e-12  # XLM's value; torch's default 1e-5 would change outputs of converted models
GREEDY_SYNC_EVERY = 8  # decoding steps on an accelerator between two "all finished?" checks
LM_PREFIX = "encoder.transformer."  # where the pretrained LM's parameters sit in a checkpoint's state dict


# --------------------------------------------------------------------------------------------
# building blocks
# --------------------------------------------------------------------------------------------


def sinusoidal_embeddings(n_pos: int, dim: int) -> Tensor:
    """Fixed sin/cos position table of Vaswani et al., as XLM's ``--sinusoidal_embeddings``."""
    pos = torch.arange(n_pos, dtype=torch.float64)[:, None]
    rate = torch.pow(10000.0, 2 * (torch.arange(dim) // 2).double() / dim)[None, :]
    angles = pos / rate
    table = torch.zeros(n_pos, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles[:, 0::2])
    table[:, 1::2] = torch.cos(angles[:, 1::2])
    return table.float()


def _keep_mask(shape, p: float, generator: Optional[torch.Generator] = None):
    """Dropout's keep-mask from 16-bit random integers (four per 64-bit draw), and the scale of what
    is kept. torch's CPU dropout draws one float per element with ``bernoulli_`` (15-20 % of an XLM
    training step on CPU); this draws a quarter as many random numbers. The probability is rounded
    to a multiple of 1/65536 (0.1 -> 0.1000061) and the scale is 1 / (1 - that), so every kept value
    keeps its expectation."""
    dropped = round(p * 65536)
    n = math.prod(shape)
    bits = torch.empty((n + 3) // 4, dtype=torch.int64).random_(-(2**63), None, generator=generator)
    return (bits.view(torch.int16)[:n] >= dropped - 32768).view(shape), 65536.0 / (65536 - dropped)


class _CPUDropout(torch.autograd.Function):
    """Dropout with the mask of :func:`_keep_mask`."""

    @staticmethod
    def forward(ctx, x: Tensor, p: float) -> Tensor:
        keep, ctx.scale = _keep_mask(x.shape, p)
        ctx.save_for_backward(keep)
        return x.mul(keep).mul_(ctx.scale)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None


class _CPUAttentionWithDropout(torch.autograd.Function):
    """dropout(softmax(q k^T + mask)) v for CPU training, keeping only q, k, v and a seed for the
    backward pass, which rebuilds the B x H x qlen x klen weights (FlashAttention's recomputation).

    torch's CPU kernels drop attention weights in the unfused maths with ``bernoulli_`` masks and keep
    the weights, their dropped copy and the mask for every layer: 1.5x slower than this forward and
    backward (135 vs 92 ms for 16 x 4 x 256^2), and about 150 MB more peak memory for 4 layers of
    16 x 256 tokens. ``q`` comes scaled."""

    @staticmethod
    def _weights(q, k, allowed, p, seed):
        scores = torch.matmul(q, k.transpose(2, 3))
        if allowed is not None:
            scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        probs = F.softmax(scores, dim=-1)
        keep, scale = _keep_mask(probs.shape, p, torch.Generator().manual_seed(seed))
        return probs, keep, scale

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, allowed: Optional[Tensor], p: float) -> Tensor:
        seed = int(torch.randint(0, 2**62, (1,)))  # from the default generator: fairseq's --seed holds
        probs, keep, scale = _CPUAttentionWithDropout._weights(q, k, allowed, p, seed)
        ctx.save_for_backward(q, k, v, allowed)
        ctx.p, ctx.seed = p, seed
        return torch.matmul(probs.mul_(keep).mul_(scale), v)

    @staticmethod
    def backward(ctx, grad: Tensor):
        q, k, v, allowed = ctx.saved_tensors
        probs, keep, scale = _CPUAttentionWithDropout._weights(q, k, allowed, ctx.p, ctx.seed)
        grad_v = torch.matmul(probs.mul(keep).mul_(scale).transpose(2, 3), grad)
        grad_probs = torch.matmul(grad, v.transpose(2, 3)).mul_(keep).mul_(scale)
        grad_scores = probs.mul_(grad_probs.sub_((grad_probs * probs).sum(-1, keepdim=True)))
        return torch.matmul(grad_scores, k), torch.matmul(grad_scores.transpose(2, 3), q), grad_v, None, None


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """``F.dropout``; on CPU tensors the cheaper mask of :class:`_CPUDropout` (GPUs keep torch's
    fused kernel)."""
    if not training or p == 0:
        return x
    if x.device.type != "cpu" or p >= 1:
        return F.dropout(x, p=p, training=True)
    return _CPUDropout.apply(x, p)


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention with XLM's parameter names.

    ``cache`` (a dict, incremental decoding only) keeps this layer's keys/values under ``cache_key``:
    self-attention appends the new step (into buffers of ``cache["capacity"]`` steps, written at
    ``cache["step"]``, when those are given), encoder-decoder attention computes the source once.
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
        cache: Optional[Dict[str, Optional[Tensor]]] = None,
        cache_key: str = "",
    ) -> Tensor:
        bs, qlen, dim = x.size()
        q = self._heads(self.q_lin(x))
        if kv is None:  # self-attention
            k, v = self._heads(self.k_lin(x)), self._heads(self.v_lin(x))
            if cache is not None and "step" in cache:  # preallocated (generate_greedy): write in place
                step = cache["step"]
                if cache.get(cache_key + "k") is None:
                    shape = (bs, self.n_heads, cache["capacity"], self.head_dim)
                    cache[cache_key + "k"], cache[cache_key + "v"] = k.new_empty(shape), v.new_empty(shape)
                cache[cache_key + "k"][:, :, step : step + qlen] = k
                cache[cache_key + "v"][:, :, step : step + qlen] = v
                k, v = cache[cache_key + "k"][:, :, : step + qlen], cache[cache_key + "v"][:, :, : step + qlen]
            elif cache is not None:
                if cache.get(cache_key + "k") is not None:
                    k = torch.cat([cache[cache_key + "k"], k], dim=2)
                    v = torch.cat([cache[cache_key + "v"], v], dim=2)
                cache[cache_key + "k"], cache[cache_key + "v"] = k, v
        elif cache is not None and cache.get(cache_key + "k") is not None:  # source already projected
            k, v = cache[cache_key + "k"], cache[cache_key + "v"]
        else:
            k, v = self._heads(self.k_lin(kv)), self._heads(self.v_lin(kv))
            if cache is not None:
                cache[cache_key + "k"], cache[cache_key + "v"] = k, v

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
        if self.training and self.dropout > 0 and x.device.type == "cpu":
            if is_causal:
                allowed = torch.ones(qlen, klen, dtype=torch.bool, device=x.device).tril()[None, None]
            context = _CPUAttentionWithDropout.apply(q * self.head_dim**-0.5, k, v, allowed, self.dropout)
        else:
            context = F.scaled_dot_product_attention(
                q, k, v, attn_mask=allowed, dropout_p=self.dropout if self.training else 0.0, is_causal=is_causal
            )
        return self.out_lin(context.transpose(1, 2).reshape(bs, qlen, dim))


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

    def forward(
        self,
        tokens: Tensor,
        langs: Optional[Tensor] = None,
        positions: Optional[Tensor] = None,
        causal: bool = False,
        src_enc: Optional[Tensor] = None,
        src_padding_mask: Optional[Tensor] = None,
        cache: Optional[Dict[str, Optional[Tensor]]] = None,
    ) -> Tensor:
        """tokens, langs, positions: B x T (langs may also be B: one language per sentence).
        Returns the last layer's hidden states, B x T x C (zero at padding)."""
        bs, slen = tokens.size()
        padding_mask = tokens.eq(self.pad_index)
        # checked in Python, or on CPU, where reading a tensor costs nothing; on an accelerator a check
        # of given positions (TLM, decoding) would wait for the device at every forward
        on_cpu = tokens.device.type == "cpu"
        if positions is None:
            if slen > self.max_positions:
                raise ValueError(f"sequence of {slen} positions exceeds --max-positions {self.max_positions}")
            positions = torch.arange(slen, device=tokens.device)[None, :].expand(bs, slen)
        elif on_cpu and positions.max() >= self.max_positions:
            raise ValueError(
                f"sequence of {int(positions.max()) + 1} positions exceeds --max-positions {self.max_positions}"
            )
        x = self.embeddings(tokens) + self.position_embeddings(positions)
        if langs is not None and self.use_lang_emb:
            if langs.dim() == 1:
                langs = langs[:, None].expand(bs, slen)
            x = x + self.lang_embeddings(langs)
        x = self.layer_norm_emb(x)
        x = dropout(x, self.dropout, self.training)
        keep = (~padding_mask).unsqueeze(-1).type_as(x)
        x = x * keep
        # in incremental decoding the cache holds earlier steps, which are never padding; on CPU a batch
        # without padding drops the mask (torch's fused kernel), elsewhere it stays rather than sync
        key_padding_mask = padding_mask if cache is None and not (on_cpu and not padding_mask.any()) else None

        for i in range(self.n_layers):
            attn = self.attentions[i](x, key_padding_mask, causal=causal, cache=cache, cache_key=f"self{i}")
            x = self.layer_norm1[i](x + dropout(attn, self.dropout, self.training))
            if self.is_decoder and src_enc is not None:
                attn = self.encoder_attn[i](x, src_padding_mask, kv=src_enc, cache=cache, cache_key=f"src{i}")
                x = self.layer_norm15[i](x + dropout(attn, self.dropout, self.training))
            x = self.layer_norm2[i](x + self.ffns[i](x))
            x = x * keep
        return x

    @torch.inference_mode()
    def generate_greedy(
        self,
        src_enc: Tensor,
        src_padding_mask: Tensor,
        tgt_langs: Tensor,
        max_len: int,
        eos: int,
        min_len: int = 0,
        shrink: Optional[bool] = None,
    ) -> Tuple[Tensor, Tensor]:
        """XLM's ``generate``: greedy decoding from the encoder output, for back-translation.

        At most ``max_len`` words, then ``</s>``; ``</s>`` may come first (an empty sentence, as in
        XLM) unless ``min_len`` is 1; ``<pad>`` is never chosen (here it would be hidden as padding).
        Token for token what fairseq's SequenceGenerator gives at beam 1 with the same ``--min-len``
        and a length limit of ``max_len``. Keys/values live in buffers allocated once. On CPU finished
        sentences leave the batch; on an accelerator the batch keeps its shape and is asked whether
        all have finished every ``GREEDY_SYNC_EVERY`` steps only, so that steps do not wait for the
        device (``shrink`` chooses otherwise). Returns (B x (max_len + 1) tokens: each sentence's
        words, ``</s>``, then ``<pad>``; B lengths, ``</s>`` included)."""
        bs = src_enc.size(0)
        device = src_enc.device
        shrink = device.type == "cpu" if shrink is None else shrink
        out = torch.full((bs, max_len + 1), self.pad_index, dtype=torch.long, device=device)
        lengths = torch.full((bs,), max_len + 1, dtype=torch.long, device=device)
        finished = torch.zeros(bs, dtype=torch.bool, device=device)
        alive = torch.arange(bs, device=device)
        cache: Dict = {"step": 0, "capacity": max_len}
        word = torch.full((bs, 1), eos, dtype=torch.long, device=device)
        for step in range(max_len + 1):
            if step == max_len:
                if shrink:
                    out[alive, step] = eos
                else:
                    out[:, step] = out[:, step].fill_(eos).masked_fill(finished, self.pad_index)
                break
            x = self.forward(
                word,
                langs=tgt_langs,
                positions=torch.full_like(word, step),
                causal=True,
                src_enc=src_enc,
                src_padding_mask=src_padding_mask,
                cache=cache,
            )
            scores = self.pred_layer(x[:, -1])
            scores[:, self.pad_index] = -math.inf
            if step < min_len:
                scores[:, eos] = -math.inf
            word = scores.argmax(-1)
            cache["step"] = step + 1
            if not shrink:
                word = word.masked_fill(finished, self.pad_index)
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
                for key, value in cache.items():
                    if isinstance(value, Tensor):
                        cache[key] = value[keep]
            word = word[:, None]
        return out, lengths


# --------------------------------------------------------------------------------------------
# fairseq model
# --------------------------------------------------------------------------------------------


@dataclass
class XLMConfig(FairseqDataclass):
    encoder_embed_dim: int = field(default=1024, metadata={"help": "model dimension (XLM --emb_dim)"})
    encoder_layers: int = field(default=6, metadata={"help": "encoder layers (XLM --n_layers)"})
    encoder_attention_heads: int = field(default=8, metadata={"help": "attention heads (XLM --n_heads)"})
    encoder_ffn_embed_dim: int = field(default=4096, metadata={"help": "FFN hidden size (XLM: 4 x dim)"})
    decoder_embed_dim: int = field(
        default=1024, metadata={"help": "decoder dimension; must equal the encoder's (shared pretrained LM)"}
    )
    decoder_layers: int = field(default=6, metadata={"help": "decoder layers (XLM --n_dec_layers)"})
    decoder_attention_heads: int = field(default=8, metadata={"help": "decoder attention heads"})
    decoder_ffn_embed_dim: int = field(default=4096, metadata={"help": "decoder FFN hidden size"})
    dropout: float = field(default=0.1, metadata={"help": "dropout (XLM --dropout)"})
    attention_dropout: float = field(default=0.1, metadata={"help": "attention dropout (XLM --attention_dropout)"})
    max_positions: int = field(default=512, metadata={"help": "learned positions (XLM N_MAX_POSITIONS)"})
    sinusoidal_embeddings: bool = field(default=False, metadata={"help": "fixed sinusoidal positions"})
    no_lang_emb: bool = field(default=False, metadata={"help": "no language embeddings (XLM --use_lang_emb false)"})
    classifier_dropout: float = field(
        default=0.0,
        metadata={"help": "xlm_classification: dropout before the classification layer (XLM's fine-tuning --dropout)"},
    )
    # the task's languages, saved with the model so that fairseq-generate / -interactive, which set up
    # the task from the command line, still know the language ids (no help: not a CLI option)
    langs: str = II("task.langs")
    share_all_embeddings: bool = field(
        default=False,
        metadata={"help": "encoder and decoder share one embedding matrix (XLM default: separate)"},
    )


def _expand_langs(langs: Optional[Tensor], tokens: Tensor) -> Optional[Tensor]:
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
        x = self.transformer(src_tokens, langs=_expand_langs(src_langs, src_tokens))
        return {
            "encoder_out": [x],  # B x T x C
            "encoder_padding_mask": [src_tokens.eq(self.transformer.pad_index)],
            "tgt_langs": [] if tgt_langs is None else [tgt_langs],
        }

    def reorder_encoder_out(self, encoder_out: Dict[str, List[Tensor]], new_order):
        return {k: [t.index_select(0, new_order) for t in v] for k, v in encoder_out.items()}

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
        tokens, positions, cache = prev_output_tokens, None, None
        if incremental_state is not None:
            cache = self.get_incremental_state(incremental_state, "cache") or {}
            step = prev_output_tokens.size(1) - 1
            tokens = prev_output_tokens[:, -1:]
            positions = torch.full_like(tokens, step)
        x = self.transformer(
            tokens,
            langs=_expand_langs(tgt_langs, tokens),
            positions=positions,
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
        if cache:
            # the source's keys/values are the same for every hypothesis of a sentence, so a reorder
            # within the beams leaves them as they are; only when finished sentences leave the batch
            # (the order changes size) are they selected (fairseq's MultiheadAttention does the same)
            cache = {
                k: v
                if v is None or (k.startswith("src") and v.size(0) == new_order.numel())
                else v.index_select(0, new_order)
                for k, v in cache.items()
            }
            self.set_incremental_state(incremental_state, "cache", cache)

    def max_positions(self):
        return self.transformer.max_positions


class _XLMModelCommon:
    """What the LM, classifier and translation model share: loading."""

    def load_state_dict(self, state_dict, strict=True, model_cfg=None, args=None):
        """A checkpoint made for another vocabulary or language list is one line saying so (was a
        wall of size mismatches)."""
        transformer = self.encoder.transformer
        source = getattr(self.encoder.dictionary, "source_file", None)  # None: the checkpoint's own
        for name, what, have in (
            ("embeddings", "vocabulary", f"the dictionary ({source})" if source else "the dictionary"),
            ("lang_embeddings", "languages", "--langs"),
        ):
            stored = state_dict.get(f"encoder.transformer.{name}.weight")
            own = getattr(transformer, name, None)
            if stored is not None and own is not None and stored.shape[0] != own.weight.shape[0]:
                raise XLMUserError(
                    f"the checkpoint's {what} has {stored.shape[0]} entries, {have} {own.weight.shape[0]}: "
                    "use the model with the data-bin and --langs it was trained with"
                )
        stored_langs = getattr(state_dict, CHECKPOINT_LANGS, None)  # set by fairseq's checkpoint reader
        own_langs = getattr(self.cfg, "langs", None)
        if stored_langs and own_langs and parse_langs(stored_langs, "") != parse_langs(str(own_langs), "--langs"):
            # language ids are positions in the list: resuming in another order swaps the embeddings
            raise XLMUserError(
                f"the checkpoint was trained with --langs {stored_langs}, not {own_langs}: language ids are "
                f"positions in that list; give --langs {stored_langs}"
            )
        return super().load_state_dict(state_dict, strict=strict, model_cfg=model_cfg, args=args)

    @classmethod
    def from_pretrained(cls, model_name_or_path, checkpoint_file="model.pt", data_name_or_path=".", **kwargs):
        """A loaded model with its dictionary and text pipeline, in the hub of its kind: a pretrained
        LM as :class:`xlm_fairseq.hub.XLMHubInterface` (features, fill_mask), a translation model as
        :class:`xlm_fairseq.translation_hub.XLMTranslationHubInterface` (translate), a fine-tuned
        classifier as :class:`xlm_fairseq.classification_hub.XLMClassificationHubInterface` (classify)."""
        x, path = load_checkpoint(model_name_or_path, checkpoint_file, data_name_or_path, **kwargs)
        if is_translation_model(x["models"][0]):
            return XLMTranslationHubInterface(x["args"], x["task"], x["models"], model_dir=path)
        if is_classifier(x["models"][0]):
            return XLMClassificationHubInterface(x["args"], x["task"], x["models"][0], model_dir=path)
        return XLMHubInterface(x["args"], x["task"], x["models"][0], model_dir=path)


class XLMLanguageModel(_XLMModelCommon, FairseqEncoderModel):
    """The pretrained LM (MLM / TLM / CLM): one :class:`XLMTransformer` with its output layer.

    Built by ``xlm_transformer`` for ``--task cross_lingual_lm``; its parameters are
    ``encoder.transformer.*`` (``LM_PREFIX``), as in every checkpoint this plugin has written."""

    def __init__(self, cfg, encoder: "XLMEncoder"):
        super().__init__(encoder)
        self.cfg = cfg

    @property
    def lm(self) -> XLMTransformer:
        return self.encoder.transformer

    def forward(
        self,
        src_tokens,
        src_lengths=None,
        src_langs=None,
        positions=None,
        causal: bool = False,
        pred_mask=None,
        features_only: bool = False,
        **kwargs,
    ):
        x = self.lm(src_tokens, langs=_expand_langs(src_langs, src_tokens), positions=positions, causal=causal)
        if pred_mask is not None:  # only the predicted positions go through the (large) output layer
            x = x[pred_mask]
        return (x if features_only else self.lm.pred_layer(x)), {}


class ClassificationHead(nn.Module):
    """XLM's XNLI head (``proj`` in its ``evaluation/xnli.py``): dropout, then a linear layer, on the
    last layer's state at the first position (the ``</s>`` that opens every row). The dropout is the
    fine-tuning script's own (``--classifier-dropout``; XLM's ``--dropout``, 0 by default and in its
    XNLI command); the stack keeps the pretrained model's dropout."""

    def __init__(self, dim: int, n_classes: int, dropout: float):
        super().__init__()
        self.dropout = dropout
        self.proj = nn.Linear(dim, n_classes)

    def forward(self, first: Tensor) -> Tensor:
        return self.proj(dropout(first, self.dropout, self.training))


def parse_layer_range(value: str, n_layers: int) -> range:
    """XLM's ``--finetune_layers i:j`` -> the layers it trains: 0 is the embeddings (token, position,
    language, their LayerNorm), k the k-th transformer layer; ``_k`` counts from the end (``_1`` is
    the last), so ``0:_1`` is everything and ``3:_1`` layers 3 to the last."""
    try:
        i, j = (int(x.replace("_", "-")) for x in str(value).split(":"))
    except ValueError:
        raise XLMUserError(f"--finetune-layers {value!r}: expected i:j, e.g. 0:_1 (all) or 4:_1") from None
    i, j = (n_layers + x + 1 if x < 0 else x for x in (i, j))
    if not (0 <= i <= n_layers and 0 <= j <= n_layers):
        raise XLMUserError(f"--finetune-layers {value!r}: layers are 0 (embeddings) to {n_layers}")
    return range(i, j + 1)


class XLMClassificationModel(_XLMModelCommon, FairseqEncoderModel):
    """A sentence classifier: the pretrained LM's stack (without its output layer) and
    :class:`ClassificationHead` on the first position. Built by ``xlm_transformer`` for ``--task
    xlm_classification``; its stack's parameters are ``encoder.transformer.*``, as in an LM."""

    def __init__(self, cfg, encoder: "XLMEncoder", n_classes: int):
        super().__init__(encoder)
        self.cfg = cfg
        self.classification_head = ClassificationHead(
            encoder.transformer.dim, n_classes, getattr(cfg, "classifier_dropout", 0.0)
        )

    @property
    def lm(self) -> XLMTransformer:
        return self.encoder.transformer

    def forward(self, src_tokens, src_lengths=None, src_langs=None, features_only: bool = False, **kwargs):
        """Class scores (B x classes), or with ``features_only`` the last layer (B x T x C)."""
        x = self.lm(src_tokens, langs=_expand_langs(src_langs, src_tokens))
        return (x if features_only else self.classification_head(x[:, 0])), {}

    def freeze_outside(self, layer_range: str) -> int:
        """Train only the layers of ``--finetune-layers`` (and the head); returns the number of
        parameters left trainable. fairseq's optimiser skips what needs no gradient."""
        lm, trained = self.lm, parse_layer_range(layer_range, self.lm.n_layers)
        embeddings = [lm.embeddings, lm.position_embeddings, lm.layer_norm_emb]
        if lm.use_lang_emb:
            embeddings.append(lm.lang_embeddings)
        groups = [embeddings] + [
            [lm.attentions[k], lm.layer_norm1[k], lm.ffns[k], lm.layer_norm2[k]] for k in range(lm.n_layers)
        ]
        for index, modules in enumerate(groups):
            for module in modules:
                for p in module.parameters():
                    fixed = module is lm.position_embeddings and self.cfg.sinusoidal_embeddings
                    p.requires_grad_(index in trained and not fixed)
        return sum(p.numel() for p in self.parameters() if p.requires_grad)


@register_model("xlm_transformer", dataclass=XLMConfig)
class XLMModel(_XLMModelCommon, FairseqEncoderDecoderModel):
    """XLM for translation: encoder and decoder stacks, both initialised from one pretrained LM.

    ``build_model`` gives this class for tasks whose ``model_kind`` is ``translation``
    (``translation_lm``), :class:`XLMClassificationModel` for ``classifier`` (``xlm_classification``)
    and :class:`XLMLanguageModel` otherwise, so that checkpoints of every kind name one
    architecture. ``XLMModel.from_pretrained(dir)`` returns the hub of the checkpoint's kind.
    """

    def __init__(self, cfg, encoder: XLMEncoder, decoder: XLMDecoder):
        super().__init__(encoder, decoder)
        self.cfg = cfg

    @classmethod
    def build_model(cls, cfg, task):
        dictionary = task.source_dictionary
        if not task.langs and getattr(cfg, "langs", None):  # task set up without --langs (generate)
            task.set_langs(str(cfg.langs))
        model_langs = str(getattr(cfg, "langs", None) or "")
        if model_langs and task.langs != parse_langs(model_langs, "the model's languages"):
            # language ids are positions in the list: another order translates with the wrong embeddings
            raise XLMUserError(
                f"--langs {','.join(task.langs)} is not the model's language list {model_langs}; "
                "leave --langs out, or give that list in that order"
            )
        n_langs = len(task.langs)

        def stack(prefix, is_decoder, with_output):
            return XLMTransformer(
                n_words=len(dictionary),
                pad_index=dictionary.pad(),
                n_langs=n_langs,
                dim=getattr(cfg, f"{prefix}_embed_dim"),
                n_layers=getattr(cfg, f"{prefix}_layers"),
                n_heads=getattr(cfg, f"{prefix}_attention_heads"),
                ffn_dim=getattr(cfg, f"{prefix}_ffn_embed_dim"),
                dropout=cfg.dropout,
                attention_dropout=cfg.attention_dropout,
                max_positions=cfg.max_positions,
                sinusoidal_positions=cfg.sinusoidal_embeddings,
                use_lang_emb=not cfg.no_lang_emb,
                is_decoder=is_decoder,
                with_output=with_output,
            )

        kind = getattr(task, "model_kind", "lm")
        if kind == "lm":
            return XLMLanguageModel(cfg, XLMEncoder(dictionary, stack("encoder", False, True)))
        if kind == "classifier":  # the LM's output layer is not needed: no unused parameters
            return XLMClassificationModel(cfg, XLMEncoder(dictionary, stack("encoder", False, False)), task.num_classes)
        if cfg.decoder_embed_dim != cfg.encoder_embed_dim:
            raise XLMUserError("--decoder-embed-dim must equal --encoder-embed-dim (one pretrained LM)")
        # the encoder of a translation model never predicts words: no output layer, no unused bias
        encoder = XLMEncoder(dictionary, stack("encoder", False, False))
        decoder = XLMDecoder(dictionary, stack("decoder", True, True))
        if cfg.share_all_embeddings:
            decoder.transformer.embeddings.weight = encoder.transformer.embeddings.weight
            decoder.transformer.pred_layer.proj.weight = encoder.transformer.embeddings.weight
        return cls(cfg, encoder, decoder)

    def forward(
        self,
        src_tokens,
        src_lengths=None,
        prev_output_tokens=None,
        src_langs=None,
        tgt_langs=None,
        features_only: bool = False,
        **kwargs,
    ):
        encoder_out = self.encoder(src_tokens, src_lengths, src_langs=src_langs, tgt_langs=tgt_langs)
        return self.decoder(prev_output_tokens, encoder_out=encoder_out, features_only=features_only)

    def max_decoder_positions(self):
        return self.decoder.max_positions()

    def load_state_dict(self, state_dict, strict=True, model_cfg=None, args=None):
        if state_dict and not any(k.startswith("decoder.") for k in state_dict):
            raise XLMUserError(f"the checkpoint is {NOT_A_TRANSLATION_MODEL}")
        return super().load_state_dict(state_dict, strict=strict, model_cfg=model_cfg, args=args)

    def load_pretrained_lm(self, lm_state: Dict[str, Tensor]) -> List[str]:
        """XLM's ``--reload_model enc,dec``: both stacks from one LM; encoder-decoder attention (and its
        LayerNorm) stay random. Returns the parameter names left as initialised."""
        lm_state = {k[len(LM_PREFIX) :]: v for k, v in lm_state.items() if k.startswith(LM_PREFIX)}
        fresh = []
        for side, module in (("encoder", self.encoder.transformer), ("decoder", self.decoder.transformer)):
            own = module.state_dict()
            for name in own:
                if name in lm_state:
                    if own[name].shape != lm_state[name].shape:
                        raise XLMUserError(
                            f"pretrained parameter {name} has shape {tuple(lm_state[name].shape)}, "
                            f"the {side} expects {tuple(own[name].shape)}"
                        )
                    own[name] = lm_state[name]
                elif name.startswith(("encoder_attn.", "layer_norm15.")):
                    fresh.append(f"{side}.{name}")
                else:
                    raise XLMUserError(f"pretrained checkpoint lacks {name} needed by the {side}")
            module.load_state_dict(own)
        return fresh


def _set_dims(args, dim, layers, heads, prefixes=("encoder", "decoder")):
    for p in prefixes:
        setattr(args, f"{p}_embed_dim", getattr(args, f"{p}_embed_dim", dim))
        setattr(args, f"{p}_layers", getattr(args, f"{p}_layers", layers))
        setattr(args, f"{p}_attention_heads", getattr(args, f"{p}_attention_heads", heads))
        setattr(args, f"{p}_ffn_embed_dim", getattr(args, f"{p}_ffn_embed_dim", 4 * getattr(args, f"{p}_embed_dim")))


@register_model_architecture("xlm_transformer", "xlm_tiny")
def xlm_tiny(args):
    _set_dims(args, 64, 2, 4)


@register_model_architecture("xlm_transformer", "xlm_512")
def xlm_512(args):
    _set_dims(args, 512, 6, 8)


@register_model_architecture("xlm_transformer", "xlm_1024")
def xlm_1024(args):
    _set_dims(args, 1024, 6, 8)
