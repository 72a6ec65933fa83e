"""``--compile``: training through ``torch.compile`` equals eager training (the plain version a speed path
must equal), compiles few graphs and says so in the log, and saves the checkpoint eager decoding reads."""

import copy
import runpy

import pytest
import torch
from conftest import PRETRAIN_ARGS, ROOT, UNMT_ARGS, UNMT_STEPS, fairseq, generate_lines, json_logs

UPDATES = ["--max-update", "50", "--log-interval", "10"]
NO_DROPOUT = ["--dropout", "0", "--attention-dropout", "0"]  # the same random numbers in both runs


def train_eager_and_compiled(data_bin, tmp_path, args):
    """{mode: (log, checkpoint state)} of the same fairseq-train run, eager and with --compile."""
    runs = {}
    for mode, extra in (("eager", []), ("compiled", ["--compile"])):
        save = tmp_path / mode
        proc = fairseq("train", data_bin, *args, *UPDATES, *NO_DROPOUT, *extra, "--save-dir", save)
        state = torch.load(save / "checkpoint_last.pt", map_location="cpu", weights_only=False)
        runs[mode] = (proc.stdout + proc.stderr, state["model"])
    return runs


def assert_compiled_equals_eager(runs, stacks, max_graphs):
    (eager_log, eager), (compiled_log, compiled) = runs["eager"], runs["compiled"]
    eager_windows, compiled_windows = json_logs(eager_log, "train_inner"), json_logs(compiled_log, "train_inner")
    assert len(eager_windows) == len(compiled_windows) == 5
    for e, c in zip(eager_windows, compiled_windows):
        keys = [k for k in e if k.endswith("_loss")]
        assert keys and keys == [k for k in c if k.endswith("_loss")]
        for k in keys:  # logged with 3 decimals
            assert float(c[k]) == pytest.approx(float(e[k]), abs=2e-3), (e["num_updates"], k)
    # 50 Adam steps later the weights still agree to float rounding, under the names eager training gives
    assert compiled.keys() == eager.keys()
    for name, value in eager.items():
        # (keys' biases get a zero gradient up to rounding, the softmax ignores them, and Adam scales that
        # rounding up to steps of the learning rate's size: they agree in neither run's order of sums)
        if not name.endswith("k_lin.bias"):
            torch.testing.assert_close(compiled[name], value, rtol=1e-3, atol=1e-4, msg=name)
    compiles = [line for line in compiled_log.splitlines() if "torch.compile:" in line]
    assert {side for side in stacks if any(f"{side} stack compiled" in line for line in compiles)} == set(stacks)
    # automatic dynamic shapes: a static graph, then graphs whose changed sizes are symbolic: 2-3 per stack
    assert 0 < len(compiles) <= max_graphs, compiles
    assert "torch.compile:" not in eager_log
    # what the benchmark reads of a compiled run's log
    stats = runpy.run_path(str(ROOT / "bench" / "logs.py"))["compile_stats"]
    assert stats(compiled_log)["compiled_graphs"] == len(compiles) and stats(compiled_log)["compile_s"] > 0
    assert stats(eager_log) == {}


@pytest.mark.slow  # two fairseq-train runs and a cold compile
def test_compiled_pretraining_equals_eager(data_bin, tmp_path):
    """MLM and TLM batches (given positions, other shapes) through one compiled encoder stack."""
    args = [*PRETRAIN_ARGS, "--langs", "en,de,ro", "--mlm-steps", "en,de,en-de", "--no-epoch-checkpoints"]
    runs = train_eager_and_compiled(data_bin, tmp_path, args)
    assert_compiled_equals_eager(runs, ["encoder"], max_graphs=3)


@pytest.mark.slow  # two fairseq-train runs and a cold compile
def test_compiled_translation_training_equals_eager(pretrained, data_bin, tmp_path):
    """MT, AE and back-translation: both stacks compiled, the BT generation eager (eval mode, cache); the
    compiled run's checkpoint translates like the eager one's with fairseq-generate."""
    args = [*UNMT_ARGS, *UNMT_STEPS, "--mt-steps", "en-de,de-en", "--pretrained-xlm-checkpoint", pretrained]
    runs = train_eager_and_compiled(data_bin, tmp_path, args)
    assert_compiled_equals_eager(runs, ["encoder", "decoder"], max_graphs=6)
    hypotheses = {}
    for mode in runs:
        lines, _ = generate_lines(data_bin, tmp_path / mode / "checkpoint_last.pt", "de", "en", "--beam", "1")
        hypotheses[mode] = lines["H"]
    same = sum(hypotheses["eager"][i] == hypotheses["compiled"].get(i) for i in hypotheses["eager"])
    assert len(hypotheses["eager"]) == 60 and same >= 57, same


@pytest.mark.slow  # a compile
def test_compiled_stack_keeps_dropout_in_training_only():
    """Under --compile the stack's dropout is the compiler's own: on in training, off in evaluation (where
    the stack runs eager)."""
    from xlm_fairseq.modules.transformer import XLMTransformer

    torch.manual_seed(0)
    dims = dict(n_words=50, pad_index=1, n_langs=3, dim=32, n_layers=2, n_heads=4, ffn_dim=64)
    plain = XLMTransformer(**dims, dropout=0.3, attention_dropout=0.3).eval()
    compiled = copy.deepcopy(plain)
    compiled.compile_stack("encoder")
    tokens, langs = torch.randint(4, 50, (8, 12)), torch.zeros(8, dtype=torch.long)
    assert torch.equal(compiled(tokens, langs=langs), plain(tokens, langs=langs))  # evaluation: eager
    compiled.train(), plain.train()
    first, second = compiled(tokens, langs=langs), compiled(tokens, langs=langs)
    assert not torch.equal(first, second)


def test_compiled_bf16_stack_on_cpu_attends_by_matmuls():
    """Compiled, bf16 attention on a CPU went to torch's flash kernel, whose bf16 backward pass is 5x slower
    than two matmuls (--compile --bf16 MLM at the recipes' size: 28k against 39k tokens/s eager). Without
    dropout the eager path is plain torch operations, which the compiler traces: no flash kernel runs, and
    the compiled stack's loss and gradients are the eager stack's to bf16 rounding."""
    from xlm_fairseq.modules.transformer import XLMTransformer

    torch.manual_seed(0)
    dims = dict(n_words=50, pad_index=1, n_langs=3, dim=32, n_layers=2, n_heads=4, ffn_dim=64)
    eager = XLMTransformer(**dims, dropout=0.0, attention_dropout=0.0).to(torch.bfloat16).train()
    compiled = copy.deepcopy(eager)
    compiled.compile_stack("encoder")
    tokens, langs = torch.randint(4, 50, (8, 16)), torch.zeros(8, dtype=torch.long)

    def loss_and_grads(model):
        model.zero_grad()
        loss = model(tokens, langs=langs).float().square().mean()
        loss.backward()
        return loss, [p.grad.float() for p in model.parameters() if p.grad is not None]

    compiled_loss, compiled_grads = loss_and_grads(compiled)  # compiles
    with torch.profiler.profile() as prof:
        loss_and_grads(compiled)
    ops = {event.key for event in prof.key_averages()}
    assert any("CompiledFxGraph" in op for op in ops) and not any("flash_attention" in op for op in ops), ops
    eager_loss, eager_grads = loss_and_grads(eager)
    assert compiled_loss.item() == pytest.approx(eager_loss.item(), rel=2e-2)
    for c, e in zip(compiled_grads, eager_grads):
        assert (c - e).norm() <= 0.05 * e.norm() + 1e-3
