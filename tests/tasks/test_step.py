"""xlm_fairseq/tasks/step.py: what an update's objective loop returns and back-propagates, against sums
written out by hand.

Summed loop (default): one update trains every objective of the iteration; objective k (weight w_k,
n_k predicted tokens, mean token loss m_k) back-propagates ``w_k * m_k * S`` with S the first
objective's n, and the update returns loss ``sum_k w_k * m_k * S`` and sample size ``K * S`` (fairseq
divides the gradient by it: the mean over objectives of ``w_k * m_k``). XLM's loop
(``--step-per-objective``): one objective per update, its summed loss ``m * n`` and size n.

Each m_k and n_k is computed here from the model's logits with torch's cross-entropy; the loop is
``run_objectives`` over the task's objective objects, and fairseq's entry ``task.train_step``. Under
DDP, the summed loop all-reduces once per update, not once per objective."""

import pytest
import torch
import torch.nn.functional as F
from conftest import setup_task

from xlm_fairseq.tasks.step import run_objectives

NO_DROPOUT = ["--dropout", "0", "--attention-dropout", "0", "--seed", "1", "--cpu"]
LM_ARGS = ["--tokens-per-sample", "64", "--max-tokens", "600", *NO_DROPOUT]


class RecordingOptimizer:
    """What ``run_objectives`` needs of fairseq's optimizer: ``backward``. Keeps each loss it gets."""

    def __init__(self):
        self.losses = []

    def backward(self, loss):
        self.losses.append(loss.detach().clone())
        loss.backward()


def _task(data_bin, task_name, *args):
    task, cfg = setup_task(data_bin, task_name, *args)
    task.load_dataset("train")
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    itr = task.get_batch_iterator(task.dataset("train"), max_tokens=600, seed=1, max_positions=(512, 512))
    sample = next(iter(itr.next_epoch_itr(shuffle=True)))
    return task, model.eval(), criterion, sample


def _mean_and_count(model, batch, pad):
    """(mean token loss over the predicted positions, their number), from the logits."""
    logits, _ = model(**batch["net_input"])
    target = batch["target"].reshape(-1)
    n = int(target.ne(pad).sum())
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), target, ignore_index=pad), n


def _objectives(task, keys):
    return [task.objective(key) for key in keys]


def _by_hand(model, sample, keys, pad, weights=None):
    """(loss with its graph, sample size, each objective's back-propagated loss) of the summed loop."""
    parts, size = [], None
    for key in keys:
        mean, n = _mean_and_count(model, sample[key], pad)
        size = n if size is None else size
        parts.append(mean * size * (1.0 if weights is None else weights[key]))
    return sum(parts), len(keys) * size, parts


@pytest.fixture(scope="module")
def lm(data_bin):
    return _task(data_bin, "cross_lingual_lm", "--langs", "en,de,ro", "--mlm-steps", "en,de,en-de", *LM_ARGS)


@pytest.mark.parametrize(
    "keys", [["mlm_en"], ["tlm_en-de", "mlm_en"], ["mlm_de", "tlm_en-de", "mlm_en"], ["mlm_en", "mlm_en"]]
)
def test_summed_loop_returns_each_objectives_mean_times_the_first_size(lm, keys):
    """1, 2 and 3 objectives (and one drawn twice, as XLM's sampling with replacement can), in
    evaluation (no optimizer) and in training (one backward pass per objective)."""
    task, model, criterion, sample = lm
    pad = task.dictionary.pad()
    counts = {k: _mean_and_count(model, sample[k], pad)[1] for k in set(keys)}
    assert len(set(counts.values())) == len(counts), "objectives of different sizes: S is the first's"
    expected, size, parts = _by_hand(model, sample, keys, pad)
    assert size == len(keys) * counts[keys[0]]

    with torch.no_grad():
        loss, sample_size, logs = run_objectives(sample, model, criterion, _objectives(task, keys))
    assert int(sample_size) == size
    assert float(loss) == pytest.approx(expected.item(), rel=1e-5)
    for key in set(keys):  # the per-objective metrics stay fairseq's sums over that objective's tokens
        assert int(logs[f"{key}:ntokens"]) == keys.count(key) * counts[key]

    model.zero_grad()
    optimizer = RecordingOptimizer()
    loss, sample_size, _ = run_objectives(sample, model, criterion, _objectives(task, keys), optimizer=optimizer)
    assert int(sample_size) == size and float(loss) == pytest.approx(expected.item(), rel=1e-5)
    assert [float(x) for x in optimizer.losses] == pytest.approx([p.item() for p in parts], rel=1e-5)
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    expected.backward()
    largest = max(float(p.grad.abs().max()) for p in model.parameters())
    for (name, p), a in zip(model.named_parameters(), got):
        if name.endswith("k_lin.bias"):
            # the softmax ignores a constant per query, so keys' biases get a zero gradient: in both loops
            # only rounding of the other gradients' size (1e-7 of a largest 33, its order of sums varying)
            assert float(a.abs().max()) <= 1e-6 * largest and float(p.grad.abs().max()) <= 1e-6 * largest, name
        else:  # float32 sums by two cross-entropy implementations: rounding
            assert torch.allclose(a, p.grad, rtol=1e-4, atol=max(1e-7, 1e-6 * float(p.grad.abs().max()))), name
    model.zero_grad()


