"""Tiny XLM stacks and a tiny translation model with a batch to decode, shared by the model and decoding tests."""

import torch

from xlm_fairseq.modules.transformer import XLMTransformer


def tiny_stack(is_decoder=False, n_langs=3, **kw):
    torch.manual_seed(0)
    m = XLMTransformer(
        n_words=50,
        pad_index=1,
        n_langs=n_langs,
        dim=32,
        n_layers=2,
        n_heads=4,
        ffn_dim=64,
        dropout=0.0,
        attention_dropout=0.0,
        is_decoder=is_decoder,
        **kw,
    )
    return m.eval()


def tiny_translation_model(eos_bias):
    """A tiny translation model whose </s> is ``eos_bias`` more likely, and 24 sources (a third padded)."""
    from fairseq.data import Dictionary

    from xlm_fairseq.models.fairseq_interfaces import XLMDecoder, XLMEncoder
    from xlm_fairseq.models.translation import XLMTranslationModel

    d = Dictionary()
    for i in range(46):
        d.add_symbol(f"w{i}")
    encoder, decoder = XLMEncoder(d, tiny_stack(with_output=False)), XLMDecoder(d, tiny_stack(is_decoder=True))
    model = XLMTranslationModel(None, encoder, decoder, ["en", "de", "ro"]).eval()
    with torch.no_grad():  # how likely </s> is
        model.decoder.transformer.pred_layer.proj.bias[d.eos()] = eos_bias
    torch.manual_seed(3)
    src = torch.randint(4, 50, (24, 10))
    src[:, 0] = src[:, -1] = d.eos()
    src[::3, 6] = d.eos()
    src[::3, 7:] = d.pad()  # a third are shorter: right padding
    net_input = {
        "src_tokens": src,
        "src_lengths": src.ne(d.pad()).sum(1),
        "src_langs": torch.zeros(24, dtype=torch.long),
        "tgt_langs": torch.full((24,), 2),
    }
    return model, d, net_input
