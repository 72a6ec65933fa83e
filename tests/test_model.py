"""The model's own guarantees: causal masking, incremental decoding, language ids, registrations."""

import argparse

import pytest
import torch

import xlm_fairseq  # noqa: F401  (registers the plugin)
from xlm_fairseq.models.xlm import XLMTransformer


def _stack(is_decoder=False, n_langs=3, **kw):
    torch.manual_seed(0)
    m = XLMTransformer(n_words=50, pad_index=1, n_langs=n_langs, dim=32, n_layers=2, n_heads=4, ffn_dim=64,
                       dropout=0.0, attention_dropout=0.0, is_decoder=is_decoder, **kw)
    return m.eval()


def test_causal_lm_never_sees_the_future():
    m = _stack()
    x = torch.randint(4, 50, (2, 12))
    out = m(x, langs=torch.tensor([0, 2]), causal=True)
    for t in range(11):
        y = x.clone()
        y[:, t + 1:] = torch.randint(4, 50, y[:, t + 1:].shape)
        out2 = m(y, langs=torch.tensor([0, 2]), causal=True)
        assert torch.allclose(out[:, : t + 1], out2[:, : t + 1], atol=1e-6)
        assert not torch.allclose(out[:, t + 1:], out2[:, t + 1:], atol=1e-6) or torch.equal(x[:, t + 1:], y[:, t + 1:])
    # without the causal mask an early position does see later tokens
    y = x.clone()
    y[:, -1] = (x[:, -1] + 1 - 4) % 46 + 4
    assert not torch.allclose(m(x)[:, 0], m(y)[:, 0])


def test_language_embedding_changes_output_and_can_be_off():
    m = _stack()
    x = torch.randint(4, 50, (1, 6))
    assert not torch.allclose(m(x, langs=torch.tensor([0])), m(x, langs=torch.tensor([1])))
    off = _stack(use_lang_emb=False)
    assert not hasattr(off, "lang_embeddings")
    assert torch.allclose(off(x, langs=torch.tensor([0])), off(x, langs=torch.tensor([1])))
    assert not hasattr(_stack(n_langs=1), "lang_embeddings"), "XLM: one language, no language embedding"


def test_padding_does_not_change_real_positions():
    m = _stack()
    x = torch.randint(4, 50, (1, 7))
    padded = torch.cat([x, torch.full((1, 3), 1)], dim=1)
    a, b = m(x, langs=torch.tensor([1])), m(padded, langs=torch.tensor([1]))
    assert torch.allclose(a, b[:, :7], atol=1e-5)
    assert torch.all(b[:, 7:] == 0)


def test_output_layer_is_tied_with_own_bias():
    m = _stack()
    assert m.pred_layer.proj.weight is m.embeddings.weight
    assert m.pred_layer.proj.bias.shape == (50,)
    assert m.layer_norm_emb.eps == 1e-12


def test_incremental_decoding_matches_full_forward():
    enc, dec = _stack(), _stack(is_decoder=True)
    src = torch.randint(4, 50, (3, 9))
    src[2, 6:] = 1  # padding in the source
    src_enc = enc(src, langs=torch.tensor([0, 0, 0]))
    tgt = torch.randint(4, 50, (3, 7))
    full = dec(tgt, langs=torch.tensor([2, 2, 2]), causal=True, src_enc=src_enc, src_padding_mask=src.eq(1))
    cache = {}
    steps = []
    for t in range(7):
        steps.append(dec(tgt[:, t:t + 1], langs=torch.tensor([2, 2, 2]), positions=torch.full((3, 1), t), causal=True,
                         src_enc=src_enc, src_padding_mask=src.eq(1), cache=cache))
    assert torch.allclose(full, torch.cat(steps, dim=1), atol=1e-5)


def test_every_registered_name_is_the_plugins():
    from fairseq.criterions import CRITERION_REGISTRY
    from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_REGISTRY
    from fairseq.tasks import TASK_DATACLASS_REGISTRY, TASK_REGISTRY

    assert MODEL_REGISTRY["xlm_transformer"].__module__ == "xlm_fairseq.models.xlm"
    for arch in ("xlm_tiny", "xlm_512", "xlm_1024"):
        assert ARCH_MODEL_REGISTRY[arch] is MODEL_REGISTRY["xlm_transformer"]
    for name in ("cross_lingual_lm", "translation_lm"):
        assert TASK_REGISTRY[name].__module__.startswith("xlm_fairseq.tasks."), name
        assert TASK_DATACLASS_REGISTRY[name].__module__.startswith("xlm_fairseq.tasks."), name
    assert CRITERION_REGISTRY["xlm_cross_entropy"].__module__.startswith("xlm_fairseq.criterions")
    # fairseq's own names stay fairseq's
    assert ARCH_MODEL_REGISTRY["xlm_base"].__module__.startswith("fairseq.")
    from hydra.core.config_store import ConfigStore

    node = ConfigStore.instance().repo["task"]["cross_lingual_lm.yaml"].node
    assert "mlm_steps" in node and "clm_steps" in node, "hydra's config store holds our task's config"


def test_arch_dims_and_overrides():
    from fairseq.models import ARCH_CONFIG_REGISTRY

    args = argparse.Namespace()
    ARCH_CONFIG_REGISTRY["xlm_1024"](args)
    assert (args.encoder_embed_dim, args.encoder_layers, args.encoder_attention_heads, args.encoder_ffn_embed_dim) == (1024, 6, 8, 4096)
    assert args.decoder_embed_dim == 1024 and args.decoder_layers == 6
    args = argparse.Namespace(encoder_layers=3, encoder_embed_dim=128)
    ARCH_CONFIG_REGISTRY["xlm_tiny"](args)
    assert (args.encoder_embed_dim, args.encoder_layers, args.encoder_ffn_embed_dim) == (128, 3, 512)
