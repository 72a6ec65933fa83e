"""bench/run.py reads fairseq's own logs: check its reader on a real fairseq-train run (no timings
are asserted; the benchmark itself is `python bench/run.py --quick`)."""

import importlib.util

import pytest
from conftest import ROOT, fairseq


def _bench():
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_windows_count_input_tokens_of_every_objective(data_bin):
    bench = _bench()
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
        "--optimizer",
        "adam",
        "--lr",
        "1e-4",
        "--cpu",
        "--num-workers",
        "0",
        "--log-format",
        "json",
        "--log-interval",
        "2",
        "--max-update",
        "8",
        "--disable-validation",
        "--no-save",
    )
    windows = bench.train_windows(proc.stdout + proc.stderr)
    assert len(windows) == 4
    for w in windows:
        # an update = 2 objectives x 4 full blocks of 32 input tokens: wps counts input tokens, as masked_lm
        assert w["tokens_per_update"] == 2 * 4 * 32
        assert w["tokens_per_s"] > 0 and w["sentences_per_s"] == w["tokens_per_s"] * 8 / 256


def test_flop_count_is_the_matmuls():
    bench = _bench()
    d, f, t, v, layers = bench.DIM, bench.FFN, bench.BLOCK, bench.VOCAB, bench.LAYERS
    forward_macs = layers * (4 * d * d + 2 * d * f + 2 * t * d) + 0.15 * v * d
    assert bench.mlm_flops_per_token() == pytest.approx(3 * 2 * forward_macs)
    assert bench.mlm_flops_per_token(extra_head_dim=d) - bench.mlm_flops_per_token() == pytest.approx(
        3 * 2 * 0.15 * d * d
    )
