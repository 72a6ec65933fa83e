"""Masking, TLM samples, language sampling, AE noise, lambda schedules: statistics on real-size draws."""

import math

import numpy as np
import pytest
import torch

from xlm_fairseq.data import MaskedLMConfig, TLMPairDataset, mask_scores_from_counts, mask_tokens
from xlm_fairseq.data.masking import span_pred_mask
from xlm_fairseq.data.noise import word_blank, word_dropout, word_shuffle
from xlm_fairseq.data.streams import LMObjectiveDataset
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.objectives.schedule import lambda_schedule, sampling_probs

PAD, EOS, MASK, V = 1, 2, 5, 1000
IS_WORD = torch.arange(V) >= 6  # ids 0..5: special symbols in these synthetic tests


def _cfg(**kw):
    return MaskedLMConfig(mask_idx=MASK, pad_idx=PAD, is_word=IS_WORD, **kw)


def _tokens(n_rows=600, n_cols=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(6, V, (n_rows, n_cols), generator=g)
    lengths = torch.randint(n_cols // 2, n_cols + 1, (n_rows,), generator=g)
    tokens[torch.arange(n_cols)[None, :] >= lengths[:, None]] = PAD
    return tokens


def test_mlm_masking_rates_on_100k_tokens():
    tokens = _tokens()
    real = int(tokens.ne(PAD).sum())
    assert real >= 100_000
    cfg = _cfg()
    inputs, pred_mask, targets = mask_tokens(tokens, cfg, torch.Generator().manual_seed(1))
    assert not pred_mask[tokens.eq(PAD)].any(), "padding is never predicted"
    assert not pred_mask[:, 0].any(), "the first position of a block is never predicted (XLM)"
    rate = pred_mask.sum().item() / (real - len(tokens))
    assert abs(rate - 0.15) <= 0.005, rate
    assert torch.equal(targets, tokens[pred_mask])
    seen = inputs[pred_mask]
    masked = (seen == MASK).float().mean().item()
    kept = (seen == targets).float().mean().item()
    # random replacements: neither the mask nor the original (a random draw equal to either is rare: 2/V)
    rand = ((seen != MASK) & (seen != targets)).float().mean().item()
    assert abs(masked - 0.8) <= 0.01 and abs(kept - 0.1) <= 0.01 and abs(rand - 0.1) <= 0.01, (masked, kept, rand)
    assert torch.equal(inputs[~pred_mask], tokens[~pred_mask]), "unpredicted tokens are untouched"


def test_sample_alpha_weights_predictions_by_count_power():
    # two token types, one 9x as frequent as the other: with alpha=0.5 each rare occurrence is
    # 3x as likely to be chosen as a frequent one (count^-0.5)
    counts = [0] * V
    frequent, rare = 100, 200
    counts[frequent], counts[rare] = 9000, 1000
    scores = mask_scores_from_counts(counts, IS_WORD, alpha=0.5)
    g = torch.Generator().manual_seed(0)
    tokens = torch.where(torch.rand(400, 256, generator=g) < 0.9, torch.tensor(frequent), torch.tensor(rare))
    cfg = _cfg(mask_scores=scores)
    _, pred_mask, targets = mask_tokens(tokens, cfg, torch.Generator().manual_seed(3))
    assert pred_mask.sum().item() == math.ceil(0.15 * tokens.numel())
    p_rare = (tokens[pred_mask] == rare).float().mean().item() / (tokens == rare).float().mean().item()
    p_freq = (tokens[pred_mask] == frequent).float().mean().item() / (tokens == frequent).float().mean().item()
    # per-occurrence selection ratio; drawing without replacement compresses it a little below 3
    ratio = p_rare / p_freq
    assert 2.4 < ratio < 3.2, ratio
    uniform = _cfg()
    _, pm, _ = mask_tokens(tokens, uniform, torch.Generator().manual_seed(3))
    u_ratio = ((tokens[pm] == rare).float().mean() / (tokens == rare).float().mean()).item()
    assert abs(u_ratio - 1) < 0.1, "alpha=0 does not favour rare tokens"


def test_mask_scores_exclude_specials_and_unseen():
    is_word = torch.tensor([True, False, True, True, True])
    scores = mask_scores_from_counts([5, 5, 0, 16, 4], is_word, alpha=0.5)
    assert scores.tolist() == [5**-0.5, 0.0, 0.0, 0.25, 0.5]
    assert mask_scores_from_counts([1, 2], is_word[:2], 0) is None


class _Seqs:
    """A list of 1-D tensors with the ``sizes`` fairseq datasets have."""

    def __init__(self, seqs):
        self.seqs = [torch.LongTensor(s) for s in seqs]
        self.sizes = np.array([len(s) for s in self.seqs])

    def __getitem__(self, i):
        return self.seqs[i]

    def __len__(self):
        return len(self.seqs)


def test_tlm_sample_order_positions_and_languages():
    src = _Seqs([[10, 11, 12, EOS], [13, EOS]])
    tgt = _Seqs([[20, 21, EOS], [22, 23, 24, 25, EOS]])
    ds = TLMPairDataset(src, tgt, src_lang_id=0, tgt_lang_id=1, eos=EOS, max_len=100)
    item = ds[0]
    assert item["tokens"].tolist() == [EOS, 10, 11, 12, EOS, EOS, 20, 21, EOS]
    assert item["positions"].tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3]
    assert item["langs"].tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 1]
    # batched: right padding, positions and langs padded alongside
    cfg = _cfg()
    batch = LMObjectiveDataset(ds, "mlm", PAD, mask_cfg=cfg).collater([dict(ds[i], id=i) for i in range(2)])
    net = batch["net_input"]
    assert net["positions"][1].tolist() == [0, 1, 2, 0, 1, 2, 3, 4, 5]
    assert net["src_langs"][1].tolist() == [0, 0, 0, 1, 1, 1, 1, 1, 1]
    assert int(net["pred_mask"].sum()) == len(batch["target"])
    assert batch["ntokens"] == int(net["src_tokens"].ne(PAD).sum())  # input tokens: fairseq's wps
    # XLM's --max_len limits each side (subwords, </s> not counted), not the pair's total
    longer = _Seqs([[20, 21, EOS], [22, 23, 24, 25, 26, 27, EOS]])
    assert len(TLMPairDataset(src, longer, 0, 1, EOS, max_len=5)) == 1
    assert len(TLMPairDataset(src, longer, 0, 1, EOS, max_len=6)) == 2
    assert len(TLMPairDataset(longer, longer, 0, 1, EOS, max_len=6)) == 2  # 16 tokens in all


