"""The model's own guarantees: causal masking, incremental decoding, language ids, registrations."""

import pytest
import torch
from tiny_models import tiny_stack
from torch.utils._python_dispatch import TorchDispatchMode

import xlm_fairseq  # noqa: F401  (registers the plugin)


def test_causal_lm_never_sees_the_future():
    m = tiny_stack()
    x = torch.randint(4, 50, (2, 12))
    out = m(x, langs=torch.tensor([0, 2]), causal=True)
    for t in range(11):
        y = x.clone()
        y[:, t + 1 :] = torch.randint(4, 50, y[:, t + 1 :].shape)
        out2 = m(y, langs=torch.tensor([0, 2]), causal=True)
        assert torch.allclose(out[:, : t + 1], out2[:, : t + 1], atol=1e-6)
        assert not torch.allclose(out[:, t + 1 :], out2[:, t + 1 :], atol=1e-6) or torch.equal(
            x[:, t + 1 :], y[:, t + 1 :]
        )
    # without the causal mask an early position does see later tokens
    y = x.clone()
    y[:, -1] = (x[:, -1] + 1 - 4) % 46 + 4
    assert not torch.allclose(m(x)[:, 0], m(y)[:, 0])


def test_language_embedding_changes_output_and_can_be_off():
    m = tiny_stack()
    x = torch.randint(4, 50, (1, 6))
    assert not torch.allclose(m(x, langs=torch.tensor([0])), m(x, langs=torch.tensor([1])))
    off = tiny_stack(use_lang_emb=False)
    assert not hasattr(off, "lang_embeddings")
    assert torch.allclose(off(x, langs=torch.tensor([0])), off(x, langs=torch.tensor([1])))
    assert not hasattr(tiny_stack(n_langs=1), "lang_embeddings"), "XLM: one language, no language embedding"


def test_padding_does_not_change_real_positions():
    m = tiny_stack()
    x = torch.randint(4, 50, (1, 7))
    padded = torch.cat([x, torch.full((1, 3), 1)], dim=1)
    a, b = m(x, langs=torch.tensor([1])), m(padded, langs=torch.tensor([1]))
    assert torch.allclose(a, b[:, :7], atol=1e-5)
    assert torch.all(b[:, 7:] == 0)


class MatmulRows(TorchDispatchMode):
    """The row count of every matrix product's left operand (mm, addmm) while active."""

    def __enter__(self):
        self.rows = []
        super().__enter__()
        return self.rows

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default):
            self.rows.append(args[-2].size(0))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("case", ["mlm", "tlm", "decoder"])
def test_bf16_on_cpu_pads_batches_to_shape_buckets(case):
    """In bf16 on CPU a batch runs padded to 4 rows x 16 positions (oneDNN compiles a kernel per matrix
    shape), the output layer on 64 rows: the same numbers as the padded batch given by hand, cut back to
    the batch's own shape; and within bf16's rounding of fp32."""
    import torch.nn.functional as F

    m = tiny_stack(is_decoder=case == "decoder")
    fp32 = tiny_stack(is_decoder=case == "decoder")
    m.to(torch.bfloat16)
    torch.manual_seed(3)
    tokens = torch.randint(4, 50, (3, 9))
    tokens[1, 6:] = 1  # <pad>
    kw = {"langs": torch.tensor([0, 1, 2])}
    if case == "tlm":  # positions restart for the second sentence, a language per position
        kw = {
            "positions": torch.cat([torch.arange(5), torch.arange(4)]).expand(3, 9),
            "langs": torch.tensor([0] * 5 + [1] * 4).expand(3, 9),
        }
    if case == "decoder":
        src_mask = torch.zeros(3, 11, dtype=torch.bool)
        src_mask[2, 8:] = True
        kw.update(causal=True, src_enc=torch.randn(3, 11, 32), src_padding_mask=src_mask)
    with MatmulRows() as rows_seen:
        out = m(tokens, **{k: v.to(torch.bfloat16) if k == "src_enc" else v for k, v in kw.items()})
    assert rows_seen and all(rows % 64 == 0 for rows in rows_seen), rows_seen  # 4 x 16: one bucket

    by_hand = {"langs": F.pad(kw["langs"], (0, 7, 0, 1) if case == "tlm" else (0, 1))}
    if case == "tlm":
        by_hand["positions"] = F.pad(kw["positions"], (0, 7, 0, 1))
    if case == "decoder":
        by_hand.update(
            causal=True,
            src_enc=F.pad(kw["src_enc"], (0, 0, 0, 0, 0, 1)).to(torch.bfloat16),
            src_padding_mask=F.pad(src_mask, (0, 0, 0, 1), value=True),
        )
    padded = m(F.pad(tokens, (0, 7, 0, 1), value=1), **by_hand)
    assert out.shape == (3, 9, 32) and torch.equal(out, padded[:3, :9])
    assert (out.float() - fp32(tokens, **kw)).abs().max() < 0.1

    rows = out.reshape(-1, 32)[:27]
    with MatmulRows() as rows_seen:
        logits = m.pred_layer(rows)
    assert rows_seen == [64]
    with MatmulRows() as rows_seen:  # a decoder's B x T x C output: its rows, flattened
        assert torch.equal(m.pred_layer(out).reshape(27, 50), logits)
    assert rows_seen == [64]
    assert logits.shape == (27, 50) and torch.equal(logits, m.pred_layer(F.pad(rows, (0, 0, 0, 37)))[:27])


