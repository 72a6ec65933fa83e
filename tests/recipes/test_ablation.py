"""recipes/ablation.sh --quick: the experiment's whole pipeline on tiny budgets (real shared data,
real fairseq-train / fairseq-generate runs of ours and of fairseq's transformer)."""

import json

import pytest
import sacrebleu
from conftest import ROOT, SHARED, head, run_recipe

from preprocess.text import detokenize


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def _bleu(gen, reference, lang=None):
    """sacreBLEU of fairseq-generate's D- lines (or, for fairseq's own task, its H- lines detokenised)
    against the raw reference, recomputed here from the files the run left."""
    kind = "H-" if lang else "D-"
    hyps = {int(x.split("\t")[0][2:]): x.split("\t")[2] for x in _lines(gen) if x.startswith(kind)}
    hyps = [detokenize(hyps[i], lang) if lang else hyps[i] for i in range(len(hyps))]
    return round(sacrebleu.corpus_bleu(hyps, [_lines(reference)]).score, 2)


def _bleu_of(src, reference):
    return round(sacrebleu.corpus_bleu(_lines(src), [_lines(reference)]).score, 2)


def _ablation(*args):
    return run_recipe("ablation.sh", *args)


@pytest.mark.slow  # a whole recipe run, minutes
def test_ablation_quick_runs_every_kind_of_run(tmp_path):
    assert (SHARED / "en-de" / "docs.natural.en").exists(), f"the experiment needs the shared corpora at {SHARED}"
    runs = "unmt_mlm_tlm,sup_random_summed,fairseq_transformer_de-en"
    # half of --quick's 2.4-minute budget: the pipeline is what is tested here
    proc = _ablation("--quick", "--budget", "1.2m", "--runs", runs, "--work-dir", tmp_path / "w", "--mt-lr", "0.0007")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    results = json.loads((tmp_path / "w" / "results.json").read_text())
    kept = {"copy_bleu", "test_lines", "test_key"}
    assert set(results) == set(runs.split(",")) | {"pretrain_mlm_tlm"} | kept  # its LM came along
    raw = tmp_path / "w" / "raw" / "en-de"
    assert results["test_lines"] == 60 == len(_lines(raw / "test.en-de.de"))
    # the copy-the-source floor: the source sentences scored as translations of the raw reference
    assert results["copy_bleu"]["de-en"] == _bleu_of(raw / "test.en-de.de", raw / "test.en-de.en") > 0
    for name in runs.split(","):
        assert results[name]["train"]["updates"] > 0, name
        directions = ["de-en"] if name.endswith("de-en") else ["de-en", "en-de"]
        assert sorted(results[name]["eval"]) == directions
        for d in directions:  # BLEU as recomputed from the run's own generation and the raw reference
            src, tgt = d.split("-")
            gen = tmp_path / "w" / "checkpoints" / name / f"gen.{src}-{tgt}.txt"
            peer = name.startswith("fairseq_")
            assert results[name]["eval"][d]["bleu"] == _bleu(gen, raw / f"test.en-de.{tgt}", tgt if peer else None)
            assert results[name]["eval"][d]["ref_logprob"] < 0
    # the pretrained LM: XLM's 100 %-mask metric beside the unigram baseline, the probe beside random init
    lm = results["pretrain_mlm_tlm"]["eval"]
    for lang in ("en", "de"):
        assert lm["lm"][lang]["fullmask_ppl"] > 1 and lm["lm"][lang]["unigram_ppl"] > 1
    for probe in ("probe", "probe_random"):
        for kind in ("embeddings", "contextual"):  # a word's best translation is among its 5 best
            assert lm[probe][kind]["nn_p@1"] <= lm[probe][kind]["nn_p@5"], (probe, kind)
        assert lm[probe]["frequent"]["words"] == 1000  # the band of frequent words is recorded too
    # --mt-lr reaches every MT run (ours and the peer's), pretraining keeps its own
    for name in runs.split(","):
        assert "'lr': [0.0007]" in (tmp_path / "w" / "checkpoints" / name / "train.log").read_text(), name
    pretrain_log = (tmp_path / "w" / "checkpoints" / "pretrain_mlm_tlm" / "train.log").read_text()
    assert "'lr': [0.001]" in pretrain_log
    # the sweep's pretraining: no dropout (MT keeps 0.1)
    assert "'dropout': 0.0," in pretrain_log and "'attention_dropout': 0.0," in pretrain_log
    assert "'dropout': 0.1," in (tmp_path / "w" / "checkpoints" / "unmt_mlm_tlm" / "train.log").read_text()
    table = (tmp_path / "w" / "results.md").read_text()
    assert (tmp_path / "w" / "figures" / "ablation.png").stat().st_size > 1000  # BLEU per run beside copying
    assert "0.0007 MT" in table and "| pretrain_mlm_tlm |" in table and "| copy the source |" in table
    assert "| unmt_mlm_tlm | mlm_tlm | xlm |" in table and "| fairseq_transformer_de-en |" in table
    assert "| sup_random_summed | random | summed |" in table
    # test sentences never occur in the training files (held-out documents)
    train = set()
    for f in ("mono.en", "mono.de", "train.en-de.en", "train.en-de.de"):
        train |= set((raw / f).read_text(encoding="utf-8").splitlines())
    for lang in ("en", "de"):
        assert not set((raw / f"test.en-de.{lang}").read_text(encoding="utf-8").splitlines()) & train
    # a re-run skips what is done
    again = _ablation("--quick", "--runs", runs, "--work-dir", tmp_path / "w")
    assert again.returncode == 0 and "train " not in again.stdout
    # --test PREFIX: your own held-out text, scored by the same models (nothing retrained); the table holds
    # the runs scored on it, not the others scored on the drawn test
    mine = tmp_path / "mine"
    for lang in ("de", "en"):
        head(ROOT / "recipes" / "data" / "en-de" / f"test.en-de.{lang}", f"{mine}.{lang}", 25)
    other = _ablation("--quick", "--runs", "sup_random_summed", "--work-dir", tmp_path / "w", "--test", mine)
    assert other.returncode == 0, other.stdout[-2000:] + other.stderr[-3000:]
    assert "train " not in other.stdout
    results = json.loads((tmp_path / "w" / "results.json").read_text())
    assert results["test_lines"] == 25 and set(results) == {"sup_random_summed"} | kept
    table = (tmp_path / "w" / "results.md").read_text()
    assert f"test: {mine}.{{de,en}}" in table and "| unmt_mlm_tlm |" not in table
    gen = (tmp_path / "w" / "checkpoints" / "sup_random_summed" / "gen.de-en.txt").read_text()
    assert sum(line.startswith("D-") for line in gen.splitlines()) == 25


@pytest.mark.parametrize(
    "args,message",
    [
        (["--runs", "unmt_bogus"], "--runs: unknown run 'unmt_bogus'"),
        (["--budget", "lots"], "--budget: expected a duration like 4h"),
        (["--test", "/nonexistent/prefix"], "--test: /nonexistent/prefix.de not found"),
    ],
)
def test_ablation_bad_options_are_one_line(tmp_path, args, message):
    proc = _ablation("--quick", *args, "--work-dir", tmp_path / "w")
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
