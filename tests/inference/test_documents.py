"""Whole texts, not just sentences: ``documents.py`` cuts a text into the sentences a model translates
and puts their translations back with the text's layout; the translation hub and
``xlm-fairseq-translate`` translate texts of any length that way, on a trained tiny model."""

import sys

import pytest
from conftest import in_process, run

from preprocess.segment import segmenter
from xlm_fairseq import XLMModel
from xlm_fairseq.inference import translate
from xlm_fairseq.inference.documents import cut, translate_texts

# three paragraphs of four sentences (written for these tests)
DOCUMENT = (
    "Klicken Sie auf die Schaltfläche „Drucken“. Wählen Sie dann einen Drucker aus. Die Datei wird "
    "gedruckt. Das kann einige Minuten dauern.\n"
    "\n"
    "Öffnen Sie das Menü „Datei“. Wählen Sie „Speichern unter“. Geben Sie einen Namen ein. Klicken Sie "
    "auf „Speichern“.\n"
    "\n"
    "Die Einstellungen finden Sie im Menü „Bearbeiten“. Dort können Sie die Sprache ändern. Starten Sie "
    "das Programm danach neu. Weitere Hilfe finden Sie im Handbuch.\n"
)
SENTENCES = [s for line in DOCUMENT.splitlines() for s in line.replace(". ", ".\n").splitlines() if s]


def marked(sentences):
    return [f"<{s}>" for s in sentences]


def everything_fits(sentence):
    return True


def test_layout_is_kept():
    text = "  Erster Satz. Zweiter Satz!  Dritter?\n\n\nVierter, z.B. mit Abkürzung.\r\n\tEingerückt.  \n \n"
    out = translate_texts([text, "", " \n"], "de", "en", marked, everything_fits)
    assert out == [
        "  <Erster Satz.> <Zweiter Satz!>  <Dritter?>\n\n\n<Vierter, z.B. mit Abkürzung.>\r\n\t<Eingerückt.>  \n \n",
        "",
        " \n",
    ]
    assert len(SENTENCES) == 12
    assert translate_texts([DOCUMENT], "de", "en", marked, everything_fits)[0].count("<") == 12


def test_sentences_of_every_text_go_in_one_call():
    calls = []

    def translate(sentences):
        calls.append(list(sentences))
        return marked(sentences)

    translate_texts(["Eins. Zwei.", "Drei.", "", "Vier."], "de", "en", translate, everything_fits)
    assert calls == [["Eins.", "Zwei.", "Drei.", "Vier."]]


def test_a_long_sentence_is_cut_never_cut_off():
    words = [f"Wort{i}" for i in range(60)]
    sentence = " ".join(words[:25]) + ", " + " ".join(words[25:]) + "."

    def fits(s):
        return len(s.split()) <= 20

    parts = cut(sentence, fits)
    assert all(fits(p) for p in parts) and len(parts) >= 3
    assert " ".join(parts) == sentence  # nothing lost, nothing added
    assert any(p.endswith("Wort24,") for p in parts)  # the clause end, near enough to the middle, is a cut
    out = translate_texts([sentence + " Kurz."], "de", "en", marked, fits)[0]
    assert out == " ".join(f"<{p}>" for p in parts) + " <Kurz.>"


@pytest.mark.parametrize(
    "lang,name,text",
    [
        ("zh", "jieba", "我们今天在北京的大学里学习机器翻译和自然语言处理的基本方法以及它们的应用"),
        ("th", "pythainlp", "วันนี้เราเรียนการแปลภาษาด้วยเครื่องและการประมวลผลภาษาธรรมชาติที่มหาวิทยาลัย"),
    ],
    ids=["zh", "th"],
)
def test_scripts_without_spaces_are_cut_between_the_segmenters_words(lang, name, text):
    words = segmenter(name)
    found = words(text)

    def fits(s):
        return len(s) <= len(text) // 3

    parts = cut(text, fits, words)
    assert "".join(parts) == text and all(fits(p) for p in parts)
    ends, at = set(), 0
    for w in found:
        at += len(w)
        ends.add(at)
    edges, at = [], 0
    for p in parts[:-1]:
        at += len(p)
        edges.append(at)
    assert set(edges) <= ends  # every cut falls between two of the segmenter's words


def test_sentences_of_chinese_and_japanese_have_no_space_between_them():
    assert translate_texts(["你好。我是学生！"], "zh", "en", marked, everything_fits) == ["<你好。> <我是学生！>"]
    assert translate_texts(["Hello. World."], "en", "zh", lambda s: ["你好。", "世界。"], everything_fits) == [
        "你好。世界。"
    ]