def test_output_layer_is_tied_with_own_bias():
    m = tiny_stack()
    assert m.pred_layer.proj.weight is m.embeddings.weight
    h = torch.randn(5, 32)
    with torch.no_grad():
        m.pred_layer.proj.bias.normal_()
        m.embeddings.weight[7] += 1.0  # a word's embedding moves its output row, and only that row
    logits = m.pred_layer.proj(h)
    assert torch.allclose(logits, h @ m.embeddings.weight.T + m.pred_layer.proj.bias, atol=1e-6)
    assert not any(p is m.pred_layer.proj.bias for p in (m.embeddings.weight, m.layer_norm_emb.bias))


def test_embedding_layer_norm_has_xlms_epsilon():
    """XLM's LayerNorm eps is 1e-12, not torch's 1e-5: an input of variance 1e-8 still comes out with
    unit variance (with 1e-5 it would shrink a thousandfold), as in the checkpoints XLM trained."""
    m = tiny_stack()
    x = 1e-4 * torch.randn(4, 32)
    for norm in (m.layer_norm_emb, m.layer_norm1[0], m.layer_norm2[1]):
        y = norm(x)
        assert torch.allclose(y.var(-1, unbiased=False), torch.ones(4), atol=1e-3), norm


@pytest.mark.parametrize("capacity", [2, 16])
def test_incremental_decoding_matches_full_forward(capacity):
    """Step by step through a KVCache (capacity 2: its buffers grow twice) equals one causal pass."""
    from xlm_fairseq.modules.attention import KVCache

    enc, dec = tiny_stack(), tiny_stack(is_decoder=True)
    src = torch.randint(4, 50, (3, 9))
    src[2, 6:] = 1  # padding in the source
    src_enc = enc(src, langs=torch.tensor([0, 0, 0]))
    tgt = torch.randint(4, 50, (3, 7))
    full = dec(tgt, langs=torch.tensor([2, 2, 2]), causal=True, src_enc=src_enc, src_padding_mask=src.eq(1))
    cache = KVCache(capacity)
    steps = []
    for t in range(7):
        steps.append(
            dec(
                tgt[:, t : t + 1],
                langs=torch.tensor([2, 2, 2]),
                causal=True,
                src_enc=src_enc,
                src_padding_mask=src.eq(1),
                cache=cache,
            )
        )
    assert torch.allclose(full, torch.cat(steps, dim=1), atol=1e-5)


