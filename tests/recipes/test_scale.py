"""recipes/scale.sh --quick: the sweep's pipeline on tiny budgets (real shared data, real fairseq-train
runs): speed calibration, pretraining scored at every budget (XLM's perplexity beside the unigram
model, the probe beside random init), translation from a chosen LM, the report."""

import json

import pytest
import sacrebleu
from conftest import SHARED, run_recipe


def _scale(*args):
    return run_recipe("scale.sh", *args)


@pytest.mark.slow  # a whole recipe run, minutes
def test_scale_quick_pretrains_scores_and_translates(tmp_path):
    assert (SHARED / "en-de" / "docs.natural.en").exists(), f"the sweep needs the shared corpora at {SHARED}"
    work = tmp_path / "w"
    # one LM run and one translation run: each kind of run once (CI time; the sweep's other runs differ in settings)
    runs = ["--runs", "stream64_dropout0,sup", "--lm", "stream64_dropout0@0.4"]
    proc = _scale("--quick", *runs, "--work-dir", work)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    results = json.loads((work / "results.json").read_text())
    assert set(results["speed"]) == {"stream64_dropout0"} and results["speed"]["stream64_dropout0"] > 0
    entry = results["pretrain"]["stream64_dropout0"]
    assert sorted(entry["budgets"]) == ["0.2", "0.4"]
    for point in entry["budgets"].values():
        assert point["updates"] > 0 and 0 < point["params"]["non_embedding"] < point["params"]["total"]
        for lang in ("en", "de"):
            assert point["lm"][lang]["fullmask_ppl"] > 1 and point["lm"][lang]["unigram_ppl"] > 1
        probe = point["probe"]["embeddings"]  # a word's best translation is among its 5 best
        assert probe["nn_p@1"] <= probe["nn_p@5"] and probe["csls_p@1"] <= probe["csls_p@5"]
    assert entry["probe_random"]["contextual"]["csls_p@1"] <= entry["probe_random"]["contextual"]["csls_p@5"]
    # the budget is counted in updates from the calibrated speed, and the 0.4-min point continues the 0.2 one
    points = entry["budgets"]
    assert (
        points["0.2"]["updates"]
        < points["0.4"]["updates"]
        <= round(results["speed"]["stream64_dropout0"] * 60 * 0.4) + 1
    )
    sup = results["translate"]["sup"]
    assert sup["config"]["init"] == "stream64_dropout0@0.4"
    translate_log = (work / "translate" / "sup" / "train.log").read_text()
    assert "'pretrained_xlm_checkpoint'" in translate_log
    # the LM ran without dropout, its translation with 0.1
    assert (
        "'dropout': 0.0, 'attention_dropout': 0.0,"
        in (work / "pretrain" / "stream64_dropout0" / "train.log").read_text()
    )
    assert "'dropout': 0.1, 'attention_dropout': 0.1," in translate_log
    raw = work / "raw" / "en-de"
    for budget, point in sup["budgets"].items():
        for d in ("de-en", "en-de"):  # BLEU as recomputed from the budget's generation and the raw reference
            gen = (work / "translate" / "sup" / f"eval_{budget}" / f"gen.{d}.txt").read_text(encoding="utf-8")
            hyps = {int(x.split("\t")[0][2:]): x.split("\t")[2] for x in gen.splitlines() if x.startswith("D-")}
            refs = (raw / f"test.en-de.{d[3:]}").read_text(encoding="utf-8").splitlines()
            bleu = sacrebleu.corpus_bleu([hyps[i] for i in range(len(refs))], [refs]).score
            assert point[d]["bleu"] == round(bleu, 2) and point[d]["ref_logprob"] < 0
    table = (work / "results.md").read_text()
    assert (work / "figures" / "scale.png").stat().st_size > 1000  # perplexity and probe against CPU-minutes
    assert (
        "| stream64_dropout0 | stream 64, dropout 0.0 |" in table and "| sup | stream64_dropout0@0.4 | sup |" in table
    )
    assert "copying the source scores" in table
    # a re-run skips what is done; a bad --lm is one line
    again = _scale("--quick", *runs, "--work-dir", work)
    assert again.returncode == 0 and "pretrain stream64_dropout0: to" not in again.stderr + again.stdout
    bad = _scale("--quick", "--lm", "nope@5", "--work-dir", work)
    assert bad.returncode == 2 and "--lm: expected RUN@MINUTES" in bad.stderr