def test_clm_batch_predicts_next_token():
    ds = _Seqs([[10, 11, 12, EOS], [13, EOS]])
    batch = LMObjectiveDataset(ds, "clm", PAD, lang_id=1).collater(
        [{"tokens": ds[i], "langs": None, "positions": None, "id": i} for i in range(2)]
    )
    assert batch["net_input"]["causal"] is True
    assert batch["net_input"]["pred_mask"].tolist() == [[True, True, True, False], [True, False, False, False]]
    assert batch["target"].tolist() == [11, 12, EOS, EOS]


def _lm_loop(keys_sizes, alpha, step_per_objective=False):
    """XLM's loop over MLM / TLM objectives (the plugin's classes) with these training sentence counts."""
    from xlm_fairseq.objectives.base import OBJECTIVES, loop_families
    from xlm_fairseq.objectives.keys import ObjectiveKey
    from xlm_fairseq.objectives.schedule import XLMLoop

    objectives = []
    for key, sentences in keys_sizes.items():
        name = ObjectiveKey.parse(key)
        objective = OBJECTIVES[name.family](name.langs)  # no data: no context needed
        objective.sentences = sentences
        objectives.append(objective)
    return XLMLoop(objectives, loop_families(), seed=1, step_per_objective=step_per_objective, sampling_alpha=alpha)


def _keys(objectives):
    return [o.key for o in objectives]


@pytest.mark.parametrize("alpha", [0.5, 0.3, 1.0, -1])
def test_language_sampling_is_xlms_shuf_order(alpha):
    """Per iteration min(5, n) draws with replacement per family, p^alpha by sentence counts;
    at -1 uniform, still with replacement (XLM's shuf_order)."""
    mono = {"mlm_en": 700_000, "mlm_de": 250_000, "mlm_ro": 50_000}
    para = {"tlm_de-en": 30_000, "tlm_en-ro": 10_000}
    loop = _lm_loop({**mono, **para}, alpha)
    plans = [_keys(loop.update_objectives(u)[0]) for u in range(6000)]
    assert {len(p) for p in plans} == {3 + 2}
    assert all(all(k.startswith("mlm_") for k in p[:3]) and all(k.startswith("tlm_") for k in p[3:]) for p in plans)
    for family in (mono, para):
        expected = sampling_probs(family, alpha) if alpha != -1 else {k: 1 / len(family) for k in family}
        draws = [k for p in plans for k in p if k in family]
        for key, prob in expected.items():
            assert abs(draws.count(key) / len(draws) - prob) <= 0.02, (key, draws.count(key) / len(draws), prob)
    # with replacement: some iterations train a language twice and skip another
    assert sum(len(set(p[:3])) < 3 for p in plans) > 1000
    p = np.array([700, 250, 50], dtype=float) / 1000
    assert np.allclose(list(sampling_probs(mono, 0.5).values()), p**0.5 / (p**0.5).sum())


