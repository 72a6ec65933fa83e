"""Tests of the WMT16 recipes' small data steps, ``python -m recipes.wmt16.tools`` (with
``recipes/wmt16/data.py`` and ``evaluation.py``): checksums, gzip heads, parallel corpora in
archives, XLM vocabularies, hypotheses and references, the BLEU table, sacrebleu's test-set cache."""

import gzip
import hashlib
import os
import signal
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from recipe_support import ROOT, add_member, env, published_names

from preprocess.pipeline import PipelineSettings, write_settings


def tools(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "recipes.wmt16.tools", *map(str, args)],
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env(PYTHONPATH=str(ROOT)),
    )


def test_every_subcommand_has_help():
    for command in (
        "verify",
        "head-gz",
        "testset",
        "extract-para",
        "vocab-to-dict",
        "same-dict",
        "hyps",
        "tokenize-ref",
        "strip-diacritics",
        "summary",
    ):
        result = tools(command, "--help", cwd="/")  # from anywhere, the repository on PYTHONPATH
        assert result.returncode == 0 and "usage:" in result.stdout, (command, result.stderr)


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
# sacrebleu's test-set cache (wmt16/tools.py testset), killed while unpacking
# ------------------------------------------------------------------------------------------------

# a test set as sacrebleu defines its WMT16 ones, served from a local archive (file://); KILL_IN
# names an archive member: unpacking writes half of it and the process is SIGKILLed there
TESTSET_SCRIPT = r"""
import os, signal, sys, tarfile
from sacrebleu.dataset import DATASETS
from sacrebleu.dataset.fake_sgml import FakeSGMLDataset
DATASETS["toy16"] = FakeSGMLDataset("toy16", data=[sys.argv[1]], md5=[sys.argv[2]],
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
from recipes.wmt16 import tools
sys.exit(tools.main(["testset", "toy16", "de-en", sys.argv[3], *sys.argv[4:]]))
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
    environ = dict(os.environ, SACREBLEU=str(cache), PYTHONPATH=str(ROOT))

    def testset(*extra, **more):
        argv = [sys.executable, "-c", TESTSET_SCRIPT, archive.as_uri(), md5, out, *extra]
        return subprocess.run(argv, capture_output=True, text=True, env=dict(environ, **more))

    killed = testset(KILL_IN="toy/en.sgm")
    assert killed.returncode == -signal.SIGKILL and not out.exists()
    result = testset()
    assert result.returncode == 0, result.stderr
    assert out.read_text().splitlines() == [f"ref sentence {i} in en" for i in range(1, n + 1)]
    # the cache now holds the whole set: an offline run takes it as it is
    assert testset("--offline").returncode == 0 and len(out.read_text().splitlines()) == n
    assert [p.name for p in cache.joinpath("toy16").iterdir() if p.name.startswith(".")] == []
