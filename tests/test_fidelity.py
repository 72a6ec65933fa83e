"""Training details where XLM's choices change results, checked on a real fairseq Dictionary and
real token streams of the shipped Debian sample (data-bin made by preprocess/), and through
fairseq-train: which tokens MLM predicts and draws (XLM's mask_out and its evaluator's), XLM's
--max_len per side, XLM's loop."""

import numpy as np
import pytest
import torch
from conftest import PRETRAIN_ARGS, fairseq, json_logs, setup_task

from xlm_fairseq.data import MaskedLMConfig, mask_tokens, stream_dataset


def _blocks(data_bin, dictionary, n_blocks=300, block=256):
    from fairseq.data import data_utils

    mono = data_utils.load_indexed_dataset(str(data_bin / "train.en"), dictionary)
    stream = stream_dataset(mono, block, dictionary.pad(), dictionary.eos())
    return torch.stack([stream[i] for i in range(n_blocks)])


@pytest.fixture(scope="module")
def dictionary(data_bin):
    from xlm_fairseq.data.data_bin import load_data_bin_dictionary as load_dictionary

    return load_dictionary(str(data_bin))


def _specials(dictionary):
    ids = [i for i, sym in enumerate(dictionary.symbols) if i < dictionary.nspecial or sym.startswith("<special")]
    assert len(ids) == 4 + 10
    return torch.tensor(ids)


def test_alpha_0_predicts_sentence_boundaries_like_words(data_bin, dictionary):
    """XLM's mask_out at --sample-alpha 0 (its default): every non-pad token but a block's first is
    predicted with probability 0.15, so </s> (4-8 % of a real stream) is predicted as often as a
    word and makes up the same share of the targets."""
    tokens = _blocks(data_bin, dictionary)
    eos = dictionary.eos()
    candidates = tokens[:, 1:][tokens[:, 1:].ne(dictionary.pad())]
    eos_share = candidates.eq(eos).float().mean().item()
    assert 0.02 < eos_share < 0.1, eos_share
    cfg = MaskedLMConfig.from_dictionary(dictionary, dictionary.index("<special1>"))
    inputs, pred_mask, targets = mask_tokens(tokens, cfg, torch.Generator().manual_seed(0))
    assert not pred_mask[:, 0].any(), "the first position of a block is never predicted (XLM)"
    assert abs(len(targets) / len(candidates) - 0.15) < 0.005
    predicted_eos = targets.eq(eos).float().mean().item()
    assert abs(predicted_eos - eos_share) < 0.006, (predicted_eos, eos_share)
    # those </s> are hidden like words: 80 % of them show the mask token
    shown = inputs[pred_mask][targets.eq(eos)]
    assert abs(shown.eq(cfg.mask_idx).float().mean().item() - 0.8) < 0.05


@pytest.mark.parametrize("alpha", [0.5, 1.0])
def test_special_symbols_are_not_predicted_at_alpha(data_bin, dictionary, alpha):
    """At --sample-alpha > 0 XLM's specials weigh 0 (count 0; fairseq's Dictionary counts its four
    as 1, which under count^-alpha would make them the likeliest targets)."""
    assert dictionary.count[dictionary.eos()] == 1 and dictionary.count[dictionary.pad()] == 1  # fairseq's own counts
    tokens = _blocks(data_bin, dictionary)
    cfg = MaskedLMConfig.from_dictionary(dictionary, dictionary.index("<special1>"), sample_alpha=alpha)
    _, pred_mask, targets = mask_tokens(tokens, cfg, torch.Generator().manual_seed(0))
    assert not torch.isin(targets, _specials(dictionary)).any(), "a special symbol was predicted"
    assert not pred_mask[:, 0].any()
    assert abs(len(targets) / int(tokens.ne(dictionary.pad()).sum()) - 0.15) < 0.01