def test_weights_scale_the_loss_not_the_sample_size(lm):
    task, model, criterion, sample = lm
    keys, weights = ["mlm_en", "tlm_en-de", "mlm_de"], {"mlm_en": 1.0, "tlm_en-de": 0.25, "mlm_de": 3.0}
    expected, size, _ = _by_hand(model, sample, keys, task.dictionary.pad(), weights)
    with torch.no_grad():
        loss, sample_size, _ = run_objectives(sample, model, criterion, _objectives(task, keys), weights)
    assert int(sample_size) == size
    assert float(loss) == pytest.approx(expected.item(), rel=1e-5)


def test_ignore_grad_returns_the_loss_and_leaves_no_gradient(lm):
    task, model, criterion, sample = lm
    keys = ["mlm_en", "tlm_en-de"]
    expected, size, _ = _by_hand(model, sample, keys, task.dictionary.pad())
    model.zero_grad()
    loss, sample_size, _ = run_objectives(
        sample, model, criterion, _objectives(task, keys), optimizer=RecordingOptimizer(), ignore_grad=True
    )
    assert int(sample_size) == size and float(loss) == pytest.approx(expected.item(), rel=1e-5)
    assert all(p.grad is None or not p.grad.any() for p in model.parameters())


@pytest.mark.parametrize(
    "steps,n_objectives", [("en", 1), ("en,en-de", 2), ("en,de,en-de", 3)]
)  # XLM's draws: min(5, n) per family (MLM: en, de; TLM: en-de)
@pytest.mark.parametrize("loop", ["summed", "step-per-objective"])
def test_train_step_trains_the_updates_objectives(data_bin, steps, n_objectives, loop):
    """fairseq's entry: under the summed loop update 0 is the whole of iteration 0; under XLM's loop
    updates 0..K-1 are its objectives one at a time, each fairseq's summed loss over its tokens."""
    extra = ["--step-per-objective"] if loop == "step-per-objective" else []
    task, model, criterion, sample = _task(
        data_bin, "cross_lingual_lm", "--langs", "en,de,ro", "--mlm-steps", steps, *LM_ARGS, *extra
    )
    pad = task.dictionary.pad()
    plan = [o.key for o in task.loop.iteration_objectives(0)]
    assert len(plan) == task.loop.iteration_length(0) == n_objectives
    if loop == "summed":
        updates = {0: plan}
    else:
        updates = {u: [plan[u]] for u in range(n_objectives)}
        assert task.loop.update_objectives(n_objectives) == ([task.loop.iteration_objectives(1)[0]], 1)
    for update_num, keys in updates.items():
        assert [o.key for o in task.loop.update_objectives(update_num)[0]] == keys
        expected, size, parts = _by_hand(model, sample, keys, pad)
        if loop == "step-per-objective":  # one objective: exactly the criterion's summed loss
            summed, n, _ = criterion(model, sample[keys[0]], key=keys[0])
            assert size == int(n) and expected.item() == pytest.approx(summed.item(), rel=1e-5)
        optimizer = RecordingOptimizer()
        model.zero_grad()
        loss, sample_size, logs = task.train_step(sample, model, criterion, optimizer, update_num)
        model.eval()  # train_step sets training mode; without dropout the numbers are the same
        assert int(sample_size) == size
        assert float(loss) == pytest.approx(expected.item(), rel=1e-5)
        assert len(optimizer.losses) == len(keys)
        assert [float(x) for x in optimizer.losses] == pytest.approx([p.item() for p in parts], rel=1e-5)
        assert {k.split(":")[0] for k in logs if k.endswith(":ntokens")} == set(keys)
    model.zero_grad()


