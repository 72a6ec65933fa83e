"""Tests of preprocess/prepare.py (raw text -> fairseq data-bin) on real files.

The end-to-end build uses the shipped sample corpus (recipes/data); the other builds use small
slices of it copied into tmp_path. Every CLI run is a subprocess of ``python -m preprocess.prepare``.
"""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from preprocess import (
    SPECIAL_SYMBOLS,
    normalize_line,
)

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "recipes" / "data"
ENDE = SAMPLE / "en-de"
ENRO = SAMPLE / "en-ro"


def prepare(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "preprocess.prepare", *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def n_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def snapshot(directory):
    """{relative path: (bytes, mtime_ns)} of every file under ``directory``."""
    out = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, directory)] = (f.read(), os.stat(path).st_mtime_ns)
    return out


def siblings(dest):
    """Leftover DEST.partial-* / DEST.old-* next to dest."""
    dest = Path(dest)
    return sorted(p.name for p in dest.parent.iterdir() if p.name.startswith(dest.name + "."))


def assert_one_error_line(result, *needles):
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("prepare: error:"), lines[0]
    for needle in needles:
        assert str(needle) in lines[0], (needle, lines[0])
    return lines[0]


SAMPLE_ARGS = [
    "--langs",
    "en,de,ro",
    "--mono",
    f"train:en={ENDE / 'mono.en'}",
    "--mono",
    f"train:de={ENDE / 'mono.de'}",
    "--mono",
    f"train:ro={ENRO / 'mono.ro'}",
    "--para",
    f"train:en-de={ENDE / 'train.en-de'}",  # given en-de: stored as de-en
    "--para",
    f"valid:de-en={ENDE / 'valid.en-de'}",  # given de-en: stays de-en
    "--para",
    f"test:en-de={ENDE / 'test.en-de'}",
    "--para",
    f"train:ro-en={ENRO / 'train.en-ro'}",  # given ro-en: stored as en-ro
    "--para",
    f"valid:en-ro={ENRO / 'valid.en-ro'}",
    "--mono",
    f"valid:ro={ENRO / 'valid.en-ro.ro'}",
    "--vocab-size",
    "1000",
    "--workers",
    "2",
]
# dataset in DEST -> the input file it comes from
SAMPLE_DATASETS = {
    "train.en": ENDE / "mono.en",
    "train.de": ENDE / "mono.de",
    "train.ro": ENRO / "mono.ro",
    "valid.ro": ENRO / "valid.en-ro.ro",
    "train.de-en.en": ENDE / "train.en-de.en",
    "train.de-en.de": ENDE / "train.en-de.de",
    "valid.de-en.en": ENDE / "valid.en-de.en",
    "valid.de-en.de": ENDE / "valid.en-de.de",
    "test.de-en.en": ENDE / "test.en-de.en",
    "test.de-en.de": ENDE / "test.en-de.de",
    "train.en-ro.en": ENRO / "train.en-ro.en",
    "train.en-ro.ro": ENRO / "train.en-ro.ro",
    "valid.en-ro.en": ENRO / "valid.en-ro.en",
    "valid.en-ro.ro": ENRO / "valid.en-ro.ro",
}


@pytest.fixture(scope="module")
def sample_bin(tmp_path_factory):
    dest = tmp_path_factory.mktemp("sample") / "data-bin"
    result = prepare(dest, *SAMPLE_ARGS)
    assert result.returncode == 0, result.stderr
    return dest, result


@pytest.fixture(scope="module")
def dictionary(sample_bin):
    from fairseq.data import Dictionary

    return Dictionary.load(str(sample_bin[0] / "dict.txt"))


