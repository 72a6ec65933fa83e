"""The options of ``xlm_transformer``, with XLM's names in their help."""

from dataclasses import dataclass, field

from fairseq.dataclass import ChoiceEnum, FairseqDataclass


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
    classifier_pooling: ChoiceEnum(["first", "mean"]) = field(
        default="first",
        metadata={
            "help": "xlm_classification: the state the head reads: the first position's (XLM's) or the mean of "
            "the row's non-pad positions"
        },
    )
    share_all_embeddings: bool = field(
        default=False,
        metadata={"help": "encoder and decoder share one embedding matrix (XLM default: separate)"},
    )
