"""``xlm_transformer``: the one registered XLM model, and its named architectures.

``build_model`` gives the class of the task's ``model_kind``: :class:`XLMTranslationModel` (encoder and
decoder, both from one pretrained LM) for ``translation_lm``, :class:`XLMClassificationModel` for
``xlm_classification``, :class:`XLMLanguageModel` for ``cross_lingual_lm``; so checkpoints of every
kind name one architecture. Layers are in ``modules/``, fairseq's interfaces in ``fairseq_interfaces``.
"""

from fairseq.models import BaseFairseqModel, register_model, register_model_architecture

from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.models.base import DECODER_PREFIX, LM_PREFIX, XLMModelBase  # noqa: F401  (prefixes: the converters')
from xlm_fairseq.models.classifier import XLMClassificationModel
from xlm_fairseq.models.config import XLMConfig
from xlm_fairseq.models.fairseq_interfaces import XLMDecoder, XLMEncoder
from xlm_fairseq.models.lm import XLMLanguageModel
from xlm_fairseq.models.translation import XLMTranslationModel
from xlm_fairseq.modules.transformer import XLMTransformer


@register_model("xlm_transformer", dataclass=XLMConfig)
class XLMModel(BaseFairseqModel):
    """``xlm_transformer``, the one registered XLM model: the home of the archs (``--arch xlm_512``), so
    that checkpoints of every kind name one model. It is never built itself: ``build_model`` gives the
    model of the task's ``model_kind`` (:class:`XLMLanguageModel` for ``cross_lingual_lm``,
    :class:`XLMTranslationModel` for ``translation_lm``, :class:`XLMClassificationModel` for
    ``xlm_classification``), and ``XLMModel.from_pretrained(dir)`` the hub of a checkpoint's kind."""

    from_pretrained = XLMModelBase.from_pretrained

    @classmethod
    def build_model(cls, cfg, task):
        dictionary = task.source_dictionary
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

        return cls.build_kind(cfg, task, stack)

    @classmethod
    def build_kind(cls, cfg, task, stack):
        dictionary = task.source_dictionary
        kind = getattr(task, "model_kind", "lm")
        if kind == "lm":
            return XLMLanguageModel(cfg, XLMEncoder(dictionary, stack("encoder", False, True)), task.langs)
        if kind == "classifier":  # the LM's output layer is not needed: no unused parameters
            encoder = XLMEncoder(dictionary, stack("encoder", False, False))
            return XLMClassificationModel(cfg, encoder, task.num_classes, task.langs)
        if cfg.decoder_embed_dim != cfg.encoder_embed_dim:
            raise XLMUserError("--decoder-embed-dim must equal --encoder-embed-dim (one pretrained LM)")
        # the encoder of a translation model never predicts words: no output layer, no unused bias
        encoder = XLMEncoder(dictionary, stack("encoder", False, False))
        decoder = XLMDecoder(dictionary, stack("decoder", True, True))
        if cfg.share_all_embeddings:
            decoder.transformer.embeddings.weight = encoder.transformer.embeddings.weight
            decoder.transformer.pred_layer.proj.weight = encoder.transformer.embeddings.weight
        return XLMTranslationModel(cfg, encoder, decoder, task.langs)


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
