"""recipes/train.sh, the one command for any languages: its held-out splits, its plan, every bad input
refused in seconds with one line (nothing written), and (slow) end to end on the shipped en-ro stand-in and on
a Chinese sample this test writes (no Chinese text ships with the project)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SAMPLE, SHARED, refusals

from preprocess.errors import UserError
from recipes.train import corpus
from recipes.train.cli import main as train_main
from recipes.train.corpus import Pairs
from recipes.train.plan import SIZES, choose_size, choose_vocab, make_plan

ENRO = SAMPLE / "en-ro"


def _train(*args, env_extra=None, timeout=1200):
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", PYTHON=sys.executable)
    env.update(env_extra or {})
    return subprocess.run(
        ["bash", ROOT / "recipes" / "train.sh", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
    )


def _write(path, lines):
    Path(path).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------
# the text: held-out splits, no sentence in two splits, no hidden pair without supervision
# ------------------------------------------------------------------------------------------------


def _numbered(n, src="en", tgt="ro"):
    return Pairs(src, tgt, [f"s{i}" for i in range(n)], [f"t{i}" for i in range(n)])


def test_held_out_sets_are_blocks_of_consecutive_lines_spread_over_the_text():
    pairs = _numbered(10000)
    train, valid, test = corpus.split_held_out(pairs, True, True)
    assert (len(valid), len(test)) == (250, 500)  # 2.5 % and 5 %
    assert len(train) == 10000 - 750
    for held in (valid, test):
        numbers = [int(s[1:]) for s in held.src_lines]
        starts = [n for n in numbers if n - 1 not in numbers]
        assert all(
            numbers[i + 1] == numbers[i] + 1 for i in range(len(numbers) - 1) if numbers[i + 1] - numbers[i] < 50
        )
        assert len(starts) == len(numbers) // corpus.BLOCK and starts[-1] > 5000  # blocks over the whole text
    assert not set(valid.src_lines) & set(test.src_lines) and not set(train.src_lines) & set(test.src_lines)
    assert corpus.split_held_out(pairs, True, True)[2].src_lines == test.src_lines  # deterministic
    assert len(corpus.split_held_out(_numbered(100000), True, True)[2]) == 1000  # at most 1,000
    _, none, given = corpus.split_held_out(pairs, False, True, cap=100)
    assert none is None and len(given) == 100
    with pytest.raises(UserError, match="too few to split off valid and test sets"):
        corpus.split_held_out(_numbered(150), True, True)


def test_training_text_keeps_no_sentence_of_a_held_out_set():
    train = Pairs("en", "ro", ["a", "b", "c", "d"], ["A", "B", "C", "D"])
    held = Pairs("en", "ro", ["b ", "x"], ["X", "D"])  # "b" on the source side, "D" on the target side
    kept, dropped = corpus.keep_out(train, [held])
    assert (kept.src_lines, kept.tgt_lines, dropped) == (["a", "c"], ["A", "C"], 2)


def test_training_text_keeps_no_held_out_sentence_of_another_pair(tmp_path):
    """Three languages: an English sentence of the en-de test set is no English side of an en-ro training pair."""
    from recipes.train.cli import build_parser
    from recipes.train.corpus import prepared_text
    from recipes.train.inputs import Inputs

    en = [f"sentence {i}" for i in range(400)]
    _write(tmp_path / "a.en", en), _write(tmp_path / "a.de", [f"Satz {i}" for i in range(400)])
    _write(tmp_path / "b.en", en[::-1]), _write(tmp_path / "b.ro", [f"propoziția {i}" for i in range(400)])
    argv = ["--pairs", f"en-de={tmp_path}/a", "--pairs", f"en-ro={tmp_path}/b", "--work-dir", tmp_path / "w"]
    args = build_parser().parse_args(list(map(str, argv)))
    text = prepared_text(Inputs(args), args)
    held = {s for split in ("valid", "test") for p in text[split].values() for s in p.side("en")}
    assert 50 <= len(held) <= 60  # 2.5 % and 5 % of each pair: 10 + 20 lines each
    for pairs in text["train"].values():
        assert not held & set(pairs.side("en"))
    assert not set(text["test"][("en", "de")].side("en")) & set(text["valid"][("en", "ro")].side("en"))


def test_unpaired_text_keeps_no_pair():
    """Without supervision: the English of the pairs' first half, the German of the second, and no German
    line whose translation (anywhere in the pairs) is on the English side: "Datei" recurs in the second
    half as the translation of "file", which is in the first."""
    pairs = Pairs(
        "en",
        "de",
        ["file", "open", "save", "file", "close", "quit"],
        ["Datei", "öffnen", "speichern", "Datei", "schließen", "beenden"],
    )
    text, dropped = corpus.unpaired({"en": ["mono one"], "de": ["Mono eins"]}, [pairs])
    assert text["en"] == ["mono one", "file", "open", "save"]
    assert text["de"] == ["Mono eins", "schließen", "beenden"] and dropped == {"de": 1}
    assert corpus.unpaired_leaks(text, [pairs]) == 0


def test_unpaired_text_of_three_languages_keeps_no_pair_through_a_shared_language():
    """English takes the first halves of both corpora; a German line is dropped when its English
    translation came from the en-ro corpus, not only from its own."""
    ende = Pairs("en", "de", ["one", "two", "three", "four"], ["eins", "zwei", "drei", "vier"])
    enro = Pairs("en", "ro", ["three", "five", "six", "seven"], ["trei", "cinci", "șase", "șapte"])
    text, dropped = corpus.unpaired({}, [ende, enro])
    assert text["en"] == ["one", "two", "three", "five"]
    assert text["de"] == ["vier"] and dropped == {"de": 1, "ro": 0}  # "drei" translates "three" of en-ro's half
    assert text["ro"] == ["șase", "șapte"]
    assert corpus.unpaired_leaks(text, [ende, enro]) == 0


@pytest.mark.skipif(
    not (SHARED / "en-ro" / "docs.natural.en").is_file(), reason="../shared/data not beside the checkout"
)
def test_real_en_ro_text_split_shares_no_sentence_and_hides_no_pair(tmp_path):
    """On the shared en-ro corpus (what the committed runs used): no sentence in two splits, and the
    unsupervised text holds no pair of the corpus."""
    from recipes.train.cli import build_parser
    from recipes.train.corpus import prepared_text
    from recipes.train.inputs import Inputs

    s = SHARED / "en-ro"
    for unsupervised in (False, True):
        argv = ["--pairs", f"en-ro={s}/docs.natural", "--work-dir", tmp_path / "w"] + ["--unsupervised"] * unsupervised
        args = build_parser().parse_args(list(map(str, argv)))
        text = prepared_text(Inputs(args), args)
        test, valid = text["test"][("en", "ro")], text["valid"][("en", "ro")]
        for lang in ("en", "ro"):
            held = {x.strip() for x in test.side(lang)}
            assert not held & {x.strip() for x in valid.side(lang)}
            assert not held & {x.strip() for x in text["mono"][lang]}
            for pairs in text["train"].values():
                assert not held & {x.strip() for x in pairs.side(lang)}
        if unsupervised:
            assert not text["train"]
            assert corpus.unpaired_leaks(text["mono"], [Inputs(args).pairs[("en", "ro")]]) == 0


# ------------------------------------------------------------------------------------------------
# the plan: what the scaling sweep found, from the text's size and the minutes
# ------------------------------------------------------------------------------------------------


def test_plan_gives_the_quickstart_its_tuned_settings():
    """At the quickstart's size and half hour: 128 x 3, 4,000 pieces, 6.6 + 19.2 minutes (7.2 + 20.4
    without pairs, translation at twice the rate); --tiny: 64 x 2; an hour of four times the text: a
    larger vocabulary."""
    words = {"en": 450_000, "de": 450_000}
    semi = make_plan(["de", "en"], [("en", "de")], "semi", False, 30, "fp32", words, 200)
    assert (semi.size.dim, semi.size.layers, semi.vocab) == (128, 3, 4000)
    assert (semi.pretrain_hours * 60, semi.translate_hours * 60) == pytest.approx((6.6, 19.2))
    assert semi.mlm_steps() == "de,en,en-de"
    assert semi.objectives()[:2] == ["--mt-steps", "en-de,de-en"] and "en-de-en,de-en-de" in semi.objectives()
    unsup = make_plan(["de", "en"], [("en", "de")], "unsupervised", False, 30, "fp32", words, 200)
    assert (unsup.pretrain_hours * 60, unsup.translate_hours * 60) == pytest.approx((7.2, 20.4))
    assert unsup.mlm_steps() == "de,en" and "--mt-steps" not in unsup.objectives()
    assert (semi.size.lr, semi.translate_lr, unsup.translate_lr) == (1e-3, 1e-3, 2e-3)  # translation without pairs
    tiny = make_plan(["de", "en"], [("en", "de")], "semi", True, 30, "fp32", {"en": 45_000, "de": 45_000}, 200)
    assert (tiny.size.dim, tiny.size.layers) == (64, 2)
    big = make_plan(
        ["de", "en", "ro"],
        [("en", "de"), ("en", "ro")],
        "semi",
        False,
        240,
        "fp32",
        {k: 1_200_000 for k in ("en", "de", "ro")},
        300,
    )
    assert big.vocab == 8000 and (big.size.dim, big.size.layers) == (192, 4)
    assert big.directions == [("en", "de"), ("de", "en"), ("en", "ro"), ("ro", "en")]


def test_plan_sizes_follow_tokens_per_parameter_and_the_text():
    assert choose_size(6.6, 1.3e6)[0] == SIZES[1]
    assert choose_size(1.2, 1.3e6)[0] == SIZES[0]  # too few tokens per parameter for 128 x 3
    assert choose_size(60, 0.2e6)[0] == SIZES[0]  # too little text for more parameters
    assert choose_vocab(10_000, 80) == 1000 and choose_vocab(900_000, 4500) == 4600  # a piece per character


# ------------------------------------------------------------------------------------------------
# bad input: one line, exit 2, in seconds, nothing written
# ------------------------------------------------------------------------------------------------


def _bad_cases(tmp_path):
    _write(tmp_path / "short.en", ["a", "b"])
    _write(tmp_path / "short.ro", ["a"])
    (tmp_path / "latin1.en").write_bytes(b"caf\xe9\n")
    (tmp_path / "latin1.ro").write_bytes(b"cafe\n")
    _write(tmp_path / "blank.en", ["", " "])
    _write(tmp_path / "blank.ro", ["x", "y"])
    file_dir = _write(tmp_path / "a-file", ["x"])
    ok = ["--pairs", f"en-ro={ENRO}/train.en-ro"]
    return {
        "a missing file": ([*ok, "--mono", f"ro={tmp_path}/none.ro"], f"--mono: {tmp_path}/none.ro: no such file"),
        "pairs of unequal length": (
            ["--pairs", f"en-ro={tmp_path}/short"],
            f"--pairs: {tmp_path}/short.en has 2 lines, {tmp_path}/short.ro 1: not line-aligned",
        ),
        "not UTF-8": (
            ["--pairs", f"en-ro={tmp_path}/latin1"],
            f"--pairs: {tmp_path}/latin1.en: not UTF-8 text (line 1, byte 4)",
        ),
        "a blank file": (
            ["--pairs", f"en-ro={tmp_path}/blank"],
            f"--pairs: {tmp_path}/blank.en: no text (empty or blank lines only)",
        ),
        "a language of --langs without text": (
            [*ok, "--langs", "en,ro,de"],
            "--langs: no text in de (give --pairs or --mono for it)",
        ),
        "a file in a language not of --langs": (
            [*ok, "--langs", "en,de"],
            "--pairs: language 'ro' is not in --langs en,de",
        ),
        "a language in no pair": (
            [*ok, "--mono", f"de={SAMPLE}/en-de/mono.de"],
            "--mono de: a language in no pair has no direction to translate (add --pairs)",
        ),
        "no parallel text": (
            ["--mono", f"ro={ENRO}/mono.ro"],
            "--pairs: no parallel text; give --pairs SRC-TGT=PREFIX, or --unsupervised to train from --mono text alone",
        ),
        "--unsupervised with text in one language": (
            ["--unsupervised", "--mono", f"ro={ENRO}/mono.ro"],
            "--mono: text in ro only; translation needs two languages",
        ),
        "--test of languages without text": (
            ["--unsupervised", "--mono", f"ro={ENRO}/mono.ro", "--mono", f"en={SAMPLE}/en-de/mono.en"]
            + ["--test", f"en-de={SAMPLE}/en-de/test.en-de"],
            f"--test 'en-de={SAMPLE}/en-de/test.en-de': no --mono text of both en and de to go with it",
        ),
        "an unknown lexicon use": (
            ["--unsupervised", *ok, "--lexicon", "tlm,bogus"],
            "--lexicon tlm,bogus: expected some of tlm, mt, cs, emb, comma-separated, once each, or none",
        ),
        "a pair of one language": (
            ["--pairs", f"en-en={ENRO}/train.en-ro"],
            "--pairs 'en-en': expected two different languages, like en-ro",
        ),
        "--valid without its --pairs": (
            [*ok, "--valid", f"en-de={SAMPLE}/en-de/valid.en-de"],
            f"--valid 'en-de={SAMPLE}/en-de/valid.en-de': no --pairs en-de to go with it",
        ),
        "--score without a name": (
            [*ok, "--score", f"en-ro={ENRO}/test.en-ro"],
            f"--score 'en-ro={ENRO}/test.en-ro': expected NAME:SRC-TGT=PREFIX, a new NAME (not test) and a pair "
            "of the run",
        ),
        "--dict of a language not in the run": (
            [*ok, "--dict", f"de-en={SHARED}/bli/de-en.dev.txt"],
            f"--dict 'de-en={SHARED}/bli/de-en.dev.txt': de and en must both be languages of the run",
        ),
        "an unknown segmenter": (
            [*ok, "--segment", "ro=stanford"],
            "--segment 'ro=stanford': unknown segmenter 'stanford' (one of jieba, mecab, pythainlp, or none)",
        ),
        "--minutes 0": ([*ok, "--minutes", "0"], "--minutes 0: a positive number of minutes"),
        "too few pairs to split": (["--pairs", f"en-ro={tmp_path}/blank".replace("blank", "few")], None),
        "a work dir that is a file": (
            [*ok, "--work-dir", file_dir],
            f"--work-dir {file_dir}: exists and is not a directory",
        ),
    }


def test_bad_input_is_refused_in_seconds_with_one_line(tmp_path, capsys):
    """The first case through train.sh, the others through the same engine in this process (no interpreter
    to start for each)."""
    _write(tmp_path / "few.en", [f"line {i}" for i in range(120)])
    _write(tmp_path / "few.ro", [f"rând {i}" for i in range(120)])
    work, cases = tmp_path / "work", _bad_cases(tmp_path)
    argvs = [args if "--work-dir" in args else [*args, "--work-dir", work] for args, _ in cases.values()]
    refused = refusals(argvs, lambda argv: _train(*argv, timeout=120), train_main, capsys)
    for (case, (_, expected)), (status, err) in zip(cases.items(), refused):
        if expected is None:
            expected = "--pairs en-ro: 120 pairs are too few to split off valid and test sets (need 200); "
            expected += "give --valid and --test"
        assert status == 2, (case, err[-1000:])
        assert err.splitlines() == [f"train: error: {expected}"], case
        assert not work.exists(), case


def test_plan_only_writes_nothing_and_says_what_would_train(tmp_path):
    proc = _train(
        "--pairs",
        f"en-ro={ENRO}/train.en-ro",
        "--mono",
        f"ro={ENRO}/mono.ro",
        "--work-dir",
        tmp_path / "w",
        "--plan",
        "--minutes",
        "45",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "languages:   en,ro; pairs: en-ro; semi-supervised" in out
    assert re.search(r"vocabulary:  [0-9,]+ pieces", out)
    assert "64 dims x 2 layers" in out and "0.10 M parameters for 0.15 M tokens" in out  # little text: the small model
    assert "budget:      45 min = 10.4 pretraining + 30.4 translation" in out  # the rest: the half hour's 4.2
    assert "test en-ro: 100 pairs split off as blocks of 50 lines" in out  # 5 % of 2,000
    assert not (tmp_path / "w").exists()


# ------------------------------------------------------------------------------------------------
# end to end
# ------------------------------------------------------------------------------------------------


def _rows(stdout):
    return {
        (r.split()[0], r.split()[1]): r.split()[2:]
        for r in stdout.splitlines()
        if re.match(r"^\S+\s+\w+-\w+\s+[0-9.]+\s", r)
    }


@pytest.mark.slow  # a whole recipe run, a minute or two
def test_en_ro_stand_in_end_to_end(tmp_path):
    """The en-ro stand-in from raw files: valid and test split off, MLM+TLM, MT + AE, both directions scored
    beside copying, --score on the shipped test file, the lexicon probe of a small dictionary written here,
    exported with CTranslate2 models, a report, a figure (re-runs and --unsupervised: test_quickstart.py, on
    this engine; the unpaired text of the real corpus: above)."""
    work = tmp_path / "enro"
    words = ["file fișier", "file fișierul", "window fereastra", "menu meniu", "image imagine", "color culoare"]
    lexicon = _write(tmp_path / "en-ro.txt", words + ["page pagina", "document documentul", "button buton"])
    args = [
        "--pairs",
        f"en-ro={ENRO}/train.en-ro",
        "--mono",
        f"ro={ENRO}/mono.ro",
        "--dict",
        f"en-ro={lexicon}",
        "--score",
        f"docs:ro-en={ENRO}/test.en-ro",
        "--tiny",
        "--work-dir",
        work,
    ]
    proc = _train(*args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert (
        "valid en-ro: 25 pairs split off" in out
        and "2/4 MLM+TLM pretraining: cross_lingual_lm, --mlm-steps en,ro,en-ro" in out
    )
    assert re.search(r"^   trained to update \d+: MT en-ro ro-en, AE en ro", out, re.M), out[-3000:]
    rows = _rows(out)
    assert set(rows) == {("test", "en-ro"), ("test", "ro-en"), ("docs", "en-ro"), ("docs", "ro-en")}, out[-3000:]
    report = json.loads((work / "report.json").read_text())
    for r in report["bleu"]:
        assert rows[(r["set"], r["direction"])] == [
            f"{r['bleu']}",
            f"{r['copy']}",
            f"{r['bleu'] - r['copy']:+.1f}",
            f"{r['chrf']}",
            f"{r['chrf_copy']}",
        ]
        assert r["signature"]["bleu"].startswith("nrefs:1|") and "|nc:6|" in r["signature"]["chrf"]
        hyps = (work / "out" / r["set"] / f"hyp.{r['direction']}.txt").read_text(encoding="utf-8").splitlines()
        assert len(hyps) == r["lines"]
    assert {r["lines"] for r in report["bleu"] if r["set"] == "test"} == {50}  # --tiny: 1,000 pairs read, 5 % held out
    held, trained = ((work / "raw" / f"{split}.en-ro.ro").read_text().splitlines() for split in ("test", "train"))
    assert held and not set(held) & set(trained)
    assert sorted(p.name for p in (work / "model" / "ctranslate2").iterdir() if p.is_dir()) == ["en-ro", "ro-en"]
    assert (work / "figures" / "train.png").stat().st_size > 1000 and (work / "report.md").is_file()
    # the lexicon probe of the LM, beside the same architecture at random init
    assert re.search(r"^lexicon probe en-ro \(P@1 NN / CSLS, frequent words; random init beside\): ", out, re.M)
    (probe,) = report["lexicon"]
    assert probe["lm"]["evaluated_source_words"] >= 5 and probe["random_init"]["directions"] == "en-ro"
    hub = f'XLMModel.from_pretrained("{work}/model")'
    code = f'from xlm_fairseq import XLMModel; print(repr({hub}.translate("Deschideți fișierul.", src="ro", tgt="en")))'
    hub = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert hub.returncode == 0 and hub.stdout.startswith("'"), hub.stderr[-2000:]


@pytest.mark.slow  # a whole recipe run, a few minutes
def test_monolingual_text_alone_trains_chooses_exports_and_reports(tmp_path):
    """--unsupervised from two --mono files and nothing else: each language's held-out blocks validate the round
    trips, which choose the checkpoint; the translator is exported and the report gives the round trips, the
    lexicon's agreement with itself and translations of held-out text, and says that BLEU was not measured.
    A re-run with --score scores a parallel set without training again; recipes.experiments.criterion measures the
    kept checkpoints' choice on parallel sets the run never read."""
    work = tmp_path / "mono"
    mono = ["--mono", f"en={SAMPLE / 'en-de' / 'mono.en'}", "--mono", f"ro={ENRO}/mono.ro"]
    proc = _train("--unsupervised", *mono, "--tiny", "--keep-checkpoints", "--work-dir", work)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "languages:   en,ro; pairs: en-ro; unsupervised (no pair seen)" in out
    assert "valid en: 50 lines of its text split off" in out and "valid ro: 50 lines of its text split off" in out
    assert re.search(r"lexicon en-ro: .* come back to themselves", out)
    report = json.loads((work / "report.json").read_text())
    assert report["bleu"] == [] and report["checkpoint_metric"] == "roundtrip_score"
    assert set(report["roundtrip"]) >= {"roundtrip_score", "bleu_tok_en-ro-en", "bleu_copy_ro-en-ro"}
    assert re.search(r"^  roundtrip_score -?[0-9.]+ = mean BLEU back", out, re.M), out[-3000:]
    assert "BLEU was not measured: no parallel test text" in out
    assert [e["direction"] for e in report["examples"]] == ["en-ro", "ro-en"]
    assert all(len(e["examples"]) == 3 for e in report["examples"])
    assert re.search(r"^   scored: checkpoint_best.pt, update \d+ of \d+, valid roundtrip_score", out, re.M)
    assert sorted(p.name for p in (work / "model" / "ctranslate2").iterdir() if p.is_dir()) == ["en-ro", "ro-en"]
    assert not list((work / "data-bin").glob("*.en-ro.*"))  # no parallel text at all, valid or train
    # the test text, given later, is scored by the same model without training again
    again = _train("--unsupervised", *mono, "--tiny", "--score", f"docs:en-ro={ENRO}/test.en-ro", "--work-dir", work)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "done before" in again.stdout and set(_rows(again.stdout)) == {("docs", "en-ro"), ("docs", "ro-en")}
    # how the round trips chose, on parallel sets given afterwards: every kept checkpoint measured
    record, figure = tmp_path / "criterion.jsonl", tmp_path / "criterion.png"
    cmd = [sys.executable, "-m", "recipes.experiments.criterion", work, "--valid", f"en-ro={ENRO}/valid.en-ro"]
    crit = subprocess.run([*map(str, cmd), "--out", record], capture_output=True, text=True, cwd=ROOT)
    assert crit.returncode == 1 and crit.stderr.strip().endswith("(give --test SRC-TGT=PREFIX)"), crit.stderr
    assert not record.exists()
    cmd += ["--test", f"en-ro={ENRO}/test.en-ro", "--out", record, "--figure", figure]
    crit = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, cwd=ROOT)
    assert crit.returncode == 0, crit.stdout[-2000:] + crit.stderr[-2000:]
    run, mean = [json.loads(line) for line in record.read_text().splitlines()]
    assert (run["table"], run["name"], mean["table"], mean["runs"]) == ("criterion-run", "mono", "criterion-mean", 1)
    assert mean["bleu_lost_mean"] == run["bleu_lost"]
    kept = sorted(p.name for p in (work / "checkpoints" / "translate").glob("checkpoint_*_*.pt"))
    assert len(run["checkpoints"]) >= len(kept) >= 2
    assert [r["update"] for r in run["checkpoints"]] == sorted(r["update"] for r in run["checkpoints"])
    assert set(run["copy"]) == {"en-ro", "ro-en"} and run["copy"]["en-ro"] > 0
    assert set(run["chosen"]) == {"roundtrip", "parallel_valid"} and isinstance(run["bleu_lost"], float)
    rho = run["spearman"]["roundtrip_score"]  # None where a side is constant, as a tiny model's BLEU can be
    assert (rho is None or -1 <= rho <= 1) and figure.stat().st_size > 0


