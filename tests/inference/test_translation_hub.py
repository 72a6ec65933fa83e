"""Translating from Python: XLMModel.from_pretrained on a translation_lm checkpoint (fairseq's
GeneratorHubInterface with the data-bin's text pipeline) gives fairseq-generate's translations; a model
dir made by xlm-fairseq-export loads alone; LM and translation hubs refuse each other's models."""

import os
import subprocess
import sys

import pytest
import torch
from conftest import ROOT, SAMPLE, generate_lines, head, run

from xlm_fairseq import XLMModel
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.inference.hub import XLMHubInterface
from xlm_fairseq.inference.translation_hub import XLMTranslationHubInterface


@pytest.fixture(scope="module")
def mt(unmt, data_bin):
    return XLMModel.from_pretrained(unmt[0], checkpoint_file="checkpoint_last.pt", data_name_or_path=str(data_bin))


def _raw_test(src, tgt, tmp_path, n=60):
    """The raw source text the data-bin's test split was made from (conftest: the first 60 lines)."""
    pair, lang = "en-ro" if "ro" in (src, tgt) else "en-de", src
    return head(SAMPLE / pair / f"test.{pair}.{lang}", tmp_path / f"test.{lang}", n).read_text().splitlines()


@pytest.mark.parametrize("src,tgt", [("de", "en"), pytest.param("en", "ro", marks=pytest.mark.slow)])
def test_translate_equals_fairseq_generate(mt, unmt, data_bin, tmp_path, src, tgt):
    """Raw text in, detokenised text out, beam 5: the hub and fairseq-generate (on the binarised
    test split preprocess/ made from the same raw lines) give the same translations."""
    raw = _raw_test(src, tgt, tmp_path)
    ours = mt.translate(raw, src=src, tgt=tgt, beam=5, max_len_b=30, split_sentences=False)
    lines, _ = generate_lines(data_bin, unmt[0] / "checkpoint_last.pt", src, tgt, "--beam", "5", "--max-len-b", "30")
    theirs = [lines["D"][i] for i in range(len(lines["D"]))]
    assert len(ours) == len(theirs) == 60
    assert ours == theirs
    assert (
        mt.translate(raw[3], src=src, tgt=tgt, max_len_b=30, split_sentences=False) == ours[3]
    )  # a string gives a string


def test_hub_api(mt):
    assert isinstance(mt, XLMTranslationHubInterface) and mt.langs == ["en", "de", "ro"]
    assert not mt.training
    tokens = mt.encode("Klicken Sie auf „Drucken“ … «Ja».", "de")
    assert tokens[-1] == mt.src_dict.eos() and mt.src_dict.unk() not in tokens.tolist()
    # n-best as fairseq-generate --nbest: the best first, scores falling
    best = mt.generate(tokens, src="de", tgt="en", beam=5, nbest=3)
    assert len(best) == 3 and best[0]["score"] >= best[1]["score"] >= best[2]["score"]
    assert mt.decode(best[0]["tokens"], "en") == mt.translate("Klicken Sie auf „Drucken“ … «Ja».", src="de", tgt="en")
    # batches of several sentences, sampling with a seed
    many = ["Klicken Sie auf Drucken.", "Die Datei wurde nicht gefunden.", "Öffnen Sie das Menü."] * 3
    assert len(mt.translate(many, src="de", tgt="en", beam=2)) == 9
    torch.manual_seed(3)
    first = mt.sample(many[:2], src="de", tgt="en", sampling=True, sampling_topk=5)
    torch.manual_seed(3)
    assert mt.sample(many[:2], src="de", tgt="en", sampling=True, sampling_topk=5) == first
    # the direction of a call does not leak into the next
    assert mt.task.cfg.source_lang is None and mt.tokenizer.source_lang is None


def test_hub_errors_are_one_line(mt, pretrained):
    with pytest.raises(XLMUserError, match="give src="):
        mt.translate("Hallo")
    with pytest.raises(XLMUserError, match="'fr' is not one of the model's languages: en,de,ro"):
        mt.translate("Hallo", src="fr", tgt="en")
    with pytest.raises(XLMUserError, match="translation model.*XLMModel.from_pretrained"):
        XLMHubInterface.from_pretrained(mt.model_dir, "checkpoint_last.pt", mt.task.data_dir)
    with pytest.raises(XLMUserError, match="pretrained LM.*--task translation_lm"):
        XLMTranslationHubInterface.from_pretrained(str(pretrained), data_name_or_path=mt.task.data_dir)
    # XLMModel.from_pretrained gives each kind its own hub
    assert isinstance(XLMModel.from_pretrained(str(pretrained), data_name_or_path=mt.task.data_dir), XLMHubInterface)


def test_exported_model_dir_loads_without_the_data_bin(mt, unmt, tmp_path):
    out = tmp_path / "model"
    proc = run([sys.executable, "-m", "xlm_fairseq.inference.export", unmt[0] / "checkpoint_last.pt", out])
    assert "wrote" in proc.stdout
    assert sorted(os.listdir(out)) == ["README.md", "dict.txt", "model.pt", "spm.model", "text_pipeline.json"]
    card = (out / "README.md").read_text(encoding="utf-8")  # a model card: what the checkpoint says of itself
    assert "language:\n- en\n- de\n- ro\n" in card and "pipeline_tag: translation" in card
    assert "translates en→de, en→ro, de→en, de→ro, ro→en, ro→de" in card and "\n- 30 updates\n" in card
    assert "back-translation: en-de-en,de-en-de,en-ro-en,ro-en-ro" in card and "Not measured" in card
    assert os.path.getsize(out / "model.pt") < os.path.getsize(unmt[0] / "checkpoint_last.pt") / 2  # no Adam state
    alone = XLMModel.from_pretrained(str(out))
    sentences = ["Klicken Sie auf Drucken.", "Die Datei wurde nicht gefunden."]
    assert alone.translate(sentences, src="de", tgt="en") == mt.translate(sentences, src="de", tgt="en")
    # an existing OUT_DIR is kept unless --force
    again = run([sys.executable, "-m", "xlm_fairseq.inference.export", unmt[0] / "checkpoint_last.pt", out], ok=False)
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "--force" in again.stderr
    assert sorted(os.listdir(out)) == ["README.md", "dict.txt", "model.pt", "spm.model", "text_pipeline.json"]


