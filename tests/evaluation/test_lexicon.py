"""The alignment probe (xlm_fairseq.evaluation.lexicon): MUSE's retrieval on constructed vectors, the command on a
real pretrained checkpoint with the real German-English dictionary of ../shared/data, an alignment
planted into a checkpoint found again, and bad input."""

import json
import sys

import pytest
import torch
from conftest import ROOT, refusals, run

from preprocess.lexicon import csls_scores, retrieval_precision
from xlm_fairseq.evaluation.lexicon import main as probe_main

BLI = ROOT.parent / "shared" / "data" / "bli" / "de-en.dev.txt"


def _is_share(percent, n):
    """``percent`` is a share of n words as the probe rounds it (k of n, 2 decimals)."""
    return any(round(100.0 * k / n, 2) == percent for k in range(n + 1))


def _probe(*args, ok=True):
    return run([sys.executable, "-m", "xlm_fairseq.evaluation.lexicon", *args], ok=ok)


def test_nn_and_csls_on_constructed_vectors():
    """Three source words, their three translations and a hub close to every word: NN retrieves the
    hub for the word nearest to it, CSLS (which discounts targets near everything) its translation;
    a source word's own spelling among the targets is never retrieved."""
    tgt_words = ["one", "two", "three", "hub", "gift"]
    tgt = torch.tensor([[1.0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0.5, 0.5, 0.7, 0.1], [0, 0, 0, 1]])
    src_words = ["eins", "zwei", "drei", "gift"]
    src = torch.tensor([[1.0, 0.05, 0, 0], [0.05, 1, 0, 0], [0.3, 0.3, 0.9, 0], [0, 0.1, 0, 1]])
    gold = [["one"], ["two"], ["three"], ["poison"]]
    result = retrieval_precision(src, src_words, src, tgt, tgt_words, gold)
    assert result["nn_p@1"] == 50.0  # drei -> hub; gift -> (not itself) hub
    assert result["csls_p@1"] == 75.0  # drei -> three
    assert result["nn_p@5"] == result["csls_p@5"] == 75.0  # poison is no candidate
    scores = csls_scores(src @ tgt.T, src @ tgt.T, tgt @ src.T, k=2)
    assert scores.shape == (4, 5)


@pytest.fixture(scope="module")
def probe_json(pretrained, data_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("lexicon") / "probe.json"
    proc = _probe(pretrained, "--dict", BLI, "--data", data_bin, "--json", out)
    return json.loads(out.read_text()), proc.stdout


def test_probe_of_a_pretrained_model(probe_json):
    result, stdout = probe_json
    assert "lexicon induction de->en" in stdout and "CSLS P@1" in stdout
    assert result["words_from"] == "training text" and result["pairs"] == 2669 and result["source_words"] == 1087
    assert 100 < result["evaluated_source_words"] <= 1087
    n = result["evaluated_source_words"]
    for kind in ("embeddings", "contextual"):
        r = result[kind]
        for method in ("nn", "csls"):
            assert r[f"{method}_p@1"] <= r[f"{method}_p@5"]
            assert _is_share(r[f"{method}_p@1"], n) and _is_share(r[f"{method}_p@5"], n), (kind, method, r)
        assert -1 <= r["cos_random"] <= 1 and -1 <= r["cos_pairs"] <= 1
    # the band of frequent words: a subset of the queries, among the 1,000 most frequent candidates
    band = result["frequent"]
    assert band["words"] == 1000 and band["target_candidates"] <= 1000
    assert 0 < band["evaluated_source_words"] < result["evaluated_source_words"]
    p1, p5 = band["contextual"]["csls_p@1"], band["contextual"]["csls_p@5"]
    assert p1 <= p5 and _is_share(p1, band["evaluated_source_words"]) and _is_share(p5, band["evaluated_source_words"])
    assert "among the 1000 most frequent words of each language" in stdout


@pytest.mark.slow
def test_the_data_bin_a_checkpoint_names_is_the_default(pretrained, probe_json):
    """Without --data the probe reads the data-bin the checkpoint was trained on."""
    proc = _probe(pretrained, "--dict", BLI)
    assert proc.stdout.splitlines()[-2:] == probe_json[1].splitlines()[-2:]


def test_planted_alignment_is_found(pretrained, data_bin, tmp_path):
    """German words given exactly their English translation's input embedding are retrieved with
    precision@1 near 100 from the embeddings; the same words at random initialisation are not."""
    from fairseq.data import Dictionary

    from preprocess.pipeline import load_pipeline
    from xlm_fairseq import checkpoints

    dictionary = Dictionary.load(str(data_bin / "dict.txt"))
    pipeline = load_pipeline([str(data_bin)])
    whole = {}  # German words that are one vocabulary piece in a single casing
    for symbol in dictionary.symbols:
        if symbol.startswith("\u2581") and symbol[1:].isalpha():
            whole.setdefault(symbol[1:].lower(), []).append(symbol)
    planted = {}
    for line in BLI.read_text(encoding="utf-8").splitlines():
        de, en = line.split()
        if de not in planted and len(whole.get(de, [])) == 1:
            planted[de] = en
    assert len(planted) >= 6, planted  # (a 2,000-piece vocabulary has few whole German words)
    state = checkpoints.load(str(pretrained))
    table = state["model"]["encoder.transformer.embeddings.weight"]
    for de, en in planted.items():  # the German piece := the mean of the English word's pieces
        table[dictionary.index(whole[de][0])] = table[[dictionary.index(p) for p in pipeline.split(en)]].mean(0)
    checkpoint = tmp_path / "planted.pt"
    torch.save(state, checkpoint)
    small = tmp_path / "de-en.txt"
    small.write_text("".join(f"{de} {en}\n" for de, en in planted.items()), encoding="utf-8")
    results = {}
    for name, extra in (("planted", []), ("random", ["--random-init"])):  # the command, then its main in process
        out = tmp_path / f"{name}.json"
        args = [checkpoint, "--dict", small, "--data", data_bin, "--json", out, *extra]
        if name == "planted":
            _probe(*args)
        else:
            assert probe_main([str(a) for a in args]) == 0
        results[name] = json.loads(out.read_text())
    planted_p1 = results["planted"]["embeddings"]["nn_p@1"]
    assert planted_p1 >= 80, results["planted"]  # (an English word whose usual casing is capitalised is missed)
    assert results["planted"]["embeddings"]["cos_pairs"] > 0.8
    assert results["random"]["embeddings"]["nn_p@1"] < 50, results["random"]


@pytest.mark.slow  # five refusals of the probe (the first through the command, the others its main in process)
def test_bad_input_is_one_line(pretrained, data_bin, tmp_path, unmt, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_text("haus house\nein zwei drei\n", encoding="utf-8")
    cases = [
        ((pretrained, "--dict", bad, "--data", data_bin), f"{bad}:2: expected 'source target'"),
        ((pretrained, "--dict", tmp_path / "missing.txt"), "missing.txt: no such file (--dict)"),
        ((pretrained, "--dict", BLI, "--src", "fr", "--data", data_bin), "language 'fr' is not one of the model's"),
        ((pretrained, "--dict", BLI, "--frequent", "-1"), "--frequent: expected a number of words >= 0, got -1"),
        ((unmt[0] / "checkpoint_last.pt", "--dict", BLI, "--data", data_bin), "not a pretrained LM"),
    ]
    refused = refusals([args for args, _ in cases], lambda argv: _probe(*argv, ok=False), probe_main, capsys)
    for (_, message), (status, err) in zip(cases, refused):
        assert status == 2, err[-2000:]
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("lexicon: error: ") and message in lines[0], err
