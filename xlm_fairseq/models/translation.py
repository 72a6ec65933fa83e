"""The translation model: encoder and decoder stacks, both initialised from one pretrained LM."""

from typing import Sequence

from fairseq.models import FairseqEncoderDecoderModel

from xlm_fairseq.errors import NOT_A_TRANSLATION_MODEL, XLMUserError
from xlm_fairseq.models.base import XLMModelBase
from xlm_fairseq.models.fairseq_interfaces import XLMDecoder, XLMEncoder


class XLMTranslationModel(XLMModelBase, FairseqEncoderDecoderModel):
    """XLM for translation (``--task translation_lm``): an encoder and a decoder stack, both from one
    pretrained LM (XLM's ``--reload_model enc,dec``); the decoder is told the target language at every
    position. Its parameters are ``encoder.transformer.*`` and ``decoder.transformer.*``."""

    def __init__(self, cfg, encoder: XLMEncoder, decoder: XLMDecoder, langs: Sequence[str]):
        super().__init__(encoder, decoder)
        self.cfg = cfg
        self.langs = list(langs)

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