def test_translation_objectives_weigh_by_their_lambda(data_bin):
    """translation_lm passes each objective's lambda: AE at 0.5 and MT at 1 in update 0."""
    task, model, criterion, sample = _task(
        data_bin,
        "translation_lm",
        "--langs",
        "en,de",
        "--ae-steps",
        "de",
        "--mt-steps",
        "en-de",
        "--lambda-ae",
        "0.5",
        "--max-tokens",
        "600",
        *NO_DROPOUT,
    )
    keys = [o.key for o in task.loop.update_objectives(0)[0]]
    assert sorted(keys) == ["ae_de", "mt_en-de"]
    weights = {"ae_de": 0.5, "mt_en-de": 1.0}
    expected, size, parts = _by_hand(model, sample, keys, task.dictionary.pad(), weights)
    optimizer = RecordingOptimizer()
    loss, sample_size, _ = task.train_step(sample, model, criterion, optimizer, 0)
    assert int(sample_size) == size
    assert float(loss) == pytest.approx(expected.item(), rel=1e-5)
    assert [float(x) for x in optimizer.losses] == pytest.approx([p.item() for p in parts], rel=1e-5)


def test_span_masking_is_one_more_objective_of_cross_lingual_lm(data_bin):
    """The worked example of adding an objective (objectives/span.py): --span-steps en beside MLM de
    builds its own batches of whole sentences, each predicting one contiguous span, joins XLM's loop
    after the MLM family and trains through the task's own train_step and criterion."""
    task, model, criterion, sample = _task(
        data_bin, "cross_lingual_lm", "--langs", "en,de", "--mlm-steps", "de", "--span-steps", "en", *LM_ARGS
    )
    assert [o.key for o in task.loop.iteration_objectives(0)] == ["mlm_de", "span_en"]
    batch, pad, eos = sample["span_en"], task.dictionary.pad(), task.dictionary.eos()
    tokens, pred = batch["net_input"]["src_tokens"], batch["net_input"]["pred_mask"]
    assert tokens.size(0) > 1 and int(pred.sum()) == len(batch["target"])
    for row, mask in zip(tokens, pred):
        words = int((row.ne(pad) & row.ne(eos)).sum())
        picked = mask.nonzero().flatten().tolist()
        assert row[words] == eos, "one sentence per row, not a stream block"
        assert len(picked) == max(1, round(0.5 * words)) and picked == list(range(picked[0], picked[-1] + 1))
    expected, size, parts = _by_hand(model, sample, ["mlm_de", "span_en"], pad)
    optimizer = RecordingOptimizer()
    loss, sample_size, logs = task.train_step(sample, model, criterion, optimizer, 0)
    model.eval()
    assert int(sample_size) == size and float(loss) == pytest.approx(expected.item(), rel=1e-5)
    assert int(logs["span_en:ntokens"]) == len(batch["target"])
    model.zero_grad()


def test_summed_loop_all_reduces_once_per_update(data_bin, tmp_path):
    """PyTorch's DDP all-reduces in every backward pass; the objectives of an update used to cost one
    all-reduce each (counted with a communication hook, one process over gloo)."""
    import torch.distributed as dist
    from fairseq import optim
    from torch.nn.parallel import DistributedDataParallel

    from xlm_fairseq.tasks.step import run_objectives

    args = ["--langs", "en,de", "--mt-steps", "en-de", "--ae-steps", "de,en", "--cpu", "--max-tokens", "1000"]
    task, cfg = setup_task(data_bin, "translation_lm", *args, "--optimizer", "adam", "--lr", "0.0001")
    task.load_dataset("train")
    itr = task.get_batch_iterator(task.dataset("train"), max_tokens=1000, seed=1, max_positions=(512, 512))
    sample = next(iter(itr.next_epoch_itr(shuffle=True)))
    keys = ["mt_en-de", "ae_de", "ae_en"]
    assert all(sample.get(k) for k in keys)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        model = DistributedDataParallel(task.build_model(cfg.model), find_unused_parameters=True)
        criterion = task.build_criterion(cfg.criterion)
        optimizer = optim.build_optimizer(cfg.optimizer, list(model.parameters()))
        calls = []

        def count(state, bucket):  # stands for the all-reduce: one process has nothing to add
            calls.append(bucket.index())
            done = torch.futures.Future()
            done.set_result(bucket.buffer())
            return done

        model.register_comm_hook(None, count)
        objectives = [task.objective(key) for key in keys]
        run_objectives(sample, model, criterion, objectives[:1], optimizer=optimizer)
        one = len(calls)
        calls.clear()
        run_objectives(sample, model, criterion, objectives, optimizer=optimizer)
        assert one > 0 and len(calls) == one
    finally:
        dist.destroy_process_group()
