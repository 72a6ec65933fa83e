"""The classification recipe's pretraining text with package descriptions (``--corpus shared+ddtp``):
in-domain text from the real shared DDTP files, with no package of the classification set in it."""

import csv

import pytest
from conftest import BIN, ROOT, SHARED, run

from recipes.experiments.xcls import corpus as xcls_corpus

SAMPLE_XCLS = ROOT / "recipes" / "data" / "xcls"


def rows(tsv):
    with open(tsv, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def short_description(text):
    return text.split(". ")[0]  # the set's texts are the short description, ". ", the first paragraph


def test_topic_list_holds_the_classification_packages_and_little_else():
    topics = xcls_corpus.topic_hashes()
    for name in ("valid.en.tsv", "valid.de.tsv", "train.en.tsv"):
        found = [xcls_corpus.topic_hash(short_description(r["text"])) in topics for r in rows(SAMPLE_XCLS / name)]
        # the 1 % missed: packages whose description changed in bookworm's point releases after the set was drawn
        assert sum(found) >= 0.99 * len(found), (name, len(found) - sum(found))
    manuals = (ROOT / "recipes" / "data" / "en-de" / "mono.en").read_text(encoding="utf-8").splitlines()
    matched = sum(xcls_corpus.topic_hash(line) in topics for line in manuals)
    assert matched < 0.01 * len(manuals)  # 24-bit hashes: a chance match now and then, left out too


@pytest.mark.slow  # builds the experiment's corpus twice from the shared corpora
def test_description_text_leaves_out_every_classification_package(tmp_path):
    assert (SHARED / "en-de" / "ddtp.en").exists(), f"the test needs the shared corpora at {SHARED}"
    tsvs = sorted((SHARED / "xcls").glob("*.tsv"))
    held_out = xcls_corpus.classification_sentences(tsvs)
    plain = xcls_corpus.build("shared", SHARED, tmp_path / "shared", held_out)
    counts = xcls_corpus.build("shared+ddtp", SHARED, tmp_path / "ddtp", held_out)
    assert counts["topic_package_lines_dropped"] > 0 and counts["dropped"] == plain["dropped"]
    assert counts["mono.en"] > plain["mono.en"] and counts["train.de-en.de"] > plain["train.de-en.de"]
    text = {
        name: (tmp_path / "ddtp" / name).read_text(encoding="utf-8").splitlines()
        for name in ("mono.en", "mono.de", "train.de-en.en", "train.de-en.de")
    }
    pairs = set(zip(text["train.de-en.en"], text["train.de-en.de"]))
    # a utility's description is in, aligned; a game's (0ad, a training package) is not
    assert (
        "convert an addressbook to VCARD file format",
        "Konvertierung eines Adressbuches in das Dateiformat vCard",
    ) in pairs
    assert "Real-time strategy game of ancient warfare" not in set(text["mono.en"])
    assert "Echtzeit-Strategiespiel über antike Kriegsführung" not in set(text["mono.de"])
    # no line shares eight words in a row with any validation text, in either language (sister
    # packages in other sections, libjets3t-java of jets3t, included)
    for lang in ("en", "de"):
        valid = set().union(
            *(xcls_corpus.grams(xcls_corpus._key(r["text"])) for r in rows(SHARED / "xcls" / f"valid.{lang}.tsv"))
        )
        lines = text[f"mono.{lang}"] + text[f"train.de-en.{lang}"]
        assert not [line for line in lines if xcls_corpus.grams(xcls_corpus._key(line)) & valid][:3]


@pytest.mark.parametrize(
    "args, made", [(["--corpus", "shared+ddtp"], "shared+ddtp"), (["--vocab-size", "1500"], "sample, vocabulary 1500")]
)
def test_work_dir_of_another_corpus_is_refused(tmp_path, args, made):
    work = tmp_path / "w"
    work.mkdir()
    (work / "corpus.txt").write_text("sample\n")
    proc = run([BIN / "python", "-m", "recipes.experiments.xcls", "--tiny", *args, "--work-dir", work], ok=False)
    assert proc.returncode != 0 and "--corpus/--vocab-size: " in proc.stderr, proc.stderr
    assert f"prepared with 'sample', not '{made}'" in proc.stderr
    assert sorted(p.name for p in work.iterdir()) == ["corpus.txt"]  # nothing made beside it


def test_self_training_pool_is_german_training_descriptions_without_validation_text():
    """The pool of ``--self-train``: German descriptions of training packages, shaped as the set's texts,
    none sharing eight words in a row with a validation text; the English twin's label kept apart."""
    xcls = SHARED / "xcls"
    valid = [xcls / f"valid.{lang}.tsv" for lang in ("en", "de")]
    pool = xcls_corpus.unlabelled_descriptions(SHARED, xcls / "train.en.tsv", valid)
    texts = dict(pool)
    assert len(texts) == len(pool) > 2000  # distinct texts
    assert texts["Echtzeit-Strategiespiel über antike Kriegsführung."] == "games"  # 0ad, a training package
    assert all(len(text.split()) <= 60 for text in texts)
    held = set().union(*(xcls_corpus.grams(xcls_corpus._key(r["text"])) for tsv in valid for r in rows(tsv)))
    assert not [text for text in texts if xcls_corpus.grams(xcls_corpus._key(text)) & held][:3]
    train_labels = {r["label"] for r in rows(xcls / "train.en.tsv")}
    assert set(texts.values()) == train_labels