def test_random_replacement_draws(data_bin, dictionary):
    """XLM draws the 10 % random replacements from the whole vocabulary (special symbols included);
    never <pad> here, which this model hides from attention as padding where XLM attends to it."""
    tokens = _blocks(data_bin, dictionary, n_blocks=100)
    cfg = MaskedLMConfig.from_dictionary(dictionary, dictionary.index("<special1>"), mask_keep_rand=(0.0, 0.0, 1.0))
    inputs, pred_mask, _ = mask_tokens(tokens, cfg, torch.Generator().manual_seed(0))
    drawn = inputs[pred_mask]
    assert len(drawn) > 3000
    assert not inputs.eq(dictionary.pad()).any()
    assert torch.isin(drawn, _specials(dictionary)).any(), "special symbols are drawn too (XLM)"
    assert len(set(drawn.tolist())) > 0.5 * len(dictionary)


def test_evaluation_mask_is_xlms_evaluator(data_bin, dictionary):
    """XLM's evaluator (valid_{lang}_mlm_ppl): positions with rand <= 0.15, never a row's first or
    last token, at least one per row, special symbols included; the same draw every time."""
    from xlm_fairseq.data.masking import eval_pred_mask

    tokens = _blocks(data_bin, dictionary, n_blocks=200, block=32)
    tokens[-1, 5:] = dictionary.pad()  # a short last block, as a stream's end
    tokens[-2, 3:] = dictionary.pad()  # a row too short to draw from by chance: one forced position
    lengths = tokens.ne(dictionary.pad()).sum(1)
    masks = [eval_pred_mask(tokens, dictionary.pad(), 0.15, torch.Generator().manual_seed(7)) for _ in range(2)]
    assert torch.equal(masks[0], masks[1])
    pred = masks[0]
    assert not pred[:, 0].any()
    assert not pred[torch.arange(len(tokens)), lengths - 1].any(), "a row's last token is never predicted"
    assert not pred[tokens.eq(dictionary.pad())].any()
    assert pred.any(1).all(), "every row predicts something"
    assert pred[-2].nonzero().flatten().tolist() == [1]
    inner = int((lengths - 2).clamp(min=0).sum())
    assert abs(int(pred.sum()) / inner - 0.15) < 0.02
    assert tokens[pred].eq(dictionary.eos()).any(), "</s> is scored like a word"


def test_translation_training_drops_sentences_over_max_len_per_side(data_bin):
    """XLM --max_len 100: AE/BT/MT training sentences with more subwords (</s> not counted) on a side
    are dropped; validation and generation keep everything."""
    from fairseq import utils

    limit = 20
    task, cfg = setup_task(
        data_bin,
        "translation_lm",
        "--langs",
        "en,de,ro",
        "--ae-steps",
        "en",
        "--bt-steps",
        "de-en-de",
        "--mt-steps",
        "en-ro",
        "--max-sentence-len",
        limit,
    )
    task.load_dataset("train")
    zipped = task.dataset("train")
    model_max = 512
    itr = task.get_batch_iterator(
        zipped, max_tokens=4000, max_positions=utils.resolve_max_positions(task.max_positions(), model_max)
    )
    seen = {}
    for batch in itr.next_epoch_itr(shuffle=False):
        for key, b in batch.items():
            src = b["net_input"]["src_tokens"].ne(task.dictionary.pad()).sum(1) - 2  # leading and final </s>
            tgt = b["target"].ne(task.dictionary.pad()).sum(1) - 1
            assert src.max() <= limit and tgt.max() <= limit, key
            seen.setdefault(key, set()).update(b["id"].tolist())
    raw = {k: np.asarray(ds.sizes) for k, ds in zipped.datasets.items()}
    for key, sizes in raw.items():
        keep = (sizes <= np.array([limit + 2, limit + 1])).all(axis=1)
        assert 0 < keep.sum() < len(keep), key  # the limit bites on this data
        assert seen[key] == set(np.nonzero(keep)[0].tolist()), key
    task.load_dataset("valid")  # en-ro and de-en, 100 sentences each
    valid = task.dataset("valid")
    itr = task.get_batch_iterator(
        valid, max_tokens=4000, max_positions=utils.resolve_max_positions(task.max_positions(), model_max)
    )
    ids = {}
    for batch in itr.next_epoch_itr(shuffle=False):
        for key, b in batch.items():
            ids.setdefault(key, set()).update(b["id"].tolist())
    assert {k: len(v) for k, v in ids.items()} == {"mt_en-ro": 100, "mt_de-en": 100}
    assert any((np.asarray(ds.sizes) > limit + 2).any() for ds in valid.datasets.values())


