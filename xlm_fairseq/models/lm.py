"""The pretrained LM (MLM / TLM / CLM)."""

from typing import Sequence

from fairseq.models import FairseqEncoderModel

from xlm_fairseq.models.base import XLMModelBase
from xlm_fairseq.models.fairseq_interfaces import XLMEncoder, expand_langs
from xlm_fairseq.modules.transformer import XLMTransformer


class XLMLanguageModel(XLMModelBase, FairseqEncoderModel):
    """The pretrained LM (MLM / TLM / CLM): one :class:`XLMTransformer` with its output layer.

    Built by ``xlm_transformer`` for ``--task cross_lingual_lm``; its parameters are
    ``encoder.transformer.*`` (``LM_PREFIX``), as in every checkpoint this plugin has written."""

    def __init__(self, cfg, encoder: XLMEncoder, langs: Sequence[str]):
        super().__init__(encoder)
        self.cfg = cfg
        self.langs = list(langs)

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
        x = self.lm(src_tokens, langs=expand_langs(src_langs, src_tokens), positions=positions, causal=causal)
        if pred_mask is not None:  # only the predicted positions go through the (large) output layer
            x = x[pred_mask]
        return (x if features_only else self.lm.pred_layer(x)), {}
