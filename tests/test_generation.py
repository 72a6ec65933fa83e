"""Decoding: back-translation's greedy loop and the beam search fairseq-generate runs, each against fairseq's
own SequenceGenerator."""

import pytest
import torch
from tiny_models import tiny_translation_model

import xlm_fairseq  # noqa: F401  (registers the plugin)


@pytest.mark.parametrize(
    "eos_bias,min_len,lengths_seen",
    [(1.6, 1, {19}), (3.0, 1, {3, 5}), (4.0, 1, {2}), (4.0, 0, {1}), (-0.2, 0, {1, 19})],
)
@pytest.mark.parametrize("shrink", [True, False])  # CPU's path, and an accelerator's (the batch keeps its shape)
def test_greedy_generation_equals_sequence_generator_at_beam_1(eos_bias, min_len, lengths_seen, shrink):
    """Back-translation's own greedy loop (preallocated cache, finished sentences dropped) gives the
    words of fairseq's SequenceGenerator at beam 1 for a whole batch, also where sentences end at
    different steps, where the length limit forces </s> and where </s> comes first (XLM's empty
    translation; fairseq's --min-len 1 forbids it)."""
    from fairseq.sequence_generator import SequenceGenerator

    from xlm_fairseq.generation import generate_greedy

    # how likely </s> is: never (the limit forces it), mid-batch, at once
    model, d, net_input = tiny_translation_model(eos_bias)
    src = net_input["src_tokens"]
    hypos = SequenceGenerator([model], d, beam_size=1, max_len_a=1.3, max_len_b=5, min_len=min_len).generate(
        [model], {"net_input": net_input}
    )
    encoder_out = model.encoder(src, src_langs=net_input["src_langs"])
    tokens, lengths = generate_greedy(
        model.decoder.transformer,
        encoder_out["encoder_out"][0],
        encoder_out["encoder_padding_mask"][0],
        net_input["tgt_langs"],
        int(1.3 * 10 + 5),
        d.eos(),
        min_len=min_len,
        shrink=shrink,
    )
    assert all(row[n:].eq(d.pad()).all() for row, n in zip(tokens, lengths.tolist()))
    ours = [t[:n] for t, n in zip(tokens, lengths.tolist())]
    assert [t.tolist() for t in ours] == [h[0]["tokens"].tolist() for h in hypos]
    assert {len(t) for t in ours} == lengths_seen  # 19: the limit, 18 words + </s>; 1: an empty sentence


@pytest.mark.parametrize("eos_bias", [2.2, -5.0])  # sentences finish at different steps; all run to the limit
def test_beam_search_with_one_source_row_per_sentence_equals_a_row_per_hypothesis(eos_bias):
    """fairseq's SequenceGenerator at beam 5: the encoder output kept one row per sentence (its five
    hypotheses read it together, nothing copied at a step) gives the hypotheses and scores of a source
    copied for every hypothesis at every step, as encoders do in fairseq."""
    from fairseq.sequence_generator import SequenceGenerator

    from xlm_fairseq.models.fairseq_interfaces import XLMEncoder

    class EveryRowEncoder(XLMEncoder):  # fairseq's way: every entry follows the order, row by row
        def reorder_encoder_out(self, encoder_out, new_order):
            return {k: [t.index_select(0, new_order) for t in v] for k, v in encoder_out.items()}

    model, d, net_input = tiny_translation_model(eos_bias)
    results = []
    for encoder in (model.encoder, EveryRowEncoder(d, model.encoder.transformer)):
        model.encoder = encoder
        generator = SequenceGenerator([model], d, beam_size=5, max_len_a=1.3, max_len_b=5)
        results.append(generator.generate([model], {"net_input": net_input}))
    grouped, every_row = results
    for ours, plain in zip(grouped, every_row):
        assert [h["tokens"].tolist() for h in ours] == [h["tokens"].tolist() for h in plain]
        for a, b in zip(ours, plain):
            assert torch.allclose(a["positional_scores"], b["positional_scores"], atol=1e-5)
    lengths = {len(h[0]["tokens"]) for h in grouped}
    assert len(lengths) > 1 if eos_bias > 0 else lengths == {19}  # 19: the limit, 18 words + </s>