# a Chinese sample written here (no Chinese text ships with the project): short software sentences with their
# English, combined into more lines than one block of each split needs
ZH_EN = [
    ("点击确定按钮。", "Click the OK button."),
    ("打开文件。", "Open the file."),
    ("保存文件。", "Save the file."),
    ("关闭窗口。", "Close the window."),
    ("选择一种语言。", "Choose a language."),
    ("输入您的密码。", "Enter your password."),
    ("删除这个文件夹。", "Delete this folder."),
    ("打印这个文档。", "Print this document."),
    ("这个程序在Linux系统上运行。", "This program runs on Linux systems."),
    ("复制选中的文本。", "Copy the selected text."),
]


def _chinese_sample(directory, n=400):
    zh = [f"{z[:-1]}{i}。" if i % 3 == 0 else z for i in range(n) for z in [ZH_EN[i % len(ZH_EN)][0]]]
    en = [f"{e[:-1]} {i}." if i % 3 == 0 else e for i in range(n) for e in [ZH_EN[i % len(ZH_EN)][1]]]
    _write(directory / "sample.en-zh.zh", zh)
    _write(directory / "sample.en-zh.en", en)
    return directory / "sample.en-zh"


@pytest.mark.slow  # a whole recipe run, a minute or two
def test_chinese_sample_end_to_end_segments_and_scores_on_segmented_text(tmp_path):
    """zh-en from raw text without spaces: jieba's words in the data-bin and the model's pipeline, BLEU into
    Chinese with sacreBLEU's zh tokeniser, the exported translator segmenting what it reads."""
    from preprocess.pipeline import load_pipeline
    from preprocess.segment import corpus_bleu

    work = tmp_path / "zh"
    proc = _train("--pairs", f"en-zh={_chinese_sample(tmp_path)}", "--tiny", "--work-dir", work)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    settings = json.loads((work / "data-bin" / "text_pipeline.json").read_text())
    assert settings["segmenters"] == {"zh": "jieba"}
    pipeline = load_pipeline([work / "model"])
    assert pipeline.words("这个程序在Linux系统上运行", "zh") == ["这个", "程序", "在", "Linux", "系统", "上", "运行"]
    report = json.loads((work / "report.json").read_text())
    into_zh = next(r for r in report["bleu"] if r["direction"] == "en-zh")
    hyps = (work / "out" / "test" / "hyp.en-zh.txt").read_text(encoding="utf-8").splitlines()
    refs = (work / "raw" / "test.en-zh.zh").read_text(encoding="utf-8").splitlines()
    assert into_zh["bleu"] == round(corpus_bleu(hyps, refs, "zh").score, 2)
    assert all(" " not in h.replace("Linux ", "") for h in hyps if h)  # detokenised: no spaces between words
    code = (
        f'from xlm_fairseq import XLMModel; m = XLMModel.from_pretrained("{work}/model"); '
        'print(repr(m.translate("打开文件。", src="zh", tgt="en"))); '
        'print(repr(m.translate("Open the file.", src="en", tgt="zh")))'
    )
    hub = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert hub.returncode == 0 and hub.stdout.count("'") == 4, hub.stderr[-2000:]
    # the stages are keyed by what the files hold: a copied corpus (new times, same text) resumes the run,
    # changed text is refused before anything is touched
    sample = tmp_path / "sample.en-zh.zh"
    os.utime(sample, ns=(1_000_000_000, 1_000_000_000))
    again = _train("--pairs", f"en-zh={tmp_path / 'sample.en-zh'}", "--tiny", "--work-dir", work)
    assert again.returncode == 0 and again.stdout.count("done before") == 3, again.stdout[-2000:] + again.stderr
    sample.write_text(sample.read_text(encoding="utf-8") + "保存文件。\n", encoding="utf-8")
    (tmp_path / "sample.en-zh.en").write_text((tmp_path / "sample.en-zh.en").read_text() + "Save the file.\n")
    changed = _train("--pairs", f"en-zh={tmp_path / 'sample.en-zh'}", "--tiny", "--work-dir", work)
    assert changed.returncode == 2 and "stage preprocess was completed with other options" in changed.stderr
