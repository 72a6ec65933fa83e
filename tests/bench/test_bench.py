"""bench/run.py reads fairseq's own logs and counts FLOPs with a formula: check its reader on a real
fairseq-train run of its own training flags, and its formula against torch's FLOP counter on a real
training step of our model (no timings are asserted; the benchmark itself is
`python bench/run.py --quick`)."""

import importlib.util
import json

import pytest
from conftest import ROOT, fairseq, read_optim_flags, setup_task


@pytest.fixture
def bench(monkeypatch):
    """bench/run.py as the script it is: its directory first on sys.path, for its sibling modules."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_trains_with_the_recipes_optimiser(bench):
    flags = bench.TRAIN_COMMON
    for option, value in read_optim_flags().items():
        assert flags[flags.index(option) + 1] == value, option


def test_peers_train_with_fairseqs_own_adam(bench):
    """Ours train with the recipes' --optimizer xlm_adam (the plugin's fused Adam), the peers with fairseq's
    --optimizer adam and otherwise the same flags."""
    ours = ["fairseq-train", "data-bin", *bench.TRAIN_COMMON, "--task", "masked_lm"]
    peer = bench.with_fairseqs_adam(ours)
    assert ours[ours.index("--optimizer") + 1] == "xlm_adam" and peer[peer.index("--optimizer") + 1] == "adam"
    assert [w for w in peer if w != "adam"] == [w for w in ours if w != "xlm_adam"]
    generate = ["fairseq-generate", "data-bin", "--beam", "5"]
    assert bench.with_fairseqs_adam(generate) == generate


def test_peers_run_in_their_own_number_format_when_asked(bench):
    """--precision bf16 --peer-precision fp32: ours in bf16 against the peers' fastest setting on a CPU,
    in one run. Every flag but the number format stays; by default the peers run in ours."""
    train = ["fairseq-train", "data-bin", "--cpu", "--task", "masked_lm", "--max-update", "2"]
    in_bf16 = [*train[:3], "--bf16", *train[3:]]
    assert bench.at_precision(in_bf16, "bf16", "fp32") == train
    assert bench.at_precision(in_bf16, "bf16", "bf16") == in_bf16
    assert bench.at_precision(train, "fp32", "fp16") == [train[0], "--fp16", *train[1:]]


def test_windows_count_input_tokens_of_every_objective(bench, data_bin):
    proc = fairseq(
        "train",
        data_bin,
        "--user-dir",
        ROOT / "xlm_fairseq",
        "--task",
        "cross_lingual_lm",
        "--langs",
        "de,en,ro",
        "--mlm-steps",
        "en,de",
        "--clm-steps",
        "",
        "--arch",
        "xlm_tiny",
        "--tokens-per-sample",
        "32",
        "--batch-size",
        "4",
        *bench.TRAIN_COMMON,
        "--cpu",
        "--log-interval",
        "2",
        "--max-update",
        "8",
        "--no-save",
    )
    from logs import train_windows  # bench/logs.py, on the path the fixture set

    windows = train_windows(proc.stdout + proc.stderr)
    assert len(windows) == 4
    for w in windows:
        # an update = 2 objectives x 4 full blocks of 32 input tokens: wps counts input tokens, as masked_lm
        assert w["tokens_per_update"] == 2 * 4 * 32
        assert w["tokens_per_s"] > 0 and w["sentences_per_s"] == w["tokens_per_s"] * 8 / 256


def _counted_flops(step):
    """FLOPs of ``step()`` (a forward and backward pass) by torch's counter, with the CPU flash-attention
    kernels it does not know counted as model FLOPs (the backward twice the forward)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

    aten = torch.ops.aten
    mapping = {
        aten._scaled_dot_product_flash_attention_for_cpu: lambda q, k, v, *_, **__: sdpa_flop_count(q, k, v),
        aten._scaled_dot_product_flash_attention_for_cpu_backward: (
            lambda grad, q, k, v, *_, **__: 2 * sdpa_flop_count(q, k, v)
        ),
    }
    with FlopCounterMode(display=False, custom_mapping=mapping) as counter:
        step()
    return counter.get_total_flops()


# without dropout: attention runs in torch's fused kernel (with it, in ours, which may recompute the weights
# in the backward pass: more work done, the same model FLOPs)
NO_DROPOUT = ["--dropout", "0", "--attention-dropout", "0"]


@pytest.mark.parametrize("size_name", ["recipes", "256"])
def test_the_mlm_flop_formula_counts_what_the_model_computes(bench, data_bin, size_name):
    """MFU's numerator for LM steps: the formula's training FLOPs per input token against torch's count
    of a real forward and backward pass of our MLM at the benchmark's size (matmuls and attention)."""
    size = bench.SIZES[size_name]
    shape = [*size.ours()[2:], "--tokens-per-sample", size.block, "--batch-size", size.blocks, *NO_DROPOUT]
    task, cfg = setup_task(data_bin, "cross_lingual_lm", "--langs", "de,en,ro", "--mlm-steps", "en", *shape)
    task.load_dataset("train")
    model, criterion = task.build_model(cfg.model), task.build_criterion(cfg.criterion)
    objective = task.dataset("train").datasets["mlm_en"]
    batch = objective.collater([objective[i] for i in range(size.blocks)])
    predicted = []

    def step():
        loss, n, _ = criterion(model, batch)
        loss.backward()
        predicted.append(float(n))

    flops = _counted_flops(step)
    tokens = batch["net_input"]["src_tokens"].numel()
    assert tokens == size.block * size.blocks
    size = bench.dataclasses.replace(size, vocab=len(task.dictionary))  # the fixture's vocabulary
    assert flops / tokens == pytest.approx(bench.mlm_flops_per_token(size, mask_prob=predicted[0] / tokens), rel=0.01)