def test_bf16_decoding_steps_attend_in_fp32_and_match_the_full_pass():
    """In bf16 on CPU a decoding step attends in fp32 from fp32 caches (oneDNN's bf16 matmuls of one query
    per row cost more), its self-attention projected by one fused q/k/v matrix: the steps give the states
    of one bf16 causal pass, and of an fp32 pass with the same weights, within bf16 rounding."""
    from xlm_fairseq.modules.attention import KVCache

    enc, dec = tiny_stack(), tiny_stack(is_decoder=True)
    src = torch.randint(4, 50, (3, 9))
    src[2, 6:] = 1
    tgt = torch.randint(4, 50, (3, 7))
    langs, mask = torch.tensor([2, 2, 2]), src.eq(1)
    src_enc = enc(src, langs=torch.tensor([0, 0, 0])).to(torch.bfloat16)
    dec = dec.to(torch.bfloat16).float()  # (in place) weights rounded to bf16, for the exact pass in fp32
    exact = dec(tgt, langs=langs, causal=True, src_enc=src_enc.float(), src_padding_mask=mask)
    dec = dec.to(torch.bfloat16)
    full = dec(tgt, langs=langs, causal=True, src_enc=src_enc, src_padding_mask=mask)
    cache = KVCache(2)
    steps = torch.cat(
        [
            dec(tgt[:, t : t + 1], langs=langs, causal=True, src_enc=src_enc, src_padding_mask=mask, cache=cache)
            for t in range(7)
        ],
        dim=1,
    )
    assert steps.dtype == torch.bfloat16
    assert all(b.dtype == torch.float32 for kv in (*cache.steps.values(), *cache.source.values()) for b in kv)
    # (states up to ~4; bf16 keeps 8 bits of mantissa: the passes differ by up to ~0.03)
    assert torch.allclose(steps.float(), full.float(), atol=0.05)
    assert torch.allclose(steps.float(), exact, atol=0.05)


def _attention_by_the_formula(mha, x, key_padding_mask=None, kv=None, causal=False):
    """XLM's attention written out: softmax(q k^T / sqrt(d) + mask) v, the scores materialised."""

    def heads(t):
        return t.view(t.size(0), -1, mha.n_heads, mha.head_dim).transpose(1, 2)

    src = x if kv is None else kv
    q, k, v = heads(mha.q_lin(x)) / mha.head_dim**0.5, heads(mha.k_lin(src)), heads(mha.v_lin(src))
    scores = q @ k.transpose(2, 3)
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
    if causal:
        future = torch.ones(x.size(1), src.size(1), dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    context = torch.softmax(scores, dim=-1) @ v
    return mha.out_lin(context.transpose(1, 2).reshape(x.shape))


@pytest.mark.parametrize("path", ["fused", "cpu-dropout", "cpu-bf16"])
@pytest.mark.parametrize("case", ["plain", "padding", "causal", "causal+padding", "cross+padding"])
def test_attention_equals_the_formula(case, path, monkeypatch):
    """Attention runs through torch's scaled_dot_product_attention, in CPU training with attention
    dropout through the written-out maths with the cheaper mask, and in bf16 on CPU through two matmuls
    (torch's CPU flash kernel is 5x slower in bf16): the same numbers as the formula every way (a
    dropout below 1/131072 rounds to keeping every weight, so the dropout path can be compared; bf16
    within its rounding)."""
    mha = tiny_stack(is_decoder=True).attentions[0]
    if path == "cpu-dropout":
        mha.dropout = 1e-7
        mha.train()
    torch.manual_seed(1)
    x, src = torch.randn(3, 9, 32), torch.randn(3, 11, 32)
    pad = torch.zeros(3, 11 if "cross" in case else 9, dtype=torch.bool)
    pad[1, -4:] = True
    pad[2, -1:] = True
    kw = {"causal": "causal" in case}
    if "padding" in case:
        kw["key_padding_mask"] = pad
    if "cross" in case:
        kw["kv"] = src
    expected = _attention_by_the_formula(mha, x, **kw)
    if path == "cpu-bf16":

        def not_flash(*args, **kwargs):
            raise AssertionError("bf16 attention on CPU went through scaled_dot_product_attention")

        monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", not_flash)
        mha.to(torch.bfloat16).train()
        if "cross" in case:
            kw["kv"] = src.to(torch.bfloat16)
        out = mha(x.to(torch.bfloat16), **kw)
        out.float().square().sum().backward()
        assert out.dtype == torch.bfloat16 and torch.isfinite(mha.q_lin.weight.grad.float()).all()
        assert torch.allclose(out.float(), expected, atol=0.05) and (out.float() - expected).abs().mean() < 0.01
        return
    assert torch.allclose(mha(x, **kw), expected, atol=1e-6)


@pytest.mark.parametrize("kept", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_cpu_attention_dropout_has_autograds_gradients(masked, kept, monkeypatch):
    """The CPU training path keeps small attention weights, and rebuilds larger ones (and the same
    dropout mask) in the backward pass: either way its output and gradients equal autograd's through
    the written-out maths."""
    from xlm_fairseq.modules import kernels
    from xlm_fairseq.modules.kernels import CPUAttentionWithDropout, keep_mask

    monkeypatch.setattr(kernels, "KEEP_WEIGHTS_UP_TO", 2**20 if kept else 0)

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 7, 8, dtype=torch.float64, requires_grad=True) for _ in range(3))
    allowed = torch.ones(7, 7, dtype=torch.bool).tril()[None, None] if masked else None
    grad = torch.randn(2, 3, 7, 8, dtype=torch.float64)

    torch.manual_seed(5)
    ours = CPUAttentionWithDropout.apply(q, k, v, allowed, 0.3)
    ours_grads = torch.autograd.grad(ours, (q, k, v), grad)

    torch.manual_seed(5)  # the same seed for the mask, drawn as the forward draws it
    seed = int(torch.randint(0, 2**62, (1,)))
    scores = q @ k.transpose(2, 3)
    if masked:
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    keep, scale = keep_mask((2, 3, 7, 7), 0.3, torch.Generator().manual_seed(seed))
    reference = (torch.softmax(scores, -1) * keep * scale) @ v
    assert 0.5 < keep.float().mean() < 0.9
    assert torch.allclose(ours, reference, atol=1e-12)
    for a, b in zip(ours_grads, torch.autograd.grad(reference, (q, k, v), grad)):
        assert torch.allclose(a, b, atol=1e-10)