def test_sample_corpus_shipped():
    for name, lines in [
        ("mono.en", 6000),
        ("mono.de", 6000),
        ("train.en-de.en", 4000),
        ("valid.en-de.de", 300),
        ("test.en-de.en", 500),
    ]:
        assert n_lines(ENDE / name) == lines
    for name, lines in [("mono.ro", 3000), ("train.en-ro.ro", 2000), ("valid.en-ro.en", 200), ("test.en-ro.ro", 300)]:
        assert n_lines(ENRO / name) == lines
    docs = SAMPLE / "en-de-docs"  # the quickstart's larger draw: its held-out test shares no sentence with training
    for name, lines in [("mono.en", 10000), ("mono.de", 10000), ("train.en-de.de", 20000), ("test.en-de.en", 500)]:
        assert n_lines(docs / name) == lines
    docs_train = set()
    for p in list(docs.glob("train.*")) + list(docs.glob("mono.*")):
        docs_train |= set(p.read_text(encoding="utf-8").splitlines())
    for p in list(docs.glob("valid.*")) + list(docs.glob("test.*")):
        assert not set(p.read_text(encoding="utf-8").splitlines()) & docs_train, p
    total = sum(p.stat().st_size for p in SAMPLE.rglob("*") if p.is_file())
    assert total < 11 * 1024 * 1024  # a few MB of text a recipe needs, no more
    train_like = set()
    for d in (ENDE, ENRO):
        for p in list(d.glob("train.*")) + list(d.glob("mono.*")):
            train_like |= set(p.read_text(encoding="utf-8").splitlines())
    for d in (ENDE, ENRO):
        for p in list(d.glob("valid.*")) + list(d.glob("test.*")):
            assert not set(p.read_text(encoding="utf-8").splitlines()) & train_like, p


def test_output_layout(sample_bin):
    dest, result = sample_bin
    names = set(os.listdir(dest))
    expected = {
        "dict.txt",
        "spm.model",
        "spm.vocab",
        "text_pipeline.json",
        "summary.json",
        "summary.txt",
        "manifest.json",
    }
    for ds in SAMPLE_DATASETS:
        expected |= {f"{ds}.bin", f"{ds}.idx"}
    assert names == expected
    assert siblings(dest) == []
    assert "prepare: wrote" in result.stdout


def test_pairs_stored_in_alphabetical_order(sample_bin):
    dest, _ = sample_bin
    assert (dest / "train.de-en.en.bin").exists() and (dest / "valid.de-en.de.idx").exists()
    assert (dest / "train.en-ro.ro.bin").exists()
    assert not list(dest.glob("*.en-de.*")) and not list(dest.glob("*.ro-en.*"))


def test_dict_special_symbols_and_counts(sample_bin, dictionary):
    import sentencepiece as spm
    from fairseq.data import data_utils

    dest, _ = sample_bin
    lines = (dest / "dict.txt").read_text(encoding="utf-8").splitlines()
    assert lines[:10] == [f"{s} 0" for s in SPECIAL_SYMBOLS]
    tokens = [line.rsplit(" ", 1)[0] for line in lines]
    assert not {"<s>", "<pad>", "</s>", "<unk>"} & set(tokens)
    assert len(set(tokens)) == len(tokens)
    sp = spm.SentencePieceProcessor(model_file=str(dest / "spm.model"))
    assert sp.get_piece_size() == 1000
    assert len(lines) == 10 + 1000 - 3  # every piece but spm's <unk> <s> </s>
    assert len(dictionary) == 4 + len(lines)
    assert dictionary.index("<special1>") == 5 and dictionary.index("<special0>") == 4
    assert len((dest / "spm.vocab").read_text(encoding="utf-8").splitlines()) == 1000

    # the counts are the piece counts of the train data (mono and parallel, all languages)
    counts = np.zeros(len(dictionary), dtype=np.int64)
    for name in SAMPLE_DATASETS:
        if name.startswith("train."):
            ds = data_utils.load_indexed_dataset(str(dest / name), dictionary)
            for i in range(len(ds)):
                counts += np.bincount(ds[i].numpy(), minlength=len(dictionary))
    for index in range(dictionary.nspecial + len(SPECIAL_SYMBOLS), len(dictionary)):
        assert dictionary.count[index] == counts[index], dictionary[index]
    assert all(dictionary.count[dictionary.index(s)] == 0 for s in SPECIAL_SYMBOLS)
    assert sum(dictionary.count[14:]) > 100_000