# ---- on a trained model --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mt(exported_unmt):
    return XLMModel.from_pretrained(str(exported_unmt))


GEN = {"beam": 2, "max_len_b": 20}


def test_hub_translates_a_document_as_its_sentences(mt):
    whole = mt.translate(DOCUMENT, src="de", tgt="en", **GEN)
    alone = [mt.translate(s, src="de", tgt="en", split_sentences=False, **GEN) for s in SENTENCES]
    paragraphs = [" ".join(alone[i : i + 4]) for i in (0, 4, 8)]
    assert whole == "\n\n".join(paragraphs) + "\n"
    assert mt.translate([DOCUMENT, ""], src="de", tgt="en", **GEN) == [whole, ""]


def test_hub_cuts_what_the_model_cannot_take_whole(mt, caplog):
    sentence = ", ".join(["Klicken Sie auf die Schaltfläche und wählen Sie einen Drucker aus"] * 12) + "."
    assert len(mt.encode(sentence, "de")) > mt.task.cfg.max_sentence_len + 2 and not mt.fits(sentence, "de")
    parts = cut(sentence, lambda s: mt.fits(s, "de"))
    assert len(parts) > 1 and all(mt.fits(p, "de") for p in parts) and " ".join(parts) == sentence
    alone = [mt.translate(p, src="de", tgt="en", split_sentences=False, **GEN) for p in parts]
    with caplog.at_level("WARNING"):
        assert mt.translate(sentence, src="de", tgt="en", **GEN) == " ".join(alone)
    assert "over the model's" not in caplog.text
    # one sentence as fairseq-generate takes it: cut to the positions, with the warning
    mt.translate(sentence * 4, src="de", tgt="en", split_sentences=False, beam=1, max_len_b=5)


TRANSLATE = [sys.executable, "-m", "xlm_fairseq.inference.translate"]


def test_translate_command_gives_the_hubs_translation(mt, exported_unmt, tmp_path):
    src = tmp_path / "doc.de"
    src.write_text(DOCUMENT + "\nNoch ein Satz.\n", encoding="utf-8")
    expected = mt.translate(src.read_text(encoding="utf-8"), src="de", tgt="en", beam=2)
    out = tmp_path / "doc.en"
    proc = run([*TRANSLATE, exported_unmt, "-s", "de", "-t", "en", src, "--beam", "2", "-o", out, "--lines", "2"])
    assert out.read_text(encoding="utf-8") == expected and proc.stdout == ""
    assert "line" in proc.stderr  # the progress bar
    piped = run([*TRANSLATE, exported_unmt, "-s", "de", "-t", "en", "--beam", "2"], input=DOCUMENT)
    assert piped.stdout == mt.translate(DOCUMENT, src="de", tgt="en", beam=2)


@pytest.mark.parametrize(
    "args,message",
    [
        (["-s", "de", "-t", "fr", "{d}/IN", "-o", "{d}/OUT"], "tgt='fr' is not one of the model's languages: en,de,ro"),
        (["-s", "de", "-t", "en", "{d}/IN", "-o", "{d}/IN"], "-o {d}/IN: is one of the input files; give another path"),
        (["-s", "de", "-t", "en", "{d}/LATIN1"], "{d}/LATIN1: not UTF-8 text (byte 5)"),
        (["-s", "de", "-t", "en", "{d}/MISSING"], "{d}/MISSING: no such file"),
        (["-s", "de", "-t", "en", "--beam", "0", "{d}/IN"], "--beam 0 / --lines 200: give numbers of at least 1"),
    ],
    ids=["language", "output-is-input", "not-utf8", "missing", "beam"],
)
def test_translate_command_errors_are_one_line(exported_unmt, tmp_path, args, message, capsys):
    """In this process: the model loads once; nothing is written, no input is touched."""
    files = {"IN": "Hallo Welt.\n", "OUT": "kept\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "LATIN1").write_bytes("Eine Übersetzung.\n".encode("latin-1"))
    status, err = in_process(translate.main, [exported_unmt, *(a.format(d=tmp_path) for a in args)], capsys)
    assert status == 2 and err.strip().splitlines()[-1] == f"translate: error: {message.format(d=tmp_path)}"
    assert all((tmp_path / name).read_text() == text for name, text in files.items())
