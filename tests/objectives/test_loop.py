"""XLM's loop (xlm_fairseq/objectives/schedule.py) through fairseq-train and the task: one step per
objective, iterations that shorten as lambdas reach 0, draws with replacement, new noise and masks
each round, and one batch per objective."""

import numpy as np
import pytest
import torch
from conftest import PRETRAIN_ARGS, fairseq, json_logs, setup_task


@pytest.mark.slow  # two fairseq-train runs; the arithmetic in-process: tests/tasks/test_step.py
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


def test_the_loop_order_is_each_objectives_own_not_the_import_order(monkeypatch):
    """A family's place in an iteration of XLM's loop is its class's ``loop_order`` (CLM, MLM, TLM, span, then
    AE, MT, BT) whatever order the classes were registered in; a new family takes the place its number says,
    and two families cannot share one."""
    from xlm_fairseq.objectives import base
    from xlm_fairseq.objectives.lm import MLMOptions

    xlm = ["clm", "mlm", "tlm", "span", "ae", "mt", "bt"]
    assert base.loop_families() == xlm
    monkeypatch.setattr(base, "OBJECTIVES", dict(reversed(list(base.OBJECTIVES.items()))))
    assert base.loop_families() == xlm

    @base.register_objective
    class Between(base.Objective):
        family, option, Options, loop_order = "between", "mlm_steps", MLMOptions, 25

    assert base.loop_families() == ["clm", "mlm", "between", *xlm[2:]]
    with pytest.raises(AssertionError, match="loop_order 25"):

        @base.register_objective
        class Clash(base.Objective):
            family, option, Options, loop_order = "clash", "mlm_steps", MLMOptions, 25