def test_piece_counts_read_in_blocks(sample_bin, dictionary, monkeypatch):
    """The dictionary's counts are read from each .bin file in blocks (a bincount over the whole mmap
    made the file resident: memory that grew with the corpus); blocks of 7 ids count what one does."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    from preprocess import binarize

    dest, _ = sample_bin
    written = MMapIndexedDataset(str(dest / "train.en"))
    dtype, expected = written._index.dtype, np.bincount(np.frombuffer(written._bin_buffer, dtype=written._index.dtype))
    del written
    monkeypatch.setattr(binarize, "COUNT_BLOCK_IDS", 7)
    counts = binarize.count_ids(str(dest / "train.en.bin"), dtype, len(dictionary))
    assert counts.sum() == expected.sum() > 1000
    assert np.array_equal(counts[: len(expected)], expected[: len(dictionary)])


class _WordLengths:
    """A binarizer for the test: each word -> its length, then </s> (2)."""

    def encoder(self):
        return lambda line: np.asarray([len(w) for w in line.split()] + [2], dtype=np.int32)


@pytest.mark.parametrize("workers", [1, 3])
def test_datasets_written_as_fairseqs_builder_writes_them(tmp_path, monkeypatch, workers):
    """prepare writes the mmap index block by block (fairseq's builder keeps every size and offset as
    Python objects); the files are byte for byte what fairseq's MMapIndexedDatasetBuilder writes,
    with blocks of 2 sentences and the file split between workers."""
    import torch
    from fairseq.data.indexed_dataset import MMapIndexedDatasetBuilder

    from preprocess import binarize

    monkeypatch.setattr(binarize, "SIZES_BLOCK", 2)
    lines = ["a bb ccc", "", "dddd", "e e e e e", "ff", "", "g"]
    text = tmp_path / "tok.txt"
    text.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    sentences, with_eos, empty = binarize.binarize_file(
        str(text), str(tmp_path / "ours"), _WordLengths(), np.uint16, workers
    )
    assert (sentences, with_eos, empty) == (7, 7 + 11, 2)
    builder = MMapIndexedDatasetBuilder(str(tmp_path / "fairseq.bin"), dtype=np.uint16)
    encode = _WordLengths().encoder()
    for line in lines:
        builder.add_item(torch.from_numpy(encode(line)))
    builder.finalize(str(tmp_path / "fairseq.idx"))
    for ext in ("bin", "idx"):
        assert (tmp_path / f"ours.{ext}").read_bytes() == (tmp_path / f"fairseq.{ext}").read_bytes(), ext
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "fairseq.bin",
        "fairseq.idx",
        "ours.bin",
        "ours.idx",
        "tok.txt",
    ]


def test_datasets_load_with_fairseq(sample_bin, dictionary):
    from fairseq.data import data_utils

    dest, _ = sample_bin
    for name, source in SAMPLE_DATASETS.items():
        ds = data_utils.load_indexed_dataset(str(dest / name), dictionary)
        assert ds is not None, name
        assert len(ds) == n_lines(source), name
        assert all(ds[i][-1].item() == dictionary.eos() for i in (0, len(ds) - 1))
        assert (ds.sizes >= 2).all()


def test_encoding_matches_fairseq_encode_line(sample_bin, dictionary):
    import sentencepiece as spm
    from fairseq.data import data_utils

    dest, _ = sample_bin
    sp = spm.SentencePieceProcessor(model_file=str(dest / "spm.model"))
    for name, lang in [("valid.de-en.de", "de"), ("valid.en-ro.ro", "ro")]:
        ds = data_utils.load_indexed_dataset(str(dest / name), dictionary)
        raw = SAMPLE_DATASETS[name].read_text(encoding="utf-8").splitlines()
        for i in range(0, len(raw), 7):
            pieces = " ".join(sp.encode(normalize_line(raw[i], lang), out_type=str))
            expected = dictionary.encode_line(pieces, add_if_not_exist=False, append_eos=True)
            assert ds[i].tolist() == expected.tolist(), (name, i)

    # Romanian is stored with comma-below letters only, though the input mixes in cedilla ones
    ds = data_utils.load_indexed_dataset(str(dest / "train.en-ro.ro"), dictionary)
    raw = SAMPLE_DATASETS["train.en-ro.ro"].read_text(encoding="utf-8").splitlines()
    cedilla = [i for i, line in enumerate(raw) if set("şŞţŢ") & set(line)]
    assert cedilla
    for i in cedilla:
        text = sp.decode(dictionary.string(ds[i]).split())
        assert not set("şŞţŢ") & set(text) and set("șț") & set(text), text


def test_summary(sample_bin):
    dest, result = sample_bin
    summary = json.loads((dest / "summary.json").read_text(encoding="utf-8"))
    assert set(summary["datasets"]) == set(SAMPLE_DATASETS)
    for name, source in SAMPLE_DATASETS.items():
        st = summary["datasets"][name]
        assert st["sentences"] == n_lines(source)
        assert st["tokens"] > st["sentences"]
        assert 0.0 <= st["unk_rate"] < 0.01
        assert st["unk_rate"] == pytest.approx(st["unk"] / st["tokens"])
    assert summary["vocab"]["spm_vocab_size"] == 1000
    text = (dest / "summary.txt").read_text(encoding="utf-8")
    assert "unk rate" in text
    for name in SAMPLE_DATASETS:
        assert name in text and name in result.stdout


def test_manifest(sample_bin):
    dest, _ = sample_bin
    manifest = json.loads((dest / "manifest.json").read_text(encoding="utf-8"))
    paths = {x["path"] for x in manifest["inputs"]}
    assert paths == {str(p) for p in SAMPLE_DATASETS.values()}
    for x in manifest["inputs"]:
        assert x["size"] == os.path.getsize(x["path"]) and x["mtime_ns"] == os.stat(x["path"]).st_mtime_ns
    assert manifest["options"]["langs"] == ["en", "de", "ro"]
    assert manifest["options"]["sentencepiece"]["vocab_size"] == 1000


def test_rerun_is_up_to_date(sample_bin):
    dest, _ = sample_bin
    before = snapshot(dest)
    result = prepare(dest, *SAMPLE_ARGS)
    assert result.returncode == 0, result.stderr
    assert "up to date" in result.stdout
    assert snapshot(dest) == before  # nothing rewritten: same bytes and mtimes
    assert siblings(dest) == []


def write_slice(path, source, start, count):
    lines = source.read_text(encoding="utf-8").splitlines()[start : start + count]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def raw(tmp_path):
    d = tmp_path / "raw"
    d.mkdir()
    write_slice(d / "mono.en", ENDE / "mono.en", 0, 400)
    write_slice(d / "mono.de", ENDE / "mono.de", 0, 400)
    write_slice(d / "other.en", ENDE / "mono.en", 400, 400)
    write_slice(d / "train.en", ENDE / "train.en-de.en", 0, 200)
    write_slice(d / "train.de", ENDE / "train.en-de.de", 0, 200)
    return d


def small_args(raw, mono_en="mono.en", *extra):
    return [
        "--langs",
        "en,de",
        "--mono",
        f"train:en={raw / mono_en}",
        "--mono",
        f"train:de={raw / 'mono.de'}",
        "--para",
        f"train:en-de={raw / 'train'}",
        "--vocab-size",
        "300",
        "--workers",
        "1",
        *extra,
    ]


@pytest.mark.slow  # four full builds
def test_different_inputs_refused_then_force_replaces(tmp_path, raw):
    dest = tmp_path / "bin"
    assert prepare(dest, *small_args(raw)).returncode == 0
    before = snapshot(dest)

    result = prepare(dest, *small_args(raw, "other.en"))
    assert_one_error_line(result, str(dest), "--force", "train.en")
    assert snapshot(dest) == before
    assert siblings(dest) == []

    # bad input together with --force: still refused before anything is touched
    (raw / "bad.en").write_bytes(b"fine\nbad \xc3\x28 byte\n")
    result = prepare(dest, *small_args(raw, "bad.en", "--force"))
    assert_one_error_line(result, raw / "bad.en", "line 2")
    assert snapshot(dest) == before

    # a failure during the build (vocabulary too large for the data) leaves DEST as it was
    args = small_args(raw, "other.en", "--force")
    args[args.index("--vocab-size") + 1] = "100000"
    result = prepare(dest, *args)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].startswith("prepare: error: --vocab-size 100000 is too large")
    assert snapshot(dest) == before
    assert siblings(dest) == []

    result = prepare(dest, *small_args(raw, "other.en", "--force"))
    assert result.returncode == 0, result.stderr
    manifest = json.loads((dest / "manifest.json").read_text(encoding="utf-8"))
    assert str(raw / "other.en") in {x["path"] for x in manifest["inputs"]}
    assert snapshot(dest)["train.en.bin"][0] != before["train.en.bin"][0]
    assert siblings(dest) == []

    # touching an input (new mtime) makes it out of date too
    os.utime(raw / "other.en", ns=(1_000_000_000, 1_000_000_000))
    assert_one_error_line(prepare(dest, *small_args(raw, "other.en")), "changed", "--force")


def test_foreign_dest_refused(tmp_path, raw):
    dest = tmp_path / "bin"
    dest.mkdir()
    (dest / "precious.txt").write_text("keep me\n")
    result = prepare(dest, *small_args(raw))
    assert_one_error_line(result, str(dest), "manifest.json", "--force")
    assert os.listdir(dest) == ["precious.txt"] and (dest / "precious.txt").read_text() == "keep me\n"
    assert siblings(dest) == []


@pytest.mark.slow  # three full builds
def test_reuse_vocabulary_and_workers_do_not_change_output(tmp_path, raw):
    first, second, reused = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    assert prepare(first, *small_args(raw)).returncode == 0
    args = small_args(raw)
    args[args.index("--workers") + 1] = "2"
    assert prepare(second, *args).returncode == 0
    a, b = snapshot(first), snapshot(second)
    assert set(a) == set(b)
    for name in a:
        if name != "manifest.json":
            assert a[name][0] == b[name][0], name

    # --spm-model + --dict: the vocabulary is taken as given (into an existing, empty DEST)
    reused.mkdir()
    write_slice(raw / "test.en", ENDE / "test.en-de.en", 0, 50)
    write_slice(raw / "test.de", ENDE / "test.en-de.de", 0, 50)
    result = prepare(
        reused,
        "--langs",
        "en,de",
        "--mono",
        f"train:en={raw / 'other.en'}",
        "--mono",
        f"train:de={raw / 'mono.de'}",
        "--para",
        f"test:de-en={raw / 'test'}",
        "--spm-model",
        first / "spm.model",
        "--dict",
        first / "dict.txt",
        "--workers",
        "1",
    )
    assert result.returncode == 0, result.stderr
    assert (reused / "dict.txt").read_bytes() == (first / "dict.txt").read_bytes()
    assert (reused / "spm.model").read_bytes() == (first / "spm.model").read_bytes()
    assert (reused / "train.de.bin").read_bytes() == (first / "train.de.bin").read_bytes()
    assert (reused / "test.de-en.en.idx").exists()


def test_utf8_errors_replace(tmp_path, raw):
    (raw / "bad.en").write_bytes((raw / "mono.en").read_bytes() + b"caf\xe9 au lait\n")
    dest = tmp_path / "bin"
    result = prepare(dest, *small_args(raw, "bad.en", "--utf8-errors", "replace", "--quiet"))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and result.stderr == ""
    summary = json.loads((dest / "summary.json").read_text(encoding="utf-8"))
    assert summary["datasets"]["train.en"]["sentences"] == 401


# fastBPE codes: "a b count", best (earliest) merge first, "</w>" marks the end of a word
TINY_CODES = "#version: 0.2\nt h 100\nth e</w> 90\ni n 80\nin g</w> 70\ne r 60\n"
# the pieces of the test sentences in XLM's spelling; "r" (word-final r) is deliberately missing
TINY_PIECES = ["T@@", "h@@", "e", "th@@", "ing", "i@@", "s", "o@@", "e@@", "the", ".", "Ö@@", "O@@", "o"]


def write_bpe_vocabulary(directory):
    codes = directory / "codes"
    codes.write_text(TINY_CODES, encoding="utf-8")
    dictionary = directory / "xlm_dict.txt"
    dictionary.write_text(
        "".join(f"{s} 0\n" for s in SPECIAL_SYMBOLS) + "".join(f"{p} {100 - i}\n" for i, p in enumerate(TINY_PIECES)),
        encoding="utf-8",
    )
    return codes, dictionary


def decoded(dest, name):
    from fairseq.data import Dictionary, data_utils

    d = Dictionary.load(str(dest / "dict.txt"))
    ds = data_utils.load_indexed_dataset(str(dest / name), d)
    return [d.string(ds[i]) for i in range(len(ds))]


@pytest.mark.slow  # learns BPE codes, builds twice
def test_bpe_codes(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    codes, dictionary = write_bpe_vocabulary(raw)
    (raw / "mono.en").write_text("The thing is other.\n\nÖo\n", encoding="utf-8")
    (raw / "mono.de").write_text("the\n", encoding="utf-8")
    args = [
        "--langs",
        "en,de",
        "--mono",
        f"train:en={raw / 'mono.en'}",
        "--mono",
        f"train:de={raw / 'mono.de'}",
        "--bpe-codes",
        codes,
        "--dict",
        dictionary,
    ]
    dest = tmp_path / "bin"
    result = prepare(dest, *args, "--workers", "2", "--quiet")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and result.stderr == ""

    # Moses tokenisation, then the lowest-ranked pair merged first, until no pair is a merge;
    # XLM's spelling: "th@@" inside a word, "ing" at its end; pieces missing from --dict: <unk>
    assert decoded(dest, "train.en") == ["T@@ h@@ e th@@ ing i@@ s o@@ th@@ e@@ <unk> .", "", "Ö@@ o"]
    assert decoded(dest, "train.de") == ["the"]

    names = set(os.listdir(dest))
    assert {"dict.txt", "bpe.codes", "text_pipeline.json", "train.en.bin", "manifest.json"} <= names
    assert not names & {"spm.model", "spm.vocab"}
    assert (dest / "dict.txt").read_bytes() == dictionary.read_bytes()  # copied as is
    assert (dest / "bpe.codes").read_bytes() == codes.read_bytes()
    pipeline = json.loads((dest / "text_pipeline.json").read_text(encoding="utf-8"))
    assert pipeline == {
        "format": 1,
        "subwords": "xlm_bpe",
        "subword_model": "bpe.codes",
        "subword_sha256": hashlib.sha256(codes.read_bytes()).hexdigest(),
        "ro_remove_diacritics": False,
        "lowercase_and_remove_accent": False,
        "segmenters": {},
    }
    assert json.loads((dest / "manifest.json").read_text(encoding="utf-8"))["options"]["langs"] == ["en", "de"]
    summary = json.loads((dest / "summary.json").read_text(encoding="utf-8"))
    assert summary["vocab"]["bpe_codes"] == 5
    assert summary["datasets"]["train.en"]["unk"] == 1 and summary["datasets"]["train.en"]["empty_lines"] == 1
    options = json.loads((dest / "manifest.json").read_text(encoding="utf-8"))["options"]
    assert options["bpe_codes"]["path"] == str(codes) and options["dict"]["path"] == str(dictionary)
    assert "sentencepiece" not in options

    # re-run: up to date; one worker gives the same bytes
    again = prepare(dest, *args)
    assert again.returncode == 0 and "up to date" in again.stdout
    single = tmp_path / "single"
    assert prepare(single, *args, "--workers", "1", "--quiet").returncode == 0
    for name in ("train.en.bin", "train.en.idx", "train.de.bin"):
        assert (single / name).read_bytes() == (dest / name).read_bytes(), name

    # XLM's lowercasing + accent removal (off by default): "The" -> "the", "Öo" -> "oo" -> o@@ o
    lower = tmp_path / "lower"
    result = prepare(lower, *args, "--lowercase-and-remove-accent", "--quiet")
    assert result.returncode == 0, result.stderr
    assert decoded(lower, "train.en") == ["the th@@ ing i@@ s o@@ th@@ e@@ <unk> .", "", "o@@ o"]
    assert json.loads((lower / "text_pipeline.json").read_text(encoding="utf-8"))["lowercase_and_remove_accent"]

    # other codes: DEST is out of date and refused without --force
    codes.write_text(TINY_CODES + "o th 50\n", encoding="utf-8")
    assert_one_error_line(prepare(dest, *args), "bpe_codes", "--force")


def bad_case(raw, case):
    """Returns (arguments after DEST, strings the error line must contain)."""
    mono_en, mono_de = raw / "mono.en", raw / "mono.de"
    base = ["--langs", "en,de", "--mono", f"train:en={mono_en}", "--mono", f"train:de={mono_de}"]
    if case == "length_mismatch":
        write_slice(raw / "bad.en", ENDE / "train.en-de.en", 0, 120)
        write_slice(raw / "bad.de", ENDE / "train.en-de.de", 0, 119)
        return base + ["--para", f"train:en-de={raw / 'bad'}"], [raw / "bad.en", raw / "bad.de", "120", "119"]
    if case == "invalid_utf8":
        (raw / "bad.de").write_bytes(b"Erste Zeile.\nZweite Zeile.\nDritte \xff Zeile.\n")
        return ["--langs", "en,de", "--mono", f"train:en={mono_en}", "--mono", f"train:de={raw / 'bad.de'}"], [
            raw / "bad.de",
            "line 3",
            "--utf8-errors replace",
        ]
    if case == "empty_file":
        (raw / "empty.de").write_bytes(b"")
        return base + ["--mono", f"valid:de={raw / 'empty.de'}"], [raw / "empty.de", "empty"]
    if case == "blank_file":
        (raw / "blank.en").write_bytes(b"\n  \n\n")
        return base + ["--mono", f"valid:en={raw / 'blank.en'}"], [raw / "blank.en", "empty"]
    if case == "missing_file":
        return base + ["--mono", f"valid:en={raw / 'nope.en'}"], [raw / "nope.en", "not found"]
    if case == "missing_para_side":
        return base + ["--para", f"valid:en-de={raw / 'train'}", "--para", f"test:en-de={raw / 'nothere'}"], [
            raw / "nothere.en",
            "--para",
        ]
    if case == "lang_not_in_langs":
        return base + ["--para", f"train:en-fr={raw / 'train'}"], ["'fr'", "--langs", "--para"]
    if case == "lang_without_train_data":
        return [
            "--langs",
            "en,de,ro",
            "--mono",
            f"train:en={mono_en}",
            "--mono",
            f"train:de={mono_de}",
            "--mono",
            f"valid:ro={mono_en}",
        ], ["'ro'", "--langs", "train"]
    if case == "bad_mono_spec":
        return base + ["--mono", "train-en=x.en"], ["--mono", "train-en=x.en"]
    if case == "bad_para_spec":
        return base + ["--para", "train:ende=x"], ["--para", "train:ende=x"]
    if case == "same_lang_pair":
        return base + ["--para", "train:en-en=x"], ["--para", "train:en-en=x"]
    if case == "bad_langs":
        return ["--langs", "en,,de", "--mono", f"train:en={mono_en}"], ["--langs", "en,,de"]
    if case == "given_twice":
        return base + ["--mono", f"train:en={mono_de}"], ["--mono", "train.en"]
    if case == "spm_without_dict":
        return base + ["--spm-model", str(mono_en)], ["--spm-model", "--dict"]
    if case == "bad_spm_model":
        (raw / "junk.model").write_bytes(b"not a sentencepiece model")
        (raw / "dict.txt").write_text("".join(f"{s} 0\n" for s in SPECIAL_SYMBOLS) + "a 1\n")
        return base + ["--spm-model", raw / "junk.model", "--dict", raw / "dict.txt"], [
            raw / "junk.model",
            "--spm-model",
        ]
    if case == "dict_without_specials":
        import sentencepiece as spm

        spm.SentencePieceTrainer.train(
            input=str(mono_en), model_prefix=str(raw / "m"), vocab_size=200, model_type="bpe", minloglevel=2
        )
        (raw / "dict.txt").write_text("a 1\nb 2\n")
        return base + ["--spm-model", raw / "m.model", "--dict", raw / "dict.txt"], [
            raw / "dict.txt",
            "--dict",
            "<special0>",
        ]
    if case == "bad_workers":
        return base + ["--workers", "zero"], ["--workers", "zero"]
    if case in ("bpe_without_dict", "bpe_with_spm_model", "bpe_with_vocab_size", "bad_bpe_codes"):
        codes, dictionary = write_bpe_vocabulary(raw)
        if case == "bpe_without_dict":
            return base + ["--bpe-codes", codes], ["--bpe-codes", "--dict"]
        if case == "bpe_with_spm_model":
            return base + ["--bpe-codes", codes, "--dict", dictionary, "--spm-model", codes], [
                "--bpe-codes",
                "--spm-model",
            ]
        if case == "bpe_with_vocab_size":
            return base + ["--bpe-codes", codes, "--dict", dictionary, "--vocab-size", "100"], [
                "--bpe-codes",
                "--vocab-size",
            ]
        codes.write_text("t h 100\nthis line is not a merge\n", encoding="utf-8")
        return base + ["--bpe-codes", codes, "--dict", dictionary], [codes, "line 2", "a b [count]"]
    if case == "lowercase_without_bpe":
        return base + ["--lowercase-and-remove-accent"], ["--lowercase-and-remove-accent", "--bpe-codes"]
    raise AssertionError(case)


BAD_CASES = [
    "length_mismatch",
    "invalid_utf8",
    "empty_file",
    "blank_file",
    "missing_file",
    "missing_para_side",
    "lang_not_in_langs",
    "lang_without_train_data",
    "bad_mono_spec",
    "bad_para_spec",
    "same_lang_pair",
    "bad_langs",
    "given_twice",
    "spm_without_dict",
    "bad_spm_model",
    "dict_without_specials",
    "bad_workers",
    "bpe_without_dict",
    "bpe_with_spm_model",
    "bpe_with_vocab_size",
    "bad_bpe_codes",
    "lowercase_without_bpe",
]


@pytest.mark.parametrize("case", BAD_CASES)
def test_bad_input(tmp_path, raw, case):
    args, needles = bad_case(raw, case)
    dest = tmp_path / "out" / "bin"
    result = prepare(dest, *args)
    assert_one_error_line(result, *needles)
    assert not dest.exists() and not (tmp_path / "out").exists()
    assert result.stdout == ""


def test_missing_dest_argument():
    result = prepare("--langs", "en")
    assert_one_error_line(result, "DEST")


def test_help():
    result = prepare("--help")
    assert result.returncode == 0
    for option in (
        "--mono",
        "--para",
        "--vocab-size",
        "--spm-model",
        "--dict",
        "--spm-sentences-per-lang",
        "--ro-remove-diacritics",
        "--workers",
        "--force",
        "--quiet",
        "--utf8-errors",
        "--bpe-codes",
        "--lowercase-and-remove-accent",
    ):
        assert option in result.stdout


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.slow  # kill and rerun
def test_a_killed_build_leaves_nothing_the_next_run_does_not_clean(tmp_path, raw):
    """SIGKILL while DEST.partial-* is being built: the next run removes it (and a live run's is
    left alone); a kill between the two renames of --force leaves DEST in DEST.old-*: put back."""
    import signal
    import socket
    import time

    dest = tmp_path / "bin"
    proc = subprocess.Popen([sys.executable, "-m", "preprocess.prepare", dest, *small_args(raw)], cwd=REPO)
    deadline = time.time() + 60
    while not [p for p in siblings(dest) if ".partial-" in p] and time.time() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    (left,) = siblings(dest)
    assert left.startswith(f"bin.partial-{socket.gethostname()}-{proc.pid}-") and not dest.exists()
    live = tmp_path / f"bin.partial-{socket.gethostname()}-{os.getpid()}-abcd1234"  # this process: alive
    live.mkdir()

    result = prepare(dest, *small_args(raw))
    assert result.returncode == 0, result.stderr
    assert f"prepare: removed {tmp_path / left}, left by a killed run (pid {proc.pid})" in result.stderr
    assert siblings(dest) == [live.name]
    live.rmdir()

    # killed after DEST was moved into DEST.old-* and before the new one took its place
    before = snapshot(dest)
    old = tmp_path / f"bin.old-{socket.gethostname()}-{_dead_pid()}-abcd1234"
    old.mkdir()
    dest.rename(old / "previous")
    result = prepare(dest, *small_args(raw))
    assert result.returncode == 0 and "is up to date" in result.stdout, result.stderr
    assert f"prepare: {dest}: put back from {old}" in result.stderr
    assert snapshot(dest) == before and siblings(dest) == []


def test_a_write_killed_half_way_leaves_no_temporary_file_behind(tmp_path):
    """atomic_write's temporary file, left by a SIGKILL mid-write, is removed by the next write of
    that path (one of a live process is not)."""
    import socket

    from preprocess.files import atomic_write

    out = tmp_path / "out.txt"
    code = "import os, signal, sys\nfrom preprocess.files import atomic_write\n"
    code += "with atomic_write(sys.argv[1]) as f:\n"
    code += "    f.write('x' * 100000); f.flush(); os.kill(os.getpid(), signal.SIGKILL)\n"
    proc = subprocess.Popen([sys.executable, "-c", code, out], cwd=REPO)
    assert proc.wait() == -9 and not out.exists()
    (left,) = [p.name for p in tmp_path.iterdir()]
    assert left.startswith(f".out.txt.tmp-{socket.gethostname()}-{proc.pid}-")
    live = tmp_path / f".out.txt.tmp-{socket.gethostname()}-{os.getpid()}-abcd1234"
    live.write_text("")
    with atomic_write(out) as f:
        f.write("whole\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, "out.txt"])
    assert out.read_text() == "whole\n"