def test_cpu_dropout_keeps_expectation_and_routes_gradient():
    from xlm_fairseq.modules.kernels import dropout

    torch.manual_seed(0)
    x = (torch.rand(1000, 1001) + 0.5).requires_grad_()  # an odd size: the 16-bit draws do not divide it
    y = dropout(x, 0.1, training=True)
    kept = y.ne(0)
    assert abs(kept.float().mean().item() - 0.9) < 0.002
    scale = 65536 / (65536 - round(0.1 * 65536))
    assert torch.allclose(y[kept], x[kept] * scale)
    y.sum().backward()
    assert torch.equal(x.grad.ne(0), kept) and torch.allclose(x.grad[kept], torch.full_like(x.grad[kept], scale))
    assert dropout(x, 0.1, training=False) is x and dropout(x, 0.0, training=True) is x
    assert dropout(x, 1.0, training=True).eq(0).all()
    # every bit of the 64-bit draws is used: no 16-bit lane is biased
    lanes = torch.stack([dropout(torch.ones(4096, 4), 0.5, True)[:, i].ne(0).float().mean() for i in range(4)])
    assert torch.all((lanes - 0.5).abs() < 0.03), lanes


def test_summed_cross_entropy_is_torchs_with_its_gradient():
    """The criterion's loss (log-probabilities turned into the gradient in place) equals
    F.cross_entropy(..., ignore_index=pad, reduction="sum"): loss and gradients, <pad> targets ignored,
    and the model's logits left as they were."""
    import torch.nn.functional as F

    from xlm_fairseq.modules.kernels import SummedCrossEntropy

    torch.manual_seed(0)
    hidden = torch.randn(30, 16, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(50, 16, dtype=torch.float64, requires_grad=True)
    target = torch.randint(0, 50, (30,))
    target[::4] = 1  # <pad>
    results = []
    for loss_fn in (
        lambda x, t, pad: SummedCrossEntropy.apply(x, t, pad)[0],
        lambda x, t, pad: F.cross_entropy(x, t, ignore_index=pad, reduction="sum"),
    ):
        logits = hidden @ weight.t()
        before = logits.detach().clone()
        loss = loss_fn(logits, target, 1)
        results.append((loss, *torch.autograd.grad(loss * 0.3, (hidden, weight))))
        assert torch.equal(logits, before)
    for ours, torchs in zip(*results):
        assert torch.allclose(ours, torchs, atol=1e-12)
    grad_hidden = results[0][1]
    assert grad_hidden[::4].abs().max() == 0 and grad_hidden[1::4].abs().sum(-1).min() > 0  # <pad> rows: none


def test_summed_cross_entropy_counts_the_targets_scored_highest():
    """Its second output, the accuracy metric's count, is argmax's: non-pad targets whose logit is the
    row's highest (a row's amax, cheaper than argmax on CPU)."""
    from xlm_fairseq.modules.kernels import SummedCrossEntropy

    torch.manual_seed(0)
    logits = torch.randn(200, 7)
    target = torch.randint(0, 7, (200,))
    target[::5] = 1  # <pad>
    _, correct = SummedCrossEntropy.apply(logits, target, 1)
    expected = (logits.argmax(-1).eq(target) & target.ne(1)).sum()
    assert 10 < int(expected) < 190 and torch.equal(correct, expected)


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


def _xlm_parameters(n_words, n_langs, dim, ffn, enc_layers, dec_layers):
    """Parameters of XLM's translation model written out: each stack has word, position (512) and
    language embeddings with a LayerNorm, per layer self-attention (4 dim x dim + bias), an FFN and
    two LayerNorms, the decoder also encoder attention and its LayerNorm; the decoder's output
    layer is tied to its word embeddings and adds a bias."""
    attention, norm = 4 * (dim * dim + dim), 2 * dim
    layer = attention + (dim * ffn + ffn) + (ffn * dim + dim) + 2 * norm
    stack = (n_words + 512 + n_langs) * dim + norm
    return 2 * stack + enc_layers * layer + dec_layers * (layer + attention + norm) + n_words


@pytest.mark.parametrize(
    "argv,dims",
    [
        (["--arch", "xlm_1024"], (1024, 4096, 6, 6, 8)),  # XLM's --emb_dim 1024 --n_layers 6 --n_heads 8
        (["--arch", "xlm_512"], (512, 2048, 6, 6, 8)),
        (
            ["--arch", "xlm_tiny", "--encoder-layers", "3", "--encoder-embed-dim", "128", "--decoder-embed-dim", "128"],
            (128, 512, 3, 2, 4),
        ),  # overrides win; the FFN follows the dimension (4 x)
    ],
)
def test_arch_builds_a_model_of_xlms_size(argv, dims, tmp_path):
    """What fairseq-train builds from --arch (and overrides), through the task: the parameter count of
    XLM's model of those dimensions, and its number of heads (built on the meta device: no memory is
    allocated). The task is given its dictionary (996 words); DATA is an empty directory."""
    from fairseq import options, tasks
    from fairseq.data import Dictionary
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    dim, ffn, enc_layers, dec_layers, heads = dims
    d = Dictionary()
    for i in range(996):
        d.add_symbol(f"w{i}")
    argv = [str(tmp_path), "--task", "translation_lm", "--langs", "en,fr", *argv]
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), argv))
    task = tasks.TASK_REGISTRY["translation_lm"](cfg.task, d)
    with torch.device("meta"):
        model = task.build_model(cfg.model)
    n = sum(p.numel() for p in model.parameters())
    assert n == _xlm_parameters(len(d), 2, dim, ffn, enc_layers, dec_layers)
    for stack, layers in ((model.encoder.transformer, enc_layers), (model.decoder.transformer, dec_layers)):
        assert len(stack.attentions) == layers
        assert {a.n_heads for a in stack.attentions} == {heads}
