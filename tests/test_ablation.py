"""recipes/ablation.sh --quick: the experiment's whole pipeline on tiny budgets (real shared data,
real fairseq-train / fairseq-generate runs of ours and of fairseq's transformer)."""

import json
import subprocess

from conftest import BIN, ROOT

SHARED = ROOT.parent / "shared" / "data"


def _ablation(*args):
    import os

    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}", PYTHON=str(BIN / "python"), OMP_NUM_THREADS="2")
    return subprocess.run(
        ["bash", ROOT / "recipes" / "ablation.sh", *map(str, args)], capture_output=True, text=True, env=env, cwd=ROOT
    )


def test_ablation_quick_runs_every_kind_of_run(tmp_path):
    assert (SHARED / "en-de" / "docs.natural.en").exists(), f"the experiment needs the shared corpora at {SHARED}"
    runs = "unmt_mlm_tlm_xlm,sup_random_summed,fairseq_transformer_de-en"
    proc = _ablation("--quick", "--runs", runs, "--work-dir", tmp_path / "w", "--mt-lr", "0.0007")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    results = json.loads((tmp_path / "w" / "results.json").read_text())
    assert set(results) == set(runs.split(",")) | {"pretrain_mlm_tlm"}  # the init it needs came along
    for name in runs.split(","):
        assert results[name]["train"]["updates"] > 0, name
        directions = ["de-en"] if name.endswith("de-en") else ["de-en", "en-de"]
        assert sorted(results[name]["eval"]) == directions
        for d in directions:
            assert 0 <= results[name]["eval"][d]["bleu"] <= 100
            assert results[name]["eval"][d]["ref_logprob"] < 0
    # the pretrained LM is scored with XLM's 100 %-mask metric beside the unigram baseline
    lm = results["pretrain_mlm_tlm"]["eval"]
    for lang in ("en", "de"):
        assert lm[lang]["fullmask_ppl"] > 1 and lm[lang]["unigram_ppl"] > 1 and 0 <= lm[lang]["fullmask_acc"] <= 100
    # --mt-lr reaches every MT run (ours and the peer's), pretraining keeps its own
    for name in runs.split(","):
        assert "'lr': [0.0007]" in (tmp_path / "w" / "checkpoints" / name / "train.log").read_text(), name
    assert "'lr': [0.0005]" in (tmp_path / "w" / "checkpoints" / "pretrain_mlm_tlm" / "train.log").read_text()
    table = (tmp_path / "w" / "results.md").read_text()
    assert (
        "0.0007 MT" in table and "| pretrain_mlm_tlm |" in table and "| unigram model of the training text |" in table
    )
    assert "| unmt_mlm_tlm_xlm | mlm_tlm | xlm |" in table and "| fairseq_transformer_de-en |" in table
    # test sentences never occur in the training files (held-out documents)
    raw = tmp_path / "w" / "raw" / "en-de"
    train = set()
    for f in ("mono.en", "mono.de", "train.en-de.en", "train.en-de.de"):
        train |= set((raw / f).read_text(encoding="utf-8").splitlines())
    for lang in ("en", "de"):
        assert not set((raw / f"test.en-de.{lang}").read_text(encoding="utf-8").splitlines()) & train
    # a re-run skips what is done
    again = _ablation("--quick", "--runs", runs, "--work-dir", tmp_path / "w")
    assert again.returncode == 0 and "train " not in again.stdout


def test_ablation_unknown_run_is_one_line(tmp_path):
    proc = _ablation("--quick", "--runs", "unmt_bogus", "--work-dir", tmp_path / "w")
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip().splitlines()[-1]]
    assert "--runs" in proc.stderr and "unmt_bogus" in proc.stderr
