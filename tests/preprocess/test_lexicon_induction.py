"""A lexicon from monolingual text alone (preprocess/lexicon.py, `xlm-fairseq-lexicon induce`) and the
word-by-word pairs made from it (recipes/train/word_by_word.py, `train.sh --unsupervised --lexicon`): found
again where the second language is a renaming of the first; on the real sample, above the gate; files,
bad input; and the larger unpaired text of recipes/data/make_unpaired.py holds no pair."""

import json
import random
import re
import sys

import pytest
from conftest import ROOT, in_process, refusals, run

from preprocess.lexicon import induce
from recipes.train.plan import parse_lexicon
from recipes.train.word_by_word import code_switched, word_by_word
from recipes.train.word_by_word import main as word_by_word_main

DOCS = ROOT / "recipes" / "data" / "en-de-docs"
SHARED = ROOT.parent / "shared" / "data"


def _name(prefix, i):
    return prefix + "".join("abcdefghijklmnopqrstuvwxyz"[int(d)] for d in f"{i:03d}")


def _texts(n_sentences=6000, n_words=300, n_anchors=60, seed=0):
    """Two languages that are one Markov chain over words (each word has 4 likely successors),
    sampled apart; the second renames every word but the anchors, which are spelled alike."""
    rng = random.Random(seed)
    successors = [rng.sample(range(n_words), 4) for _ in range(n_words)]
    weights = [0.5, 0.25, 0.15, 0.1]

    def sentences():
        out = []
        for _ in range(n_sentences):
            w = rng.randrange(n_words)
            words = [w]
            for _ in range(11):
                w = rng.choices(successors[w], weights)[0] if rng.random() < 0.9 else rng.randrange(n_words)
                words.append(w)
            out.append(words)
        return out

    anchors = set(rng.sample(range(n_words), n_anchors))
    first = [_name("anchor" if w in anchors else "ka", w) for w in range(n_words)]
    second = [_name("anchor" if w in anchors else "zu", w) for w in range(n_words)]
    lines_a = [" ".join(first[w] for w in s) + " ." for s in sentences()]
    lines_b = [" ".join(second[w] for w in s) + " ." for s in sentences()]
    return lines_a, lines_b, dict(zip(first, second))


def test_lexicon_of_a_renamed_language_is_found_again():
    """Seeded by the anchors alone, self-learning finds the renamed words: ≥ 90 % of the non-anchor
    words of the first language get their own name in the second, and back; seeded by nothing it
    cannot start."""
    lines_a, lines_b, truth = _texts()
    induced = induce("xa", lines_a, "xb", lines_b)
    to_b, to_a = induced.translations(), induced.translations(reverse=True)
    assert 50 <= induced.seeds <= 60  # the anchors of similar frequency rank in both texts
    renamed = [w for w in truth if not w.startswith("anchor") and w in to_b]
    assert len(renamed) == 240
    right = sum(to_b[w] == truth[w] for w in renamed)
    back = sum(to_a[truth[w]] == w for w in renamed)
    assert right >= 0.9 * len(renamed) and back >= 0.9 * len(renamed), (right, back)


# software words in a script without spaces, each the translation of the English word at its place; Japanese
# text gets a particle between words, as real text has (MeCab joins a run of katakana words into one)
UNSPACED = {
    "zh": (
        "jieba",
        "",
        "文件 打开 保存 关闭 窗口 菜单 按钮 用户 密码 系统 程序 文本 图像 目录 打印 复制 删除 编辑 查看 帮助",
    ),
    "ja": (
        "mecab",
        "の",
        "ファイル 開く 保存 閉じる ウィンドウ メニュー ボタン ユーザー パスワード システム プログラム テキスト 画像 "
        "フォルダー 印刷 コピー 削除 編集 表示 ヘルプ",
    ),
    "th": (
        "pythainlp",
        "",
        "ไฟล์ เปิด บันทึก ปิด หน้าต่าง เมนู ปุ่ม ผู้ใช้ รหัสผ่าน ระบบ โปรแกรม ข้อความ รูปภาพ โฟลเดอร์ พิมพ์ คัดลอก ลบ แก้ไข ดู ช่วยเหลือ",
    ),
}
ENGLISH = "file open save close window menu button user password system program text image folder print copy delete "
ENGLISH += "edit view help"
ANCHORS = "linux gnu usb pdf html xml http ssh gtk kde".split()