def test_the_translation_flop_formula_counts_what_the_model_computes(bench, data_bin):
    """MFU's numerator for translation steps: the formula's training FLOPs per target token against
    torch's count of a real forward and backward pass of our encoder-decoder at the recipes' size, on
    sources and targets of one length (the formula's assumption)."""
    import torch

    size = bench.SIZES["recipes"]
    task, cfg = setup_task(
        data_bin, "translation_lm", "--langs", "de,en,ro", "--ae-steps", "en", *size.ours()[2:], *NO_DROPOUT
    )
    model, criterion = task.build_model(cfg.model), task.build_criterion(cfg.criterion)
    dictionary = task.source_dictionary
    batch_size, length = 12, 30
    torch.manual_seed(0)
    words = torch.randint(dictionary.nspecial, len(dictionary), (batch_size, length))
    langs = torch.full((batch_size,), task.langs.index("en"))
    batch = {
        "net_input": {
            "src_tokens": words,
            "src_lengths": torch.full((batch_size,), length),
            "src_langs": langs,
            "tgt_langs": langs,
            "prev_output_tokens": words,
        },
        "target": words,
        "nsentences": batch_size,
        "ntokens": words.numel(),
    }

    def step():
        loss, _, _ = criterion(model, batch)
        loss.backward()

    flops = _counted_flops(step)
    size = bench.dataclasses.replace(size, vocab=len(dictionary))
    expected = bench.translation_flops_per_target_token(size, length)
    assert flops / words.numel() == pytest.approx(expected, rel=0.01)


def test_the_table_puts_compiled_runs_under_their_eager_rows(bench):
    """A --compile run (the GPU benchmark's default) adds its rows under the eager ones, with the graphs
    and the seconds of compiling its log gave; a run without it has none."""
    result = json.loads((ROOT / "bench" / "results" / "latest.json").read_text())
    size = result["sizes"]["recipes"]
    assert "--compile" not in bench.table(size, result["matmul_gflops"])
    figures = size["figures"]
    figures["ours_mlm_compiled"] = dict(figures["ours_mlm"], compiled_graphs=2, compile_s=31.5)
    figures["ours_unmt_compiled"] = dict(figures["ours_unmt"], compiled_graphs=5, compile_s=60.25)
    text = bench.table(size, result["matmul_gflops"])
    labels = [line.split(" | ")[0].lstrip("| ") for line in text.splitlines()[2:]]
    assert labels[labels.index("pretraining MLM, tokens/s") + 1] == "pretraining MLM, --compile, tokens/s"
    assert labels[labels.index("UNMT AE+BT, sentences/s") + 1] == "UNMT AE+BT, --compile, sentences/s"
    assert text.splitlines()[2 + labels.index("UNMT AE+BT, --compile, sentences/s")].endswith(
        "| online_backtranslation; 5 graphs, 60.2 s compiling |"
    )


def test_a_result_is_a_record_of_the_docs_tables(tmp_path, monkeypatch):
    """What a benchmark writes carries the date, machine, commit and command a table's record needs."""
    from bench import report
    from recipes.experiments import tables

    monkeypatch.setattr("sys.argv", [str(ROOT / "bench" / "serving.py"), "--sizes", "recipes"])
    out = tmp_path / "results" / "x.json"
    report.finish(out, {"versions": report.versions(), "figure": 1.5}, 0.0, {})
    (record,) = tables.load_records("results/x.json", tmp_path)
    assert record["command"] == "python bench/serving.py --sizes recipes"
    assert record["commit"] == record["versions"]["commit"] and record["machine"].endswith(" cores")


def test_the_gpu_check_passes_shellcheck_and_refuses_without_a_gpu(tmp_path):
    """bench/gpu_check.sh, run where a GPU is lent: shellcheck-clean; where torch sees no GPU (here, or with
    CUDA_VISIBLE_DEVICES empty) one error line, exit 2, no record written."""
    import os
    import shutil
    import subprocess
    import sys

    script = ROOT / "bench" / "gpu_check.sh"
    shellcheck = shutil.which("shellcheck") or shutil.which("shellcheck", path=os.path.dirname(sys.executable))
    lint = subprocess.run([shellcheck, "-x", "--severity=style", script], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")
    out = tmp_path / "records"
    proc = subprocess.run(["bash", script, out], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.splitlines() == ["gpu_check: error: torch sees no GPU here"]
    assert not out.exists()