def test_tlm_limits_each_side_not_the_total(data_bin):
    task, _ = setup_task(
        data_bin,
        "cross_lingual_lm",
        "--langs",
        "en,de,ro",
        "--mlm-steps",
        "en-de",
        "--max-sentence-len",
        40,
        "--tokens-per-sample",
        48,
    )
    task.load_dataset("train")
    tlm = task.dataset("train").datasets["tlm_en-de"].dataset
    src, tgt = np.asarray(tlm.src.sizes) - 1, np.asarray(tlm.tgt.sizes) - 1
    assert len(tlm) == int(((src <= 40) & (tgt <= 40)).sum())
    assert tlm.sizes.max() > 48, "pairs longer than a stream block are kept (XLM limits each side)"


@pytest.mark.slow  # two fairseq-train runs; the arithmetic in-process: test_run_objectives.py
def test_step_per_objective_is_xlms_loop(data_bin, tmp_path):
    """--step-per-objective: each update trains exactly one objective (its own Adam step, clip and LR
    step), walking XLM iterations; the default update trains the whole iteration."""
    common = [
        data_bin,
        *PRETRAIN_ARGS,
        "--langs",
        "en,de,ro",
        "--mlm-steps",
        "en,de,en-de",
        "--log-interval",
        "1",
        "--clip-norm",
        "5",
        "--max-update",
        "12",
    ]
    xlm = json_logs(
        fairseq("train", *common, "--step-per-objective", "--save-dir", tmp_path / "a").stdout, "train_inner"
    )
    summed = json_logs(fairseq("train", *common, "--save-dir", tmp_path / "b").stdout, "train_inner")
    keys = ("mlm_en", "mlm_de", "tlm_en-de")

    def trained(records):
        """Objectives with a loss in each record (after fairseq's interval reset an untrained one shows null)."""
        return [[k for k in keys if r.get(f"{k}_loss") is not None] for r in records]

    assert len(xlm) == len(summed) == 12
    assert all(len(t) == 1 for t in trained(xlm)), trained(xlm)
    # an iteration is 2 MLM draws + 1 TLM: TLM comes every third update
    assert [t == ["tlm_en-de"] for t in trained(xlm)] == [i % 3 == 2 for i in range(12)]
    assert all("tlm_en-de" in t and len(t) >= 2 for t in trained(summed)), trained(summed)
    assert max(float(r["gnorm"]) for r in xlm) > 0


def updated(task, update_num):
    """(keys of the objectives an update trains, its iteration)."""
    objectives, iteration = task.loop.update_objectives(update_num)
    return [o.key for o in objectives], iteration


def test_translation_iterations_shorten_when_a_lambda_reaches_0(data_bin):
    """XLM iteration = AE, MT, BT objectives with a weight; lambda schedules count iterations. With
    --step-per-objective an objective of weight 0 takes no step (XLM's step returns at once): the
    iteration gets shorter, and every BT direction keeps one step per iteration."""
    task, _ = setup_task(
        data_bin,
        "translation_lm",
        "--langs",
        "en,de",
        "--ae-steps",
        "en,de",
        "--bt-steps",
        "en-de-en,de-en-de",
        "--lambda-ae",
        "0:1,10:0",
        "--step-per-objective",
    )
    assert task.loop.iteration_length(0) == task.loop.iteration_length(9) == 4 and task.loop.iteration_length(10) == 2
    early = [updated(task, u) for u in range(8)]
    assert [it for _, it in early] == [0] * 4 + [1] * 4
    assert sorted(k for keys, _ in early[:4] for k in keys) == ["ae_de", "ae_en", "bt_de-en-de", "bt_en-de-en"]
    assert [keys[0][:2] for keys, _ in early[:4]] == ["ae", "ae", "bt", "bt"]  # XLM's order: AE before BT
    # iterations 0-9 take 4 steps each (lambda_ae 1 .. 0.1); from iteration 10 on, lambda_ae = 0: 2 steps each
    late = [updated(task, u) for u in range(36, 48)]
    assert [it for _, it in late] == [9] * 4 + [10, 10, 11, 11, 12, 12, 13, 13]
    for i in range(4, 12, 2):
        assert sorted(late[i][0] + late[i + 1][0]) == ["bt_de-en-de", "bt_en-de-en"], late
    assert task.loop.update_objectives(100_000)[1] == 10 + (100_000 - 40) // 2
    task.loop.step_per_objective = False
    assert sorted(updated(task, 5)[0]) == ["ae_de", "ae_en", "bt_de-en-de", "bt_en-de-en"]
    assert sorted(updated(task, 10)[0]) == ["bt_de-en-de", "bt_en-de-en"]