def test_reordering_keeps_one_source_row_per_sentence_while_it_can():
    model, d, net_input = tiny_translation_model(0.0)
    encoder = model.encoder
    out = encoder(net_input["src_tokens"], src_langs=net_input["src_langs"], tgt_langs=net_input["tgt_langs"])
    source = out["encoder_out"][0]
    beams = encoder.reorder_encoder_out(out, torch.arange(24).repeat_interleave(5))  # SequenceGenerator's start
    assert beams["group"] == [5] and beams["encoder_out"][0] is source and beams["tgt_langs"][0].numel() == 120
    within = torch.arange(120).view(24, 5)[:, [0, 0, 1, 3, 3]].reshape(-1)  # hypotheses reordered in their beams
    kept = encoder.reorder_encoder_out(beams, within)
    assert kept["group"] == [5] and kept["encoder_out"][0] is source
    left = encoder.reorder_encoder_out(kept, torch.arange(120).view(24, 5)[[2, 7, 8]].reshape(-1))  # 3 sentences
    assert left["group"] == [5] and torch.equal(left["encoder_out"][0], source[[2, 7, 8]])
    assert torch.equal(left["encoder_padding_mask"][0], out["encoder_padding_mask"][0][[2, 7, 8]])
    mixed = torch.tensor([0, 5, 10, 1, 2, 3, 4, 14, 6, 7, 8, 9, 11, 12, 13])  # hypotheses move between sentences
    rows = encoder.reorder_encoder_out(left, mixed)
    assert rows["group"] == [1] and torch.equal(rows["encoder_out"][0], left["encoder_out"][0][mixed // 5])


@torch.inference_mode()
def test_beam_cache_follows_the_hypotheses_without_moving_their_keys():
    """A beam search's cache (BeamKVCache: each step's keys stay where they were computed, each hypothesis
    sees its ancestors' only) gives the decoder outputs of KVCache, which copies every hypothesis' steps
    after it: beams reordered within their sentences at every step, and sentences leaving twice."""
    from tiny_models import tiny_stack

    from xlm_fairseq.modules.attention import BeamKVCache, KVCache

    sentences, beam, steps = 6, 3, 8
    enc, dec = tiny_stack(), tiny_stack(is_decoder=True)
    src = torch.randint(4, 50, (sentences, 9))
    src[2, 6:] = 1  # padding in the source
    src_enc = enc(src, langs=torch.zeros(sentences, dtype=torch.long))
    caches = (KVCache(2), BeamKVCache(beam, capacity=steps))
    generator = torch.Generator().manual_seed(1)
    alive = torch.arange(sentences)
    for step in range(steps):
        tokens = torch.randint(4, 50, (alive.numel() * beam, 1), generator=generator)
        copied, read_in_place = (
            dec(
                tokens,
                langs=torch.tensor(2),
                causal=True,
                src_enc=src_enc[alive],
                src_padding_mask=src[alive].eq(1),
                cache=cache,
            )
            for cache in caches
        )
        assert torch.allclose(copied, read_in_place, atol=1e-5), step
        parents = torch.randint(0, beam, (alive.numel(), beam), generator=generator)
        kept = torch.arange(alive.numel())
        if step in (2, 5):  # sentences leave: the first and the second-to-last
            kept = kept[[i for i in range(alive.numel()) if i not in (0, alive.numel() - 2)]]
        for cache in caches:
            cache.select((parents[kept] + kept[:, None] * beam).view(-1))
        alive = alive[kept]
    assert alive.tolist() == [2, 5]


@pytest.mark.parametrize(
    "beam,eos_bias,options",
    [
        (5, 2.2, {}),  # sentences end at different steps and leave the batch
        (5, -5.0, {}),  # all run to the length limit
        (5, 1.0, {"min_len": 3, "len_penalty": 0.5, "unk_penalty": 0.5}),
        (4, 0.0, {"min_len": 0, "normalize_scores": False, "temperature": 0.7, "max_len_b": 2}),  # may end empty
        (1, -0.2, {"min_len": 0}),  # greedy: sentences finish at the first step or at the limit
        (12, 2.2, {}),  # 2 x beam candidates from 50 words: few left for the last steps
    ],
)
def test_our_beam_search_equals_sequence_generators(beam, eos_bias, options):
    """fairseq-generate's beam search on an XLM model (our loop, the output layer padded to 56 words) gives
    SequenceGenerator's hypotheses: the same words in the same order, the same scores."""
    from fairseq.sequence_generator import SequenceGenerator

    from xlm_fairseq.generation import XLMSequenceGenerator

    model, d, net_input = tiny_translation_model(eos_bias)
    args = {"beam_size": beam, "max_len_a": 1.3, "max_len_b": 5, **options}
    sample = {"net_input": net_input}
    ours = XLMSequenceGenerator([model], d, **args)
    assert ours.runs_own_loop(sample)
    got, expected = ours.generate([model], sample), SequenceGenerator([model], d, **args).generate([model], sample)
    assert len(got) == len(expected) == 24
    for hypos, ref in zip(got, expected):
        assert [h["tokens"].tolist() for h in hypos] == [h["tokens"].tolist() for h in ref]
        for h, r in zip(hypos, ref):
            assert torch.allclose(h["score"], r["score"], atol=1e-5)
            assert torch.allclose(h["positional_scores"], r["positional_scores"], atol=1e-5)
    lengths = {len(h["tokens"]) for hypos in got for h in hypos}
    assert len(lengths) > 1 if eos_bias > -5 else lengths == {19}  # 19: the limit int(1.3 * 10 + 5), and </s>


def test_other_searches_are_sequence_generators():
    """Options our loop does not take (here a prefix, and sampling) run fairseq's own loop, unchanged."""
    from fairseq import search
    from fairseq.sequence_generator import SequenceGenerator

    from xlm_fairseq.generation import XLMSequenceGenerator

    model, d, net_input = tiny_translation_model(1.0)
    sample, prefix = {"net_input": net_input}, net_input["src_tokens"][:, 1:3]
    ours = XLMSequenceGenerator([model], d, beam_size=3)
    assert not ours.runs_own_loop(sample, prefix_tokens=prefix)
    got = ours.generate([model], sample, prefix_tokens=prefix)
    expected = SequenceGenerator([model], d, beam_size=3).generate([model], sample, prefix_tokens=prefix)
    assert [h[0]["tokens"].tolist() for h in got] == [h[0]["tokens"].tolist() for h in expected]
    assert all(h[0]["tokens"][:2].tolist() == p.tolist() for h, p in zip(got, prefix))
    draws = []
    for cls in (XLMSequenceGenerator, SequenceGenerator):
        torch.manual_seed(7)
        generator = cls([model], d, beam_size=2, search_strategy=search.Sampling(d, sampling_topk=5))
        draws.append([h[0]["tokens"].tolist() for h in generator.generate([model], sample)])
    assert draws[0] == draws[1]
