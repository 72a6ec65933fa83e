"""A sentence classifier on a pretrained stack (XNLI-style), and XLM's choice of fine-tuned layers."""

from typing import Sequence

import torch.nn as nn
from fairseq.models import FairseqEncoderModel
from torch import Tensor

from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.models.base import XLMModelBase
from xlm_fairseq.models.fairseq_interfaces import XLMEncoder, expand_langs
from xlm_fairseq.modules.kernels import dropout
from xlm_fairseq.modules.transformer import XLMTransformer


class ClassificationHead(nn.Module):
    """XLM's XNLI head (``proj`` in its ``evaluation/xnli.py``): dropout, then a linear layer, on the
    last layer's state at the first position (the ``</s>`` that opens every row), or with ``pooling``
    ``mean`` on the mean of the row's non-pad states. The dropout is the fine-tuning script's own
    (``--classifier-dropout``; XLM's ``--dropout``, 0 by default and in its XNLI command); the stack
    keeps the pretrained model's dropout."""

    def __init__(self, dim: int, n_classes: int, dropout: float, pooling: str = "first"):
        super().__init__()
        self.dropout, self.pooling = dropout, pooling
        self.proj = nn.Linear(dim, n_classes)

    def forward(self, states: Tensor, padding_mask: Tensor) -> Tensor:
        """``states`` B x T x C, ``padding_mask`` B x T (True at pads) -> B x classes."""
        if self.pooling == "mean":
            keep = (~padding_mask).unsqueeze(-1).type_as(states)
            pooled = (states * keep).sum(1) / keep.sum(1)
        else:
            pooled = states[:, 0]
        return self.proj(dropout(pooled, self.dropout, self.training))


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


class XLMClassificationModel(XLMModelBase, FairseqEncoderModel):
    """A sentence classifier: the pretrained LM's stack (without its output layer) and
    :class:`ClassificationHead` on the first position (or the mean of all). Built by ``xlm_transformer`` for ``--task
    xlm_classification``; its stack's parameters are ``encoder.transformer.*``, as in an LM."""

    def __init__(self, cfg, encoder: XLMEncoder, n_classes: int, langs: Sequence[str]):
        super().__init__(encoder)
        self.cfg = cfg
        self.langs = list(langs)
        self.classification_head = ClassificationHead(
            encoder.transformer.dim,
            n_classes,
            getattr(cfg, "classifier_dropout", 0.0),
            str(getattr(cfg, "classifier_pooling", "first")),  # checkpoints from before the option: XLM's
        )

    @property
    def lm(self) -> XLMTransformer:
        return self.encoder.transformer

    def forward(self, src_tokens, src_lengths=None, src_langs=None, features_only: bool = False, **kwargs):
        """Class scores (B x classes), or with ``features_only`` the last layer (B x T x C)."""
        x = self.lm(src_tokens, langs=expand_langs(src_langs, src_tokens))
        if features_only:
            return x, {}
        return self.classification_head(x, src_tokens.eq(self.lm.pad_index)), {}

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
