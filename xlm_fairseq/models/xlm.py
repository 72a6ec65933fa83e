"""``xlm_transformer``: the one registered XLM model, and its named architectures.

``build_model`` gives the class of the task's ``model_kind``: :class:`XLMModel` (encoder and decoder,
both from one pretrained LM) for ``translation_lm``, :class:`XLMClassificationModel` for
``xlm_classification``, :class:`XLMLanguageModel` for ``cross_lingual_lm``; so checkpoints of every
kind name one architecture. Layers are in ``modules/``, fairseq's interfaces in ``fairseq_interfaces``.
"""

from fairseq.models import FairseqEncoderDecoderModel, register_model, register_model_architecture

from xlm_fairseq.checkpoints import carried_langs
from xlm_fairseq.errors import NOT_A_TRANSLATION_MODEL, XLMUserError
from xlm_fairseq.models.base import DECODER_PREFIX, LM_PREFIX, XLMModelBase  # noqa: F401  (prefixes: the converters')
from xlm_fairseq.models.classifier import XLMClassificationModel
from xlm_fairseq.models.config import XLMConfig
from xlm_fairseq.models.fairseq_interfaces import XLMDecoder, XLMEncoder
from xlm_fairseq.models.lm import XLMLanguageModel
from xlm_fairseq.modules.transformer import XLMTransformer


@register_model("xlm_transformer", dataclass=XLMConfig)
class XLMModel(XLMModelBase, FairseqEncoderDecoderModel):
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
        # a loaded checkpoint's languages: what its task carries (fairseq loads task_state before
        # building), or in checkpoints made before that, its model options
        loaded = getattr(getattr(task, "state", None), "state_dict", None) or {}
        carried = carried_langs(loaded, cfg)
        if not task.langs and carried:  # task set up without --langs (fairseq-generate, -interactive)
            task.set_langs(",".join(carried))
        if carried and list(task.langs) != list(carried):
            # language ids are positions in the list: another order translates with the wrong embeddings
            raise XLMUserError(
                f"--langs {','.join(task.langs)} is not the model's language list {','.join(carried)}; "
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

        model = cls.build_kind(cfg, task, stack)
        model.langs = list(task.langs)
        return model

    @classmethod
    def build_kind(cls, cfg, task, stack):
        dictionary = task.source_dictionary
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