def _unspaced_texts(lang, n_sentences=3000, seed=0):
    """English and ``lang`` sampled apart from one Markov chain over 20 words and 10 anchors spelled alike,
    ``lang`` written without spaces: (English lines, lines in lang, {English word: its translation})."""
    _, joiner, words = UNSPACED[lang]
    english, other = ENGLISH.split() + ANCHORS, words.split() + ANCHORS
    rng = random.Random(seed)
    n = len(english)
    successors = [rng.sample(range(n), 3) for _ in range(n)]

    def sentences():
        for _ in range(n_sentences):
            w, out = rng.randrange(n), []
            for _ in range(10):
                out.append(w)
                w = rng.choices(successors[w], (0.6, 0.25, 0.15))[0] if rng.random() < 0.9 else rng.randrange(n)
            yield out

    lines_en = [" ".join(english[w] for w in s) + " ." for s in sentences()]
    # Latin words keep spaces around them, as they do in such text ("Linux 系统")
    lines_other = [
        joiner.join(f" {x} " if x in ANCHORS else x for x in (other[w] for w in s)) + "。" for s in sentences()
    ]
    return lines_en, lines_other, dict(zip(ENGLISH.split(), words.split()))


@pytest.mark.parametrize("lang", sorted(UNSPACED))
def test_lexicon_of_a_script_without_spaces_reads_its_segmenters_words(lang):
    """train.sh --unsupervised --lexicon on zh, ja or th text (recipes/train/corpus.py): the lexicon is induced on
    the stored segmenter's words, so it finds the words' translations, and the word-by-word pairs are made of
    those words; read between spaces, a line is one token and next to nothing is found."""
    from recipes.train.corpus import lexicon_text

    name = UNSPACED[lang][0]
    lines_en, lines_other, truth = _unspaced_texts(lang)
    pairs, _, lexicons, agrees = lexicon_text(
        {"en": lines_en, lang: lines_other}, [("en", lang)], ("tlm",), [], {lang: name}
    )
    to_other = lexicons[("en", lang)].translations()
    right = [w for w in truth if to_other.get(w) == truth[w]]
    assert len(right) >= 0.8 * len(truth), (lang, {w: to_other.get(w) for w in truth})
    assert min(agrees[("en", lang)]) >= 50  # the words come back to themselves
    (made,) = pairs.values()
    translated = made.tgt_lines[0].split()  # the first English line, word by word into lang
    assert translated[:3] == [truth.get(w, w) for w in lines_en[0].split()[:3]]
    spaced = lexicon_text({"en": lines_en, lang: lines_other}, [("en", lang)], ("tlm",), [])[2][("en", lang)]
    unsegmented = spaced.translations()
    assert sum(unsegmented.get(w) == truth[w] for w in truth) <= 2