def test_at_most_five_draws_per_family_and_step_per_objective_walks_the_iteration():
    langs = ["en", "de", "ro", "fr", "es", "it", "nl"]
    loop = _lm_loop({f"mlm_{lang}": 1000 for lang in langs}, -1, step_per_objective=True)
    assert loop.iteration_length() == 5
    plan = _keys(loop.iteration_objectives(3))
    assert len(plan) == 5
    # --step-per-objective: updates 15..19 are iteration 3, one objective each, in the plan's order
    steps = [loop.update_objectives(u) for u in range(15, 20)]
    assert [_keys(objectives) for objectives, _ in steps] == [[k] for k in plan]
    assert {it for _, it in steps} == {3}


def test_span_masking_predicts_one_contiguous_run_of_each_sentence():
    """MASS's masking: round(ratio * n) consecutive words of a sentence of n (at least one), starting
    anywhere they fit, never its </s>."""
    lengths = (1, 2, 7, 20)
    rows = [torch.LongTensor(list(range(10, 10 + n)) + [EOS]) for n in lengths]
    tokens = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=PAD)
    g = torch.Generator().manual_seed(0)
    starts = set()
    for _ in range(300):
        pred = span_pred_mask(tokens, PAD, EOS, 0.5, g)
        for row, n in zip(pred, lengths):
            picked = row.nonzero().flatten().tolist()
            assert len(picked) == max(1, round(0.5 * n)), (n, picked)
            assert picked == list(range(picked[0], picked[0] + len(picked))) and picked[-1] < n
        starts.add(int(pred[3].nonzero()[0]))
    assert starts == set(range(11))  # 20 words, a span of 10: every start from 0 to 10
    assert span_pred_mask(tokens, PAD, EOS, 1.0, g)[3].sum() == 20


def test_word_shuffle_moves_tokens_less_than_k():
    sent = torch.arange(10, 60).tolist() + [EOS]
    sent = torch.LongTensor(sent)
    g = torch.Generator().manual_seed(0)
    moved_any = False
    for _ in range(300):
        out = word_shuffle(sent, EOS, 3, g)
        assert out[-1] == EOS and sorted(out.tolist()) == sorted(sent.tolist())
        new_pos = {tok: i for i, tok in enumerate(out.tolist())}
        shift = max(abs(new_pos[tok] - i) for i, tok in enumerate(sent.tolist()))
        assert shift < 3
        moved_any |= shift > 0
    assert moved_any
    assert torch.equal(word_shuffle(sent, EOS, 0, g), sent)


def test_word_dropout_and_blank_rates():
    g = torch.Generator().manual_seed(0)
    body = torch.arange(10, 110)
    sent = torch.cat([body, torch.LongTensor([EOS])])
    kept = blanked = total = 0
    for _ in range(300):
        d = word_dropout(sent, EOS, 0.1, g)
        b = word_blank(sent, EOS, 0.1, MASK, g)
        assert d[-1] == EOS and b[-1] == EOS and len(b) == len(sent)
        assert d[:-1].tolist() == [t for t in body.tolist() if t in set(d[:-1].tolist())], "dropout keeps order"
        kept += len(d) - 1
        blanked += int((b[:-1] == MASK).sum())
        total += len(body)
    assert abs(1 - kept / total - 0.1) < 0.01
    assert abs(blanked / total - 0.1) < 0.01
    one = torch.LongTensor([42, EOS])
    assert word_dropout(one, EOS, 0.999, g).tolist() == [42, EOS], "a sentence never loses its last word"


def test_schedules_parse_and_interpolate():
    schedule = lambda_schedule("0:1,100000:0.1,300000:0")
    assert schedule.pieces == [(0, 1.0), (100000, 0.1), (300000, 0.0)]
    assert schedule(0) == 1.0
    assert schedule(50000) == pytest.approx(0.55)
    assert schedule(100000) == pytest.approx(0.1)
    assert schedule(200000) == pytest.approx(0.05)
    assert schedule(300000) == 0.0 and schedule(10**7) == 0.0
    assert lambda_schedule("0.5")(123) == 0.5
    for bad in ["1:1,5:0", "0:1,0:2", "abc", "0:1,x:2", "5:0,0:1"]:
        with pytest.raises(XLMUserError):
            lambda_schedule(bad)


@pytest.mark.parametrize("n", [5, 13, 60, 205])
def test_batches_keep_every_index(n):
    """fairseq-fixed's batch_by_size drops n % 8 indices; our datasets must not."""
    from xlm_fairseq.data.batching import batch_by_size_complete

    class Sized:
        def num_tokens(self, i):
            return 40

        def num_tokens_vec(self, indices):
            return np.full(len(indices), 40)

    indices = np.random.RandomState(0).permutation(n)
    batches = batch_by_size_complete(Sized(), indices, max_tokens=4000, required_batch_size_multiple=8)
    assert sorted(np.concatenate(batches).tolist()) == list(range(n))