@pytest.mark.slow
def test_a_checkpoint_copied_alone_is_a_whole_model(mt, unmt, pretrained, data_bin, tmp_path):
    """LM and translation checkpoints carry dictionary and subword model (as classifiers do): a copied
    checkpoint file, without its data-bin, translates in the hub and in fairseq-interactive, and
    initialises a translation model through --pretrained-xlm-checkpoint."""
    import shutil

    from conftest import BIN, UNMT_ARGS

    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(unmt[0] / "checkpoint_last.pt", alone / "mt.pt")
    shutil.copy(pretrained, alone / "lm.pt")
    sentences = ["Klicken Sie auf Drucken.", "Die Datei wurde nicht gefunden."]
    code = "import sys; from xlm_fairseq import XLMModel\n"
    code += "m = XLMModel.from_pretrained(sys.argv[1], checkpoint_file='mt.pt')\n"
    code += "print(m.translate(sys.argv[2:], src='de', tgt='en'))"
    proc = run([sys.executable, "-c", code, alone, *sentences], cwd=tmp_path)
    assert proc.stdout.strip() == str(mt.translate(sentences, src="de", tgt="en"))
    interactive = [BIN / "fairseq-interactive", alone, "--user-dir", ROOT / "xlm_fairseq", "--task", "translation_lm"]
    interactive += ["--path", alone / "mt.pt", "-s", "de", "-t", "en", "--cpu", "--beam", "1"]
    proc = run(interactive, input=f"{sentences[0]}\n")
    assert sum(line.startswith("H-") for line in proc.stdout.splitlines()) == 1, proc.stdout
    train = [BIN / "fairseq-train", data_bin, *UNMT_ARGS, "--langs", "en,de,ro", "--ae-steps", "en"]
    train += ["--max-update", "1", "--disable-validation", "--pretrained-xlm-checkpoint", alone / "lm.pt"]
    proc = run([*train, "--save-dir", tmp_path / "save"])
    assert "done training" in proc.stdout + proc.stderr
    assert sorted(os.listdir(alone)) == ["lm.pt", "mt.pt"]


def test_checkpoint_keeps_its_pipeline(unmt, data_bin, tmp_path):
    """The checkpoint carries the data-bin's pipeline settings; for a checkpoint without its own
    subword model (older ones), a data-bin whose subword model differs is refused with one line
    instead of tokenising with the wrong vocabulary."""
    import shutil

    from fairseq.checkpoint_utils import torch_persistent_save

    from xlm_fairseq import checkpoints

    state = checkpoints.load(unmt[0] / "checkpoint_last.pt")
    stored = state["task_state"]["text_pipeline"]
    assert stored["subwords"] == "sentencepiece" and stored["subword_model"] == "spm.model"
    for key in ("subword_model", "dictionary", "dictionary_sha256"):  # what older checkpoints lack
        del state["task_state"][key]
    older = tmp_path / "older"
    older.mkdir()
    torch_persistent_save(state, str(older / "checkpoint_last.pt"))
    other = tmp_path / "other-bin"
    shutil.copytree(data_bin, other)
    model = (other / "spm.model").read_bytes()
    (other / "spm.model").write_bytes(model[:-1] + bytes([model[-1] ^ 1]))
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from xlm_fairseq import XLMModel; XLMModel.from_pretrained(*sys.argv[1:])"]
        + [str(older), "checkpoint_last.pt", str(other)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode != 0
    assert "spm.model: not the sentencepiece model this model was trained with" in proc.stderr.strip().splitlines()[-1]
    # with its own data-bin it loads
    proc = subprocess.run([*proc.args[:-1], str(data_bin)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_translate_takes_text_only(mt):
    """A string or a list of strings; a blank one comes back as it is, and one sentence alone as ""
    (the model would invent a sentence from </s> alone); bytes, None and numbers are one error naming
    the argument."""
    assert mt.translate("", src="de", tgt="en") == ""
    assert mt.translate(" \t", src="de", tgt="en", engine="fairseq") == " \t"
    assert mt.translate(" \t", src="de", tgt="en", split_sentences=False) == ""
    one = mt.translate("Klicken Sie auf Drucken.", src="de", tgt="en")
    assert mt.translate(["", "Klicken Sie auf Drucken.", "  "], src="de", tgt="en") == ["", one, "  "]
    assert mt.translate([], src="de", tgt="en") == [] and mt.sample("", src="de", tgt="en") == ""
    for wrong, named in (
        (b"Hallo", "sentences is bytes"),
        (None, "sentences is None"),
        (["Hallo", 5], r"sentences\[1\]"),
    ):
        with pytest.raises(XLMUserError, match=named):
            mt.translate(wrong, src="de", tgt="en")
    with pytest.raises(XLMUserError, match="engine='gpu'"):
        mt.translate("Hallo", src="de", tgt="en", engine="gpu")
    with pytest.raises(XLMUserError, match="no CTranslate2 model for de-en.*--ctranslate2"):
        mt.translate("Hallo", src="de", tgt="en", engine="ctranslate2")
