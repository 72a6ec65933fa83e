"""The README's main job, reduced (--tiny): recipes/train.sh on the bundled en-de sample, preprocess -> pretrain ->
translation -> generate -> BLEU beside copying the source -> export, end to end, after a kill; --test and
--unsupervised (the engine's own tests: test_train_recipe.py)."""

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT


def _run(args, **kw):
    return subprocess.run(
        ["bash", ROOT / "recipes" / "quickstart.sh", *args], capture_output=True, text=True, env=_env(), cwd=ROOT, **kw
    )


def _env():
    return dict(
        os.environ,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        PYTHON=sys.executable,
        XLM_FAIRSEQ_PROGRESS_SECONDS="3",  # a progress line every 3 s instead of every minute
    )


def _kill_during_pretraining(work):
    """Start the tiny quickstart and SIGKILL it, fairseq-train included, a few seconds into stage 2."""
    proc = subprocess.Popen(
        ["bash", ROOT / "recipes" / "quickstart.sh", "--tiny", "--work-dir", str(work)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=_env(),
        cwd=ROOT,
        start_new_session=True,
    )
    for line in proc.stdout:
        if "2/4 MLM+TLM pretraining" in line:
            time.sleep(3)
            break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.stdout.close()
    proc.wait()


def _checksums(directory):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.mark.slow  # a whole recipe run, minutes
def test_quickstart_tiny_end_to_end(tmp_path):
    """Killed in stage 2, then run again with --test: stage 1 is kept (its data-bin byte for byte),
    stage 2 runs again and the rest follows; BLEU beside the copy baseline for both test sets; the
    exported model translates from Python; a third run only scores."""
    work = tmp_path / "qs"
    _kill_during_pretraining(work)
    assert (work / ".stages" / "preprocess.done").exists() and not (work / ".stages" / "pretrain.done").exists()
    data_bin = _checksums(work / "data-bin")
    sample = ROOT / "recipes" / "data" / "en-de"  # other documents than the quickstart's sample
    for lang in ("de", "en"):
        (tmp_path / f"mine.{lang}").write_text(
            "".join((sample / f"test.en-de.{lang}").read_text().splitlines(True)[:40])
        )
    proc = _run(["--tiny", "--work-dir", str(work), "--test", str(tmp_path / "mine")])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "1/4 preprocess: done before" in proc.stdout and proc.stdout.count("done before") == 1
    assert _checksums(work / "data-bin") == data_bin
    # the sweep's pretraining (64-token streams, no dropout); translation keeps dropout 0.1
    pretrain_log = (work / "logs" / "pretrain.log").read_text()
    assert "'tokens_per_sample': 64," in pretrain_log
    assert "'dropout': 0.0, 'attention_dropout': 0.0," in pretrain_log
    assert "'dropout': 0.1, 'attention_dropout': 0.1," in (work / "logs" / "translate.log").read_text()
    # --precision auto: pretraining in bf16 where the CPU multiplies it in hardware, as the banner says;
    # translation in fp32 either way
    from xlm_fairseq.hardware import cpu_multiplies_bf16

    bf16 = cpu_multiplies_bf16()
    assert f"'bf16': {bf16}," in pretrain_log and "'bf16': False," in (work / "logs" / "translate.log").read_text()
    assert f"64 dims x 2 layers, {'bf16' if bf16 else 'fp32'}, " in proc.stdout
    assert "translation_lm initialised from the LM, fp32, " in proc.stdout
    assert "3/4 semi-supervised MT (MT on 1000 pairs + AE + back-translation" in proc.stdout  # says which ran
    # never silent while a stage trains: the update and the budget left (recipes/train/progress.py)
    assert re.search(r"^   \d+ min: update \d+, \d+ of \d+ min left; ", proc.stdout, re.M), proc.stdout[-3000:]
    # ... and which of those trained (recipes/train/trained.py reads the stage's log)
    assert re.search(r"^   trained to update \d+: MT de-en en-de, AE ", proc.stdout, re.M), proc.stdout[-3000:]
    # ... and which checkpoint is scored and exported: the best validation BLEU of both directions
    scored = re.search(
        r"^   scored: checkpoint_best.pt, update (\d+) of (\d+), valid bleu_tok_mean [0-9.]+$", proc.stdout, re.M
    )
    assert scored and int(scored[1]) <= int(scored[2]), proc.stdout[-3000:]
    assert "copy source" in proc.stdout and "recipes/ablation.sh" in proc.stdout
    for test_set, lines in (("test", 100), ("yours", 40)):
        for direction in ("de-en", "en-de"):
            row = [r.split() for r in proc.stdout.splitlines() if r.startswith(f"{test_set} ") and direction in r]
            assert row and len(row[0]) == 7, proc.stdout[-1500:]  # BLEU, copy, gain, chrF, copy
            bleu, copy = (
                float((work / "out" / test_set / f"{k}.{direction}.txt").read_text()) for k in ("bleu", "copy")
            )
            assert row[0][2:5] == [f"{bleu}", f"{copy}", f"{bleu - copy:+.1f}"]
            hyps = (work / "out" / test_set / f"hyp.{direction}.txt").read_text(encoding="utf-8").splitlines()
            assert len(hyps) == lines
    # the exported model's card: what it translates, how it trained, its scores, the sample's licence
    card = (work / "model" / "README.md").read_text(encoding="utf-8")
    report = json.loads((work / "report.json").read_text())
    for r in report["bleu"]:
        row = f"| {r['set']} | {r['direction']} | {r['lines']} | {r['bleu']:.2f} | {r['copy']:.2f} | {r['chrf']:.2f} |"
        assert row in card, card
    assert "pipeline_tag: translation" in card and "de→en" in card and "en→de" in card and "MPL-2.0" in card
    assert f"sacreBLEU signatures: BLEU `{report['bleu'][0]['signature']['bleu']}`" in card
    assert f"figure:      {work}/figures/quickstart.png" in proc.stdout
    assert (work / "figures" / "quickstart.png").stat().st_size > 1000
    # the exported model translates without the data-bin, as the report says
    line = next(r for r in proc.stdout.splitlines() if "XLMModel.from_pretrained" in r)
    assert f'from_pretrained("{work}/model")' in line
    model = work / "model"
    hub = f'XLMModel.from_pretrained("{model}")'
    code = f'from xlm_fairseq import XLMModel; print(repr({hub}.translate("Klicken Sie", src="de", tgt="en")))'
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.startswith("'"), out.stderr[-2000:]
    # a re-run skips the finished stages and scores again
    again = _run(["--tiny", "--work-dir", str(work)])
    assert again.returncode == 0 and again.stdout.count("done before") == 3
    assert not any(r.startswith("yours ") for r in again.stdout.splitlines())


@pytest.mark.slow  # a whole recipe run, minutes
def test_quickstart_unsupervised_is_its_own_run(tmp_path):
    """--unsupervised --lexicon none sees no pair: MLM only on unpaired text, no MT step, and it says so; a
    work dir of another kind (the default --unsupervised, which starts the LM's piece embeddings from an induced
    lexicon; semi-supervised) is refused at stage 1 and, once its marker is gone, redone with the stale
    checkpoints set aside."""
    work = tmp_path / "qs"
    proc = _run(["--tiny", "--unsupervised", "--lexicon", "none", "--work-dir", str(work), "--precision", "bf16"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2/4 MLM pretraining: cross_lingual_lm, --mlm-steps de,en," in proc.stdout
    # both stages in the number format asked for: back-translation gains from bf16, unlike MT
    assert "translation_lm initialised from the LM, bf16, " in proc.stdout
    assert re.search(r"unpaired: \d+ de lines, \d+ en lines", proc.stdout), proc.stdout[-3000:]
    assert "3/4 unsupervised MT (AE + back-translation on monolingual text only)" in proc.stdout
    trained = [line for line in proc.stdout.splitlines() if line.startswith("   trained to update")]
    assert trained and all("MT" not in line and "AE de en" in line for line in trained), proc.stdout[-3000:]
    assert not list((work / "data-bin").glob("train.*-*")), "a training pair was binarised"
    pretrain = (work / "logs" / "pretrain.log").read_text()
    assert "'mlm_steps': 'de,en'" in pretrain and "tlm_" not in pretrain
    log = (work / "logs" / "translate.log").read_text()
    assert "'mt_steps': ''" in log and "'bt_steps': 'en-de-en,de-en-de'" in log
    assert "'bf16': True," in pretrain and "'bf16': True," in log
    # the averaging experiment on it: each kept checkpoint's test BLEU (one kept here, so no mean of two)
    record = tmp_path / "averaging.jsonl"
    cmd = [sys.executable, "-m", "recipes.experiments.averaging", work, "--out", record, "--last", "2"]
    averaging = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, cwd=ROOT)
    assert averaging.returncode == 0, averaging.stderr[-3000:]
    *_, row = [json.loads(line) for line in record.read_text().splitlines()]
    report = json.loads((work / "report.json").read_text())
    scored = {r["direction"]: r["bleu"] for r in report["bleu"] if r["set"] == "test"}
    update, last = map(int, re.search(r"scored: checkpoint_best.pt, update (\d+) of (\d+)", proc.stdout).groups())
    assert row["update"] == last and "mean_of_last_two" not in row and row["name"] == "qs"
    assert set(row["weights"]) == set(scored) == {"en-de", "de-en"}
    if update == last:  # the run scored the last checkpoint: the same figures, generated the same way
        assert row["weights"] == scored
    lexicon = _run(["--tiny", "--unsupervised", "--work-dir", str(work), "--precision", "bf16"])
    assert lexicon.returncode == 2 and "stage preprocess was completed with other options" in lexicon.stderr
    assert "piece embeddings from the word vectors of a lexicon induced from the unpaired text" in lexicon.stdout
    semi = _run(["--tiny", "--work-dir", str(work)])
    assert semi.returncode == 2 and "stage preprocess was completed with other options" in semi.stderr
    # redone by deleting its marker: the unsupervised checkpoints are set aside, not resumed from
    (work / ".stages" / "preprocess.done").unlink()
    semi = _run(["--tiny", "--work-dir", str(work)])
    assert semi.returncode == 0, semi.stderr[-3000:]
    for stage in ("pretrain", "translate"):
        assert f"stage {stage}'s checkpoints were made from an earlier result of stage preprocess" in semi.stderr
    assert (work / "data-bin" / "train.de-en.de.bin").is_file()
    out = (work / "logs" / "translate.out").read_text()  # this run's fairseq-train output
    assert "No existing checkpoint found" in out and "'mt_steps': 'en-de,de-en'" in out, out[-2000:]
    (stale,) = (work / "checkpoints").glob("translate.stale-*")
    assert (stale / "checkpoint_last.pt").is_file()


def test_quickstart_refuses_without_install(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(
        ["bash", ROOT / "recipes" / "quickstart.sh", "--tiny", "--work-dir", str(tmp_path / "q")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode != 0
    assert "scripts/setup.sh" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "q").exists()


def test_quickstart_rejects_unknown_option(tmp_path):
    proc = _run(["--bogus"])
    assert proc.returncode == 2 and "unknown option '--bogus'" in proc.stderr
    proc = _run(["--tiny", "--work-dir", str(tmp_path / "q"), "--precision", "fp16"])
    assert proc.returncode == 2 and proc.stderr.strip() == "quickstart: error: --precision needs auto, fp32 or bf16"
    (tmp_path / "t.de").write_text("a\nb\n")
    (tmp_path / "t.en").write_text("a\n")
    for prefix, message in ((tmp_path / "none", "none.en: no such file"), (tmp_path / "t", "not line-aligned")):
        proc = _run(["--tiny", "--work-dir", str(tmp_path / "q"), "--test", str(prefix)])
        assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "q").exists()
