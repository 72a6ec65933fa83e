"""A new language into a trained LM (``xlm-fairseq-convert LM OUT --add-lang LANG --text FILE``): every old id
and row unchanged, the old languages' text segmenting as before where it is given, new rows as documented, one
line for bad input; then ``recipes/train.sh --lm OUT`` continues pretraining over the old languages and the new
one and trains translation from it (slow)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sentencepiece as spm
import torch
from conftest import BIN, PRETRAIN_ARGS, ROOT, SAMPLE, fairseq, head, in_process, run

from preprocess.pipeline import load_pipeline
from xlm_fairseq.assets import PretrainedCheckpoint

CONVERT = [str(BIN / "xlm-fairseq-convert")]
LM = "encoder.transformer."


@pytest.fixture(scope="module")
def de_en_lm(tmp_path_factory):
    """A tiny MLM LM over de,en (a real fairseq-train run on the shipped sample) and its raw text."""
    tmp = tmp_path_factory.mktemp("de_en")
    raw = tmp / "raw"
    raw.mkdir()
    args = ["--langs", "de,en", "--vocab-size", "800", "--workers", "2", "--quiet"]
    for lang in ("de", "en"):
        head(SAMPLE / "en-de" / f"mono.{lang}", raw / f"train.{lang}", 1500)
        head(SAMPLE / "en-de" / f"valid.en-de.{lang}", raw / f"valid.{lang}", 100)
        args += ["--mono", f"train:{lang}={raw}/train.{lang}", "--mono", f"valid:{lang}={raw}/valid.{lang}"]
    run([sys.executable, "-m", "preprocess.prepare", tmp / "bin", *args])
    fairseq(
        "train",
        tmp / "bin",
        *PRETRAIN_ARGS,
        "--langs",
        "de,en",
        "--mlm-steps",
        "de,en",
        "--max-update",
        "20",
        "--save-dir",
        tmp / "ckpt",
    )
    head(SAMPLE / "en-ro" / "mono.ro", raw / "ro.txt", 1500)
    return tmp / "ckpt" / "checkpoint_last.pt", raw


def _convert(*args):
    return subprocess.run([*CONVERT, *map(str, args)], capture_output=True, text=True, cwd=ROOT, timeout=600)


@pytest.fixture(scope="module")
def with_ro(de_en_lm, tmp_path_factory):
    ckpt, raw = de_en_lm
    out = tmp_path_factory.mktemp("with_ro") / "lm"
    keep = [x for lang in ("de", "en") for x in ("--keep-text", f"{lang}={raw}/train.{lang}")]
    proc = _convert(ckpt, out, "--add-lang", "ro", "--text", raw / "ro.txt", *keep, "--pieces", "600")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def test_old_ids_rows_and_segmentation_are_kept(de_en_lm, with_ro):
    ckpt, raw = de_en_lm
    old, new = PretrainedCheckpoint(str(ckpt)), PretrainedCheckpoint(str(with_ro / "model.pt"))
    old_dict, new_dict = old.dictionary()[0], new.dictionary()[0]
    n = len(old_dict)
    assert new_dict.symbols[:n] == old_dict.symbols and len(new_dict) > n  # ids unchanged, pieces appended
    report = json.loads((with_ro / "added_language.json").read_text())
    assert len(new_dict) - n == report["added_pieces"] > 0
    assert report["pieces_per_word"]["after"] < report["pieces_per_word"]["before"]
    assert report["unknown_pieces"]["after"] < report["unknown_pieces"]["before"]  # ș, ț, ă were <unk>
    a, b = old.state["model"], new.state["model"]
    for key in a:
        if key.startswith(LM) and "lang_embeddings" not in key and key in b:
            assert torch.equal(b[key][: a[key].shape[0]], a[key]), key  # every old row as it was
    assert b[LM + "embeddings.weight"].shape[0] == len(new_dict)
    assert torch.equal(b[LM + "pred_layer.proj.weight"], b[LM + "embeddings.weight"])  # still tied
    table = b[LM + "lang_embeddings.weight"]
    assert table.shape[0] == 3 and torch.allclose(table[2], a[LM + "lang_embeddings.weight"].mean(0))
    assert new.langs == ["de", "en", "ro"] and new.task_state["langs"] == ["de", "en", "ro"]
    # the old languages' text segments as before (--keep-text), with the pipeline that OUT carries
    old_pipe, new_pipe = old.assets.pipeline(), load_pipeline([str(with_ro)])
    for lang in ("de", "en"):
        lines = (raw / f"train.{lang}").read_text(encoding="utf-8").splitlines()[:300]
        assert [old_pipe.pieces(s, lang) for s in lines] == [new_pipe.pieces(s, lang) for s in lines]
    ro = (raw / "ro.txt").read_text(encoding="utf-8").splitlines()[:200]
    assert sum(map(len, (new_pipe.pieces(s, "ro") for s in ro))) < sum(map(len, (old_pipe.pieces(s, "ro") for s in ro)))


def test_a_new_piece_starts_as_the_mean_of_the_old_pieces_it_splits_into(de_en_lm, with_ro):
    ckpt, _ = de_en_lm
    old, new = PretrainedCheckpoint(str(ckpt)), PretrainedCheckpoint(str(with_ro / "model.pt"))
    old_dict, new_dict = old.dictionary()[0], new.dictionary()[0]
    sp = spm.SentencePieceProcessor(model_file=old.assets.pipeline().model_path)
    emb_old, emb_new = old.state["model"][LM + "embeddings.weight"], new.state["model"][LM + "embeddings.weight"]
    checked = 0
    for i in range(len(old_dict), len(new_dict)):
        piece = new_dict[i]
        if not piece.startswith("\u2581") or len(piece) < 4:
            continue
        parts = [old_dict.index(p) for p in sp.encode_as_pieces(piece[1:]) if p in old_dict.indices]
        if parts and old_dict.unk() not in parts:
            assert torch.allclose(emb_new[i], emb_old[parts].mean(0), atol=1e-6), piece
            checked += 1
    assert checked > 10


def test_bad_input_is_one_line_and_writes_nothing(de_en_lm, with_ro, unmt, tmp_path, capsys):
    from xlm_fairseq.convert.cli import main

    ckpt, raw = de_en_lm
    out = tmp_path / "out"
    cases = {
        "de": ([ckpt, out, "--add-lang", "de", "--text", raw / "ro.txt"], "--add-lang de: "),
        "no text": ([ckpt, out, "--add-lang", "ro", "--text", tmp_path / "none.txt"], "--text "),
        "a translator": (
            [unmt[0] / "checkpoint_last.pt", out, "--add-lang", "fr", "--text", raw / "ro.txt"],
            "--add-lang takes a pretrained",
        ),
        "bad keep": ([ckpt, out, "--add-lang", "ro", "--text", raw / "ro.txt", "--keep-text", "fr=x"], "--keep-text"),
        "text alone": ([ckpt, out, "--text", raw / "ro.txt"], "--text and --keep-text go with --add-lang"),
    }
    for case, (args, expected) in cases.items():
        status, err = in_process(main, args, capsys)
        assert status != 0, case
        assert len(err.strip().splitlines()) == 1 and expected in err, (case, err[-800:])
        assert not out.exists(), case
    before = sorted(os.listdir(with_ro))
    status, err = in_process(main, [ckpt, with_ro, "--add-lang", "ro", "--text", raw / "ro.txt"], capsys)
    assert status != 0 and "not empty" in err and sorted(os.listdir(with_ro)) == before


def _train(*args):
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(
        ["bash", ROOT / "recipes" / "train.sh", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=1200,
    )


def test_train_sh_refuses_a_language_the_lm_lacks(de_en_lm, tmp_path):
    ckpt, _ = de_en_lm
    enro = SAMPLE / "en-ro"
    proc = _train("--lm", ckpt, "--pairs", f"en-ro={enro}/train.en-ro", "--work-dir", tmp_path / "w", "--plan")
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr[-1500:]
    assert "pretrained on de,en, not ro; add a language first: xlm-fairseq-convert" in proc.stderr
    assert not (tmp_path / "w").exists()


@pytest.mark.slow  # a whole recipe run
def test_train_sh_continues_from_the_extended_lm_with_the_old_language_kept(de_en_lm, with_ro, tmp_path):
    """en-ro from the de,en LM with ro added: its vocabulary and size, de kept in pretraining (MLM, validated on
    lines split off its text) but not in translation; both directions scored."""
    _, raw = de_en_lm
    enro, work = SAMPLE / "en-ro", tmp_path / "work"
    proc = _train(
        "--lm",
        with_ro,
        "--pairs",
        f"en-ro={enro}/train.en-ro",
        "--mono",
        f"ro={enro}/mono.ro",
        "--mono",
        f"de={raw}/train.de",
        "--tiny",
        "--work-dir",
        work,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "the LM's (--lm), pretraining continues from it" in proc.stdout
    pretrain = (work / "logs" / "pretrain.out").read_text()
    assert f"initialised from {with_ro / 'model.pt'}" in pretrain and "mlm_de_fullmask_ppl" in pretrain
    translate = (work / "logs" / "translate.log").read_text()
    assert "'langs': 'en,ro'" in translate
    report = json.loads((work / "report.json").read_text())
    assert {r["direction"] for r in report["bleu"] if r["set"] == "test"} == {"en-ro", "ro-en"}
    dictionary = (work / "data-bin" / "dict.txt").read_text(encoding="utf-8")
    assert dictionary == (with_ro / "dict.txt").read_text(encoding="utf-8")