def test_a_lambda_that_returns_and_one_that_never_starts(data_bin):
    """Iterations of changing length are counted exactly across schedule points (the update -> iteration
    map is what a resumed run recomputes), and a run whose every weight is 0 is one clear error."""
    task, _ = setup_task(
        data_bin,
        "translation_lm",
        "--langs",
        "en,de",
        "--ae-steps",
        "en,de",
        "--mt-steps",
        "de-en",
        "--lambda-ae",
        "0:0,5:0,6:1",
        "--lambda-mt",
        "0:1,3:0",
        "--step-per-objective",
    )
    lengths = [task.loop.iteration_length(i) for i in range(9)]
    assert lengths == [1, 1, 1, 0, 0, 0, 2, 2, 2], lengths  # MT gone from iteration 3, AE there from 6
    expected = [i for i, n in enumerate(lengths) for _ in range(n)]
    assert [task.loop.update_objectives(u)[1] for u in range(len(expected))] == expected
    task, _ = setup_task(
        data_bin,
        "translation_lm",
        "--langs",
        "en,de",
        "--ae-steps",
        "en",
        "--lambda-ae",
        "0:1,2:0",
        "--step-per-objective",
    )
    assert [task.loop.update_objectives(u)[1] for u in range(2)] == [0, 1]
    with pytest.raises(Exception, match="every objective's weight is 0 from iteration 2"):
        task.loop.update_objectives(2)
    with pytest.raises(Exception, match="negative weight"):
        setup_task(data_bin, "translation_lm", "--langs", "en,de", "--ae-steps", "en", "--lambda-ae", "0:1,10:-1")


def test_mt_steps_are_drawn_with_replacement(data_bin):
    """XLM's shuf_order for --mt-steps: min(5, n) draws with replacement per iteration (AE and BT:
    each once, in random order)."""
    task, _ = setup_task(
        data_bin,
        "translation_lm",
        "--langs",
        "en,de,ro",
        "--ae-steps",
        "en,de",
        "--mt-steps",
        "en-de,de-en,en-ro",
        "--bt-steps",
        "en-de-en,de-en-de",
        "--step-per-objective",
    )
    plans = [[o.key for o in task.loop.iteration_objectives(i)] for i in range(3000)]
    assert {len(p) for p in plans} == {2 + 3 + 2} and task.loop.iteration_length(0) == 7
    assert all(sorted(p[:2]) == ["ae_de", "ae_en"] and sorted(p[5:]) == ["bt_de-en-de", "bt_en-de-en"] for p in plans)
    mt = [p[2:5] for p in plans]
    repeated = sum(len(set(draws)) < 3 for draws in mt) / len(mt)
    assert abs(repeated - (1 - 6 / 27)) < 0.03, repeated  # 3 draws of 3 with replacement: all differ 6/27
    counts = [sum(draws.count(k) for draws in mt) / (3 * len(mt)) for k in ("mt_en-de", "mt_de-en", "mt_en-ro")]
    assert all(abs(c - 1 / 3) < 0.02 for c in counts), counts