def test_piece_embeddings_put_a_word_beside_its_translation(tmp_path):
    """--lexicon emb's rows (recipes/train/lexicon_embeddings.py) on a real data-bin of the renamed language: a
    word that is one piece is nearest, among the other language's one-piece words, to its own translation."""
    import torch

    from recipes.train.lexicon_embeddings import write_piece_embeddings
    from xlm_fairseq.data.dictionary import load_dictionary

    lines_a, lines_b, truth = _texts(n_sentences=3000)
    for lang, lines in (("xa", lines_a), ("xb", lines_b)):
        (tmp_path / f"mono.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    data = tmp_path / "bin"
    run(
        [
            sys.executable,
            "-m",
            "preprocess.prepare",
            data,
            "--langs",
            "xa,xb",
            "--vocab-size",
            "700",
            "--quiet",
            "--mono",
            f"train:xa={tmp_path}/mono.xa",
            "--mono",
            f"train:xb={tmp_path}/mono.xb",
        ]
    )
    rows = write_piece_embeddings(induce("xa", lines_a, "xb", lines_b), data, 32, tmp_path / "emb.pt")
    weights = torch.load(tmp_path / "emb.pt")
    index = load_dictionary(str(data)).indices
    assert weights.shape == (len(index), 32) and weights.isnan().any(1).sum() == len(index) - rows
    pairs = [
        (index["\u2581" + a], index["\u2581" + b])
        for a, b in truth.items()
        if not a.startswith("anchor") and "\u2581" + a in index and "\u2581" + b in index
    ]
    assert len(pairs) >= 200, len(pairs)
    a, b = (weights[[p[i] for p in pairs]] for i in (0, 1))
    nearest = (a @ b.T).argmax(1)
    right = (nearest == torch.arange(len(pairs))).float().mean().item()
    assert right >= 0.5, right


def test_piece_embeddings_are_whitened_alike_for_both_languages():
    """--lexicon emb's rows have one variance in every direction and unit norm, and one linear map does it: a
    piece whose vector is the same in both languages keeps the same row, two rows' order of nearness to a third
    is what their centred, whitened vectors make it."""
    import torch

    from recipes.train.lexicon_embeddings import whitened

    g = torch.Generator().manual_seed(0)
    rows = torch.randn(500, 16, generator=g) @ torch.diag(torch.logspace(1, -1, 16))  # anisotropic
    rows = torch.cat([rows, rows[:5]])  # five pieces of one vector twice (a word in both languages)
    white = whitened(rows)
    assert torch.allclose(white.norm(dim=1), torch.ones(len(rows)), atol=1e-5)
    assert torch.allclose(white[:5], white[-5:], atol=1e-6)
    s = torch.linalg.svdvals(white - white.mean(0))
    assert s.max() / s.min() < 1.5  # against 100 before
    few = whitened(rows[:8])  # fewer rows than dimensions
    assert few.shape == (8, 16) and torch.allclose(few.norm(dim=1), torch.ones(8), atol=1e-5)


def test_nothing_spelled_alike_is_one_clear_error():
    lines_a, lines_b, _ = _texts(n_sentences=300, n_anchors=0)
    try:
        induce("xa", lines_a, "xb", [line.replace(".", "!") for line in lines_b])
    except ValueError as e:
        assert "share 0 tokens of similar frequency" in str(e)
    else:
        raise AssertionError("induced a lexicon from no seed")


@pytest.mark.slow  # 45 s of one worker; the fast tier: the induction on planted texts above, the command's bad input
def test_induce_on_the_sample_finds_frequent_words(tmp_path):
    """`xlm-fairseq-lexicon induce` on the quickstart's --unsupervised text (the sample's monolingual files and
    the English of the first half of its pairs, the German of the second): MUSE-format lexicons both ways
    and a record; CSLS P@1 on the shared de-en dictionary among the 1,000 most frequent words at the gate
    of 20 % (28.9 % measured; chance 0.1 %, the quickstart's LMs ~3 %)."""
    for lang, half in (("en", slice(0, 10000)), ("de", slice(10000, None))):
        lines = (DOCS / f"mono.{lang}").read_text(encoding="utf-8").splitlines()
        lines += (DOCS / f"train.en-de.{lang}").read_text(encoding="utf-8").splitlines()[half]
        (tmp_path / f"text.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    out = tmp_path / "lex"
    cmd = [
        sys.executable,
        "-m",
        "xlm_fairseq.evaluation.lexicon",
        "induce",
        "--mono",
        f"de={tmp_path}/text.de",
        "--mono",
        f"en={tmp_path}/text.en",
        "--out",
        out,
        "--dict",
        SHARED / "bli" / "de-en.dev.txt",
    ]
    proc = run(cmd)
    assert re.match(r"lexicon de-en: seeded by \d+ strings spelled alike", proc.stdout), proc.stdout
    record = json.loads((out / "lexicon.json").read_text())
    frequent = record["precision"]["1000"]
    assert frequent["queries"] >= 90 and frequent["csls_p@1"] >= 20, record["precision"]
    table = dict(line.split() for line in (out / "lexicon.de-en.txt").read_text(encoding="utf-8").splitlines())
    assert table["datei"] == "file" and len(table) > 5000
    back = dict(line.split() for line in (out / "lexicon.en-de.txt").read_text(encoding="utf-8").splitlines())
    assert back["file"] == "datei"
    again = run(cmd, ok=False)  # a second run into the same directory overwrites nothing
    assert again.returncode == 2 and "holds a lexicon already (--out)" in again.stderr
    assert json.loads((out / "lexicon.json").read_text()) == record


def test_induce_bad_input_is_one_line(tmp_path, capsys):
    from xlm_fairseq.evaluation.lexicon import main

    (tmp_path / "a.txt").write_text("eins zwei\n")
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe\n")
    (tmp_path / "three.txt").write_text("eins zwei drei\n")
    a = f"de={tmp_path / 'a.txt'}"
    for args, message in (
        (["--mono", a, "--mono", f"en={tmp_path / 'none.txt'}"], "none.txt: no such file (--mono)"),
        (["--mono", a, "--mono", f"en={tmp_path / 'bad.txt'}"], "bad.txt: invalid UTF-8"),
        (["--mono", a], "--mono: a lexicon is between two languages, got 1 (de)"),
        (["--mono", a, "--mono", str(tmp_path / "a.txt")], "--mono: expected LANG=FILE"),
        (["--mono", a, "--mono", a], "--mono: de given twice"),
        (
            ["--mono", a, "--mono", f"en={tmp_path / 'a.txt'}", "--dict", tmp_path / "three.txt"],
            "expected 'source target'",
        ),
        (["--mono", a, "--mono", f"en={tmp_path / 'a.txt'}", "--words", "0"], "--words: expected a number >= 1"),
    ):
        status, err = in_process(main, ["induce", *args, "--out", tmp_path / "o"], capsys)
        lines = err.strip().splitlines()
        assert status == 2 and len(lines) == 1 and message in lines[0], err
        assert lines[0].startswith("lexicon induce: error: ") and not (tmp_path / "o").exists()


# the sample's unpaired text with --unsupervised: its --plan runs the two uses of a lexicon read as text
SAMPLE_ARGS = [
    "--pairs",
    f"en-de={DOCS}/train.en-de",
    "--mono",
    f"en={DOCS}/mono.en",
    "--mono",
    f"de={DOCS}/mono.de",
    "--valid",
    f"en-de={DOCS}/valid.en-de",
    "--test",
    f"en-de={DOCS}/test.en-de",
]


@pytest.fixture(scope="module")
def sample_plan(tmp_path_factory):
    """`train.sh --unsupervised --lexicon tlm,cs --plan` on the sample (the command line) and the text it
    prepares (in this process): one induction each, for the tests of both uses. (work dir, the command's
    output, the prepared text)"""
    from recipes.train import corpus
    from recipes.train.cli import build_parser
    from recipes.train.inputs import Inputs

    work = tmp_path_factory.mktemp("sample_plan") / "w"
    base = [*SAMPLE_ARGS, "--work-dir", work, "--unsupervised", "--lexicon", "tlm,cs"]
    proc = run([sys.executable, "-m", "recipes.train", *base, "--plan"])
    args = build_parser().parse_args(list(map(str, base)))
    return work, proc, corpus.prepared_text(Inputs(args), args, parse_lexicon(args.lexicon))


@pytest.mark.slow  # two inductions on the sample (shared with the code-switching test); the induction itself:
# test_induce_on_the_sample_finds_frequent_words
def test_train_plans_tlm_on_word_by_word_pairs_with_lexicon(sample_plan, tmp_path):
    """`train.sh --unsupervised --lexicon --plan`: TLM joins MLM in pretraining, the pairs are the unpaired
    lines beside their word-by-word translations (no real pair), sizes come from the real text; nothing is
    written; --lexicon without --unsupervised is refused."""
    work, proc, text = sample_plan
    assert "TLM on word-by-word pairs" in proc.stdout and "of a lexicon induced from the unpaired text" in proc.stdout
    assert re.search(r"lexicon en-de: \d+ en and \d+ de words from the unpaired text", proc.stdout), proc.stdout
    assert not work.exists()
    (pairs,) = text["train"].values()
    real = set(zip(*((DOCS / f"train.en-de.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("en", "de"))))
    assert len(pairs) == len(text["mono"]["en"]) + len(text["mono"]["de"])
    assert pairs.src_lines[: len(text["mono"]["en"])] == text["mono"]["en"]
    assert not real & set(zip(pairs.src_lines, pairs.tgt_lines))
    base = [*SAMPLE_ARGS, "--work-dir", tmp_path / "w", "--lexicon", "tlm", "--plan"]
    refused = run([sys.executable, "-m", "recipes.train", *base], ok=False)
    assert refused.returncode == 2 and "--lexicon goes with --unsupervised" in refused.stderr


def test_plan_feeds_the_word_by_word_pairs_where_asked():
    """--lexicon tlm: TLM joins MLM; mt: MT on them fades out with AE; neither: the pairs are not read."""
    from recipes.train.plan import make_plan

    words = {"en": 300_000, "de": 300_000}

    def plan(uses):
        return make_plan(["de", "en"], [("en", "de")], "unsupervised", False, 30, "bf16", words, 200, lexicon=uses)

    assert plan(()).mlm_steps() == "de,en" and "--mt-steps" not in plan(()).objectives()
    assert plan(("cs",)).mlm_steps() == "de,en" and "--mt-steps" not in plan(("cs",)).objectives()
    line = plan(("tlm", "cs", "emb")).lexicon_line()
    assert line == (
        "; TLM on word-by-word pairs and MLM on code-switched lines and piece embeddings from the word "
        "vectors of a lexicon induced from the unpaired text"
    )
    assert plan(("tlm",)).mlm_steps() == "de,en,en-de" and "--mt-steps" not in plan(("tlm",)).objectives()
    both = plan(("tlm", "mt")).objectives()
    assert both[both.index("--mt-steps") + 1] == "en-de,de-en"
    assert both[both.index("--lambda-mt") + 1] == both[both.index("--lambda-ae") + 1] == "0:1,1200:0.1,2400:0"


def test_word_by_word_keeps_what_it_does_not_translate():
    dictionary = {"datei": "file", "öffnen": "open"}
    assert word_by_word("Datei öffnen: /etc/fstab (3 Mal)!", dictionary) == "file open : / etc / fstab ( 3 Mal ) !"


def test_code_switching_replaces_the_asked_share_of_translatable_words_in_place():
    dictionary = {"datei": "file", "öffnen": "open", "die": "the"}
    line = "Die Datei öffnen: /etc/fstab (3 Mal)!"
    assert code_switched(line, dictionary, 0.0, random.Random(0)) == line
    assert code_switched(line, dictionary, 1.0, random.Random(0)) == "the file open: /etc/fstab (3 Mal)!"
    rng = random.Random(0)
    switched = sum(code_switched("die Datei", dictionary, 0.25, rng).split() != ["die", "Datei"] for _ in range(400))
    assert 130 < switched < 220  # 1 - 0.75**2 of 400 lines have a word switched: 175 expected


@pytest.mark.slow  # the inductions of the fixture above
def test_train_plans_mlm_on_code_switched_copies_with_lexicon_cs(sample_plan, tmp_path):
    """`--lexicon cs`: every unpaired line gets a code-switched copy after the real lines of its language
    (for MLM); the plan's sizes come from the real text; an unknown use is refused."""
    _, proc, text = sample_plan
    assert "MLM on code-switched lines" in proc.stdout, proc.stdout
    assert re.search(r"lexicon en-de: .*\d+ lines code-switched, \d+ s", proc.stdout), proc.stdout
    for lang in ("en", "de"):
        real, switched = text["mono"][lang], text["switched"][lang]
        assert len(switched) == len(real)
        changed = sum(a != b for a, b in zip(real, switched))
        assert 0.3 * len(real) < changed < len(real), (lang, changed)
    base = [*SAMPLE_ARGS, "--work-dir", tmp_path / "w", "--unsupervised", "--plan"]
    refused = run([sys.executable, "-m", "recipes.train", *base, "--lexicon", "tlm,xx"], ok=False)
    assert refused.returncode == 2 and "--lexicon tlm,xx: expected some of tlm, mt, cs, emb" in refused.stderr
    ro = ROOT / "recipes" / "data" / "en-ro"
    two = ["--pairs", f"en-ro={ro}/train.en-ro", "--mono", f"ro={ro}/mono.ro", "--lexicon", "emb"]
    refused = run([sys.executable, "-m", "recipes.train", *base, *two], ok=False)
    assert refused.returncode == 2 and "--lexicon emb: one pair and no --lm" in refused.stderr


def test_code_switching_alone_makes_no_pairs():
    """--lexicon cs alone: code-switched copies of every unpaired line, no word-by-word pairs."""
    from recipes.train.corpus import lexicon_text

    lines_a, lines_b, _ = _texts(n_sentences=3000)
    pairs, switched, lexicons, _ = lexicon_text({"xa": lines_a, "xb": lines_b}, [("xa", "xb")], ("cs",), [])
    assert pairs == {} and set(lexicons) == {("xa", "xb")}
    assert len(switched["xa"]) == len(lines_a) and len(switched["xb"]) == len(lines_b)


def test_the_command_writes_each_line_beside_its_translation(tmp_path):
    lines_a, lines_b, truth = _texts(n_sentences=3000)
    (tmp_path / "mono.xa").write_text("".join(line + "\n" for line in lines_a))
    (tmp_path / "mono.xb").write_text("".join(line + "\n" for line in lines_b))
    out = tmp_path / "pseudo"
    proc = run(
        [
            sys.executable,
            "-m",
            "recipes.train.word_by_word",
            "--mono",
            tmp_path / "mono.xa",
            "--mono",
            tmp_path / "mono.xb",
            "--langs",
            "xa,xb",
            "--out",
            out,
        ]
    )
    assert re.fullmatch(
        r"lexicon: 300 xa and 300 xb words, map seeded by \d\d spelled alike \(.*\); 6000 "
        r"word-by-word pairs in \d+ s\n",
        proc.stdout,
    ), proc.stdout
    a, b = (out.with_suffix(f".{lang}").read_text().splitlines() for lang in ("xa", "xb"))
    assert a[:3000] == lines_a and b[3000:] == lines_b  # one side of every pair is a real line
    translated = [w for line in b[:3000] for w in line.split() if w != "."]
    assert sum(w in truth.values() for w in translated) >= 0.9 * len(translated)


def test_bad_input_is_one_line(tmp_path, capsys):
    """The first refusal through the command, the others through its main in this process."""
    (tmp_path / "a.txt").write_text("eins zwei\n")
    cases = (
        (["--mono", tmp_path / "a.txt", "--mono", tmp_path / "none.txt", "--langs", "en,de"], "none.txt"),
        (["--mono", tmp_path / "a.txt", "--langs", "en,de"], "--langs: two different languages, one --mono each"),
        (["--mono", tmp_path / "a.txt", "--mono", tmp_path / "a.txt", "--langs", "en,en"], "--langs"),
    )
    argvs = [[*args, "--out", tmp_path / "p"] for args, _ in cases]
    command = [sys.executable, "-m", "recipes.train.word_by_word"]
    refused = refusals(argvs, lambda argv: run([*command, *argv], ok=False), word_by_word_main, capsys)
    for (_, message), (status, err) in zip(cases, refused):
        lines = err.strip().splitlines()
        assert status != 0 and message in lines[-1] and not list(tmp_path.glob("p.*")), err
        assert len(lines) == 1 or lines[0].startswith("usage:"), err


def test_unpaired_text_holds_no_pair_and_no_held_out_line(tmp_path):
    """recipes/data/make_unpaired.py on the shared corpus: no training pair of the sample has its
    English in unpaired.en and its German in unpaired.de, no line of the sample's valid or test files
    is in either, and the English man pages only come with --manpages both."""
    proc = run([sys.executable, ROOT / "recipes/data/make_unpaired.py", "--out", tmp_path, SHARED])
    assert "unpaired.en: 56,384 lines" in proc.stdout, proc.stdout
    en, de = (set((tmp_path / f"unpaired.{lang}").read_text(encoding="utf-8").splitlines()) for lang in ("en", "de"))
    pairs = zip(*((DOCS / f"train.en-de.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("en", "de")))
    assert not [(e, d) for e, d in pairs if e in en and d in de]
    for split in ("valid", "test"):
        for lang, text in (("en", en), ("de", de)):
            held = {line.lower() for line in (DOCS / f"{split}.en-de.{lang}").read_text(encoding="utf-8").splitlines()}
            assert not [line for line in text if line.lower() in held], (split, lang)
    manpage = (SHARED / "mono/manpages.en").read_text(encoding="utf-8").splitlines()[0]
    assert manpage not in en


def test_lever_table_is_made_from_the_records(tmp_path):
    """`python -m recipes.experiments.lexicon --levers`: the committed --unsupervised reports of both pairs as one
    row each and the median of each pair, --lexicon use, precision and machine beside copying; reports written before
    they named their uses read as TLM where their notes say so; runs that read pairs are left out."""
    results = ROOT / "recipes" / "results"
    records = sorted(results.glob("train-2026-12-04-quickstart-unsupervised*.json"))
    records += sorted(results.glob("train-2026-12-06-enro-mono-*.json"))
    semi = results / "train-2026-12-03-enro-semi.json"
    proc = run(
        [
            sys.executable,
            "-m",
            "recipes.experiments.lexicon",
            "--levers",
            *records,
            semi,
            "--figure",
            tmp_path / "levers.png",
        ]
    )
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and ".json" in line]
    assert len(rows) == len(records) and semi.name not in proc.stdout
    xeon, amd = "Intel(R) Xeon(R) Processor x 2", "AMD EPYC x 2"
    none = (
        f"| de-en | none | bf16/bf16 | {xeon} | `train-2026-12-04-quickstart-unsupervised.json` | 28.1 | 9931 / 4520 | "
    )
    assert none + "de-en 3.50 (1.51) · en-de 2.81 (1.51) |" in proc.stdout
    assert f"| de-en | none | bf16/bf16 | {xeon} | 1 | de-en 3.50 (+1.99) · en-de 2.81 (+1.30) |" in proc.stdout
    assert re.search(r"\| de-en \| tlm \| bf16/bf16 \| [^|]+ \| [23] \| de-en 5\.\d\d \(\+", proc.stdout), proc.stdout
    assert re.search(r"\| de-en \| emb \| bf16/bf16 \| [^|]+ \| 3 \| de-en \d+\.\d\d \(\+", proc.stdout), proc.stdout
    fp32 = f"| de-en | emb | fp32/fp32 | {xeon} | 3 | de-en 5.43 (+3.92) · en-de 3.70 (+2.19) |"  # three fp32 runs
    assert fp32 in proc.stdout
    assert f"| en-ro | emb | bf16/bf16 | {amd} | 1 | en-ro 5.29 (+3.56) · ro-en 7.06 (+5.33) |" in proc.stdout
    assert (tmp_path / "levers.png").stat().st_size > 10_000
