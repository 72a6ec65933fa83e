"""Scripts without spaces: the segmenters of preprocess/segment.py in the text pipeline (stored with the data and
the model), text -> pieces -> text for a Chinese sample written here (no Chinese text ships with the project),
BLEU into Chinese, Japanese and Thai on segmented text, the lexicon probe's words of such scripts."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT

from preprocess import segment
from preprocess.errors import UserError
from preprocess.pipeline import PipelineSettings, load_pipeline
from preprocess.text import detokenize, tokenize
from xlm_fairseq.evaluation.bleu import bleu_stats, corpus_bleu_from_meters

# written for this test: short software sentences
ZH = [
    "点击确定按钮以保存文件。",
    "这个程序在Linux系统上运行。",
    "请输入您的用户名和密码。",
    "文件已成功保存到磁盘。",
    "打开设置菜单并选择语言。",
]
EN = [
    "Click OK to save the file.",
    "This program runs on Linux.",
    "Please enter your user name and password.",
    "The file was saved to disk.",
    "Open the settings menu and choose a language.",
]


def test_segmenters_cut_words_and_detokenising_joins_them_without_spaces():
    assert tokenize("这个程序在Linux系统上运行。", "zh", segmenter="jieba") == "这个 程序 在 Linux 系统 上 运行 ."
    assert tokenize("ファイルを保存します。", "ja", segmenter="mecab") == "ファイル を 保存 し ます ."
    assert tokenize("ผมรักภาษาไทย", "th", segmenter="pythainlp") == "ผม รัก ภาษาไทย"
    assert tokenize("这个程序", "zh") == "这个程序"  # without a segmenter: Moses, one word
    assert detokenize("这个 程序 在 Linux 系统 上 运行 .", "zh") == "这个程序在Linux系统上运行."
    assert detokenize("GNU Linux 系统", "zh_CN") == "GNU Linux系统"  # two words of a spaced script keep their space
    assert detokenize("Hello , world !", "en") == "Hello, world!"


def test_segmenters_are_chosen_per_language_and_checked():
    assert segment.parse_segmenters([], ["en", "zh", "ja", "th", "de"]) == {
        "zh": "jieba",
        "ja": "mecab",
        "th": "pythainlp",
    }
    assert segment.parse_segmenters(["zh=none"], ["en", "zh"]) == {}
    for value, message in (
        ("zh", "expected LANG=NAME"),
        ("ko=jieba", "language 'ko' is not in --langs en,zh"),
        ("zh=kytea", "unknown segmenter 'kytea'"),
    ):
        with pytest.raises(UserError, match=message):
            segment.parse_segmenters([value], ["en", "zh"])
    with pytest.raises(UserError, match="segmenters must map languages to one of"):
        PipelineSettings.from_dict(
            {"format": 1, "subwords": "sentencepiece", "subword_model": "spm.model", "segmenters": {"zh": "stanford"}},
            "text_pipeline.json",
        )


def test_a_missing_segmenter_package_is_one_line_naming_it(monkeypatch):
    segment.segmenter.cache_clear()
    monkeypatch.setitem(sys.modules, "jieba", None)  # as if not installed: import fails
    try:
        with pytest.raises(UserError) as e:
            segment.segmenter("jieba")
        assert str(e.value) == (
            "segmenting 'zh' text needs jieba (the 'jieba' segmenter): pip install jieba  "
            "(or: pip install 'xlm-fairseq[zh]')"
        )
    finally:
        segment.segmenter.cache_clear()


def test_chinese_sample_round_trips_through_the_pipeline(tmp_path):
    """A data-bin of the written sample: jieba recorded in text_pipeline.json (and the manifest); text ->
    pieces -> text gives the text back (the normalised text: full-width punctuation becomes ASCII, as XLM's
    tokenize.sh does for zh)."""
    for lang, lines in (("zh", ZH), ("en", EN)):
        (tmp_path / f"train.en-zh.{lang}").write_text("".join(f"{x}\n" for x in lines * 20), encoding="utf-8")
    data = tmp_path / "bin"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "preprocess.prepare",
            data,
            "--langs",
            "en,zh",
            "--para",
            f"train:en-zh={tmp_path}/train.en-zh",
            "--vocab-size",
            "300",
            "--vocab-size-soft",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads((data / "text_pipeline.json").read_text())["segmenters"] == {"zh": "jieba"}
    assert json.loads((data / "manifest.json").read_text())["options"]["segmenters"] == {"zh": "jieba"}
    pipeline = load_pipeline([data])
    for text in ZH + ["打开文件", "在Linux系统上"]:
        pieces = pipeline.pieces(text, "zh")
        sp = pipeline.subword_model.sp
        assert all(sp.piece_to_id(p) != sp.unk_id() for p in pieces), pieces
        assert pipeline.detokenize(pieces, "zh") == text.replace("。", ".")
    assert pipeline.words("点击确定按钮以保存文件。", "zh")[:3] == ["点击", "确定", "按钮"]


def test_bleu_into_chinese_japanese_and_thai_counts_words_not_sentences():
    """With 13a a Chinese sentence is one token, so one wrong character scores 0; the zh tokeniser (and
    ja-mecab, and Thai's segmenter) score the words right."""
    ref, hyp = "这个程序在Linux系统上运行。", "这个程序在Linux系统上工作。"
    assert segment.corpus_bleu([hyp], [ref], "en").score == 0.0  # 13a: one word each
    assert segment.corpus_bleu([hyp], [ref], "zh").score > 50
    assert segment.corpus_bleu(["ファイルを保存しました。"], ["ファイルを保存します。"], "ja").score > 20
    assert segment.bleu_tokenize("ja") == "ja-mecab" and segment.bleu_tokenize("th") == "none"
    assert segment.corpus_bleu(["ผมรักภาษาไทยมาก"], ["ผมรักภาษาไทยมากๆ"], "th").score > 30
    # validation BLEU (translation_lm) into zh: the same tokenisation
    stats = bleu_stats(
        "mt_en-zh", [hyp], [ref], ["这个 程序 在 Linux 系统 上 工作 ."], ["这个 程序 在 Linux 系统 上 运行 ."]
    )
    meters = {f"_en-zh_{k.split(':')[1]}": type("M", (), {"sum": v}) for k, v in stats.items()}
    assert corpus_bleu_from_meters(meters, "en-zh") == round(segment.corpus_bleu([hyp], [ref], "zh").score, 2)


def test_lexicon_probe_words_of_scripts_with_combining_marks():
    from preprocess.lexicon import is_word

    assert is_word("ภาษาไทย") and is_word("ที่") and is_word("文件") and is_word("Datei") and is_word("e-mail")
    assert not is_word("42") and not is_word("-") and not is_word("a.b")