def test_a_cycled_objective_draws_new_noise_each_round(data_bin):
    """The smaller dataset of an update comes round several times within an epoch; each round must
    see new AE noise (XLM draws noise afresh every time a sentence is used)."""
    task, _ = setup_task(
        data_bin, "translation_lm", "--langs", "en,de,ro", "--ae-steps", "en,ro", "--word-blank", "0.3"
    )
    task.load_dataset("train")
    zipped = task.dataset("train")
    batches = zipped.batch_by_size(zipped.ordered_indices(), max_tokens=1000)
    n_ro = len(zipped._ordered_indices["ae_ro"])
    k = zipped.keys.index("ae_ro")
    ro = np.concatenate([b[b // zipped.POSITIONS == k] - k * zipped.POSITIONS for b in batches])
    assert ro.max() > n_ro + 100  # en has 3000 sentences, ro 2000: ro comes round again within the epoch
    same = differ = 0
    for position in range(min(ro.max() + 1, 2 * n_ro) - n_ro):
        first, second = zipped.item("ae_ro", position), zipped.item("ae_ro", position + n_ro)
        assert torch.equal(first["target"], second["target"])  # the same sentence ...
        if torch.equal(first["source"], second["source"]):
            same += 1
        else:
            differ += 1
    assert differ > 10 * max(same, 1), (same, differ)  # ... with new noise
    again = zipped.item("ae_ro", 0)["source"]
    assert torch.equal(again, zipped.item("ae_ro", 0)["source"]), "draws are reproducible"


def test_a_cycled_lm_objective_draws_new_masks_each_round(data_bin):
    """Likewise MLM: the same block in its second round gets new masked positions."""
    args = ("--langs", "en,de,ro", "--mlm-steps", "en,ro", "--tokens-per-sample", "32")
    task, _ = setup_task(data_bin, "cross_lingual_lm", *args)
    task.load_dataset("train")
    zipped = task.dataset("train")
    zipped.ordered_indices()
    n = len(zipped._ordered_indices["mlm_ro"])
    collate = zipped.datasets["mlm_ro"].collater
    differ = 0
    for position in range(20):
        items = [zipped.item("mlm_ro", position + r * n) for r in (0, 1)]
        assert torch.equal(items[0]["tokens"], items[1]["tokens"])  # the same block ...
        masks = [collate([item])["net_input"]["pred_mask"] for item in items]
        differ += not torch.equal(*masks)  # ... masked afresh
    assert differ >= 18, differ
    again = collate([zipped.item("mlm_ro", 0)])["net_input"]["pred_mask"]
    assert torch.equal(again, collate([zipped.item("mlm_ro", 0)])["net_input"]["pred_mask"]), "draws are reproducible"


def epoch_batches(task, max_tokens, split="train"):
    """The collated batches of one epoch of ``split``, through fairseq's own iterator."""
    task.load_dataset(split)
    itr = task.get_batch_iterator(task.dataset(split), max_tokens=max_tokens, max_positions=512, seed=1)
    return list(itr.next_epoch_itr(shuffle=split == "train"))


def test_each_objective_fills_its_own_batch(data_bin):
    """XLM batches each objective apart: MLM streams beside TLM pairs are as many as without them
    (a zip sized by the longest objective gave MLM less than half its --max-tokens), and TLM pairs
    are grouped by length (few pads), every pair once in the epoch."""
    args = ("--langs", "en,de", "--tokens-per-sample", "32", "--max-tokens", "512", "--step-per-objective")
    alone, _ = setup_task(data_bin, "cross_lingual_lm", "--mlm-steps", "en,de", *args)
    mixed, _ = setup_task(data_bin, "cross_lingual_lm", "--mlm-steps", "en,de,en-de", *args)
    batches = epoch_batches(mixed, 512)
    for run in (epoch_batches(alone, 512), batches):
        full = [len(b["mlm_en"]["id"]) == 16 for b in run]  # 512 / 32, but for the remainder
        assert sum(full) >= len(full) - 1, [len(b["mlm_en"]["id"]) for b in run]
    pairs = [b["tlm_en-de"] for b in batches]
    padded = sum(p["net_input"]["src_tokens"].numel() for p in pairs)
    real = sum(p["ntokens"] for p in pairs)
    assert all(p["net_input"]["src_tokens"].numel() <= 512 for p in pairs)
    assert real / padded > 0.9, (real, padded)  # random order: about half the positions were pads
    ids = torch.cat([p["id"] for p in pairs])
    n_pairs = len(mixed.dataset("train").datasets["tlm_en-de"])
    assert sorted(ids.tolist())[:n_pairs] == list(range(n_pairs)), "a pair missing from the epoch"
