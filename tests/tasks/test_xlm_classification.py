"""Cross-lingual classification: --task xlm_classification fine-tunes the tiny pretrained LM on English
package-description topics (the shipped xcls sample) and validates English and German; the save dir
alone classifies from Python and from the command line, with the accuracies fairseq logged; random
initialisation takes its vocabulary from the data directory; bad input is one line and touches no file."""

import hashlib
import json
import shutil

import numpy as np
import pytest
import sentencepiece
import torch
from conftest import BIN, ROOT, SAMPLE, TRAIN_ARGS, fairseq, head, in_process, json_logs, run, setup_task

from preprocess.classification import read_tsv
from xlm_fairseq.data.classification import SentenceClassificationDataset, encode_row
from xlm_fairseq.inference.classify import main as classify_main
from xlm_fairseq.models.classifier import parse_layer_range

XCLS = SAMPLE / "xcls"
CLASSIFY_ARGS = [*TRAIN_ARGS, "--task", "xlm_classification", "--lr", "0.0005", "--batch-size", "16"]
CLASSIFY_ARGS += ["--best-checkpoint-metric", "acc_en", "--maximize-best-checkpoint-metric"]


def head_tsv(name, dst, rows):
    lines = (XCLS / name).read_text(encoding="utf-8").splitlines(keepends=True)
    dst.write_text("".join(lines[: rows + 1]), encoding="utf-8")
    return dst


@pytest.fixture(scope="module")
def xcls(tmp_path_factory):
    """300 English training rows, 60 validation rows in English and German (the same packages)."""
    d = tmp_path_factory.mktemp("xcls")
    head_tsv("train.en.tsv", d / "train.en.tsv", 300)
    for lang in ("en", "de"):
        head_tsv(f"valid.{lang}.tsv", d / f"valid.{lang}.tsv", 60)
    return d


@pytest.fixture(scope="module")
def classifier(xcls, pretrained, tmp_path_factory):
    """Fine-tuned from a copy of the pretrained LM that is deleted afterwards, on a copy of the data
    that is deleted too: what the save dir needs must travel inside its checkpoints."""
    work = tmp_path_factory.mktemp("classifier")
    lm, data, save = work / "lm.pt", work / "data", work / "save"
    shutil.copy(pretrained, lm)
    shutil.copytree(xcls, data)
    proc = fairseq(
        "train", data, *CLASSIFY_ARGS, "--pretrained-xlm-checkpoint", lm, "--max-epoch", "3", "--save-dir", save
    )
    lm.unlink()
    shutil.rmtree(data)
    return save, proc.stdout + proc.stderr


def test_training_logs_per_language_accuracy(classifier):
    save, log = classifier
    valid = json_logs(log, "valid")
    assert len(valid) == 3
    for v in valid:
        en, de, mean = float(v["valid_acc_en"]), float(v["valid_acc_de"]), float(v["valid_acc"])
        assert mean == pytest.approx((en + de) / 2, abs=0.011)  # unweighted mean of the languages
    assert "initialised from" in log and "parameters trained" in log
    # fairseq tracks the best English accuracy (logged from the second validation on)
    assert float(valid[-1]["valid_best_acc_en"]) == max(float(v["valid_acc_en"]) for v in valid)
    # it learnt something: training loss fell below the label prior's entropy (2.86 bits here)
    train = json_logs(log, "train")
    assert float(train[-1]["train_loss"]) < float(train[0]["train_loss"])


def _valid_line_of_best(log):
    valid = json_logs(log, "valid")
    # fairseq keeps a tie as the new best (>=): the last validation with the best English accuracy
    return max(valid, key=lambda v: (float(v["valid_acc_en"]), int(v["valid_num_updates"])))


def test_hub_from_save_dir_alone(classifier, xcls, tmp_path):
    """From a copy of the save dir, with an empty cache: labels, languages, dictionary and subword
    model come from the checkpoint; accuracy on the validation files equals what fairseq logged."""
    save, log = classifier
    moved = tmp_path / "moved"
    shutil.copytree(save, moved)
    code = f"""
import json, sys
from xlm_fairseq import XLMModel
from preprocess.classification import read_tsv
clf = XLMModel.from_pretrained({str(moved)!r}, checkpoint_file="checkpoint_best.pt")
out = {{"type": type(clf).__name__, "labels": clf.labels, "langs": clf.langs}}
for lang in ("en", "de"):
    rows = read_tsv({str(xcls)!r} + f"/valid.{{lang}}.tsv")
    predicted = clf.classify(rows.texts, lang)
    out[lang] = 100 * sum(p == g for p, g in zip(predicted, rows.labels)) / len(rows)
    out[lang + "_single"] = clf.classify(rows.texts[0], lang) == predicted[0]
probs = clf.classify("A text editor for programmers.", "en", probs=True)
out["probs"] = sum(probs.values())
print("RESULT " + json.dumps(out))
"""
    proc = run([BIN / "python", "-c", code], env_extra={"XLM_FAIRSEQ_CACHE": str(tmp_path / "cache")})
    result = json.loads(proc.stdout.split("RESULT ", 1)[1])
    assert result["type"] == "XLMClassificationHubInterface"
    assert result["labels"] == sorted({r for r in read_tsv(str(xcls / "train.en.tsv")).labels})
    assert result["langs"] == ["en", "de", "ro"]
    best = _valid_line_of_best(log)
    assert result["en"] == pytest.approx(float(best["valid_acc_en"]), abs=0.01)
    assert result["de"] == pytest.approx(float(best["valid_acc_de"]), abs=0.01)
    assert result["en_single"] and result["de_single"]
    assert result["probs"] == pytest.approx(1.0, abs=1e-4)
    assert (tmp_path / "cache" / "subword_models").is_dir()  # the checkpoint's spm.model, restored


def test_classify_command(classifier, xcls, tmp_path, capsys):
    """The command scores labelled files; a file without labels (its main, in this process) is classified."""
    save, log = classifier
    out, js = tmp_path / "preds", tmp_path / "acc.json"
    proc = run(
        [
            BIN / "xlm-fairseq-classify",
            save,
            xcls / "valid.en.tsv",
            xcls / "valid.de.tsv",
            "--out-dir",
            out,
            "--json",
            js,
        ]
    )
    result = json.loads(js.read_text())
    best = _valid_line_of_best(log)
    assert result["valid.de.tsv"]["accuracy"] == pytest.approx(float(best["valid_acc_de"]), abs=0.01)
    assert "valid.de.tsv (de): 60 rows, accuracy" in proc.stdout
    lines = (out / "valid.de.pred.tsv").read_text().splitlines()
    assert lines[0] == "id\tprediction\tprobability\tlabel" and len(lines) == 61
    # a file without labels is classified, not scored
    unlabelled = tmp_path / "new.de.tsv"
    unlabelled.write_text("id\ttext\nx\tEin Editor für Textdateien.\n", encoding="utf-8")
    capsys.readouterr()
    assert classify_main([str(save), str(unlabelled)]) == 0
    assert "new.de.tsv (de): 1 rows, no labels" in capsys.readouterr().out


def test_hubs_refuse_each_others_models(classifier, pretrained, data_bin):
    from xlm_fairseq.errors import XLMUserError
    from xlm_fairseq.inference.classification_hub import XLMClassificationHubInterface
    from xlm_fairseq.inference.hub import XLMHubInterface

    save, _ = classifier
    with pytest.raises(XLMUserError, match="a classifier"):
        XLMHubInterface.from_pretrained(save, checkpoint_file="checkpoint_best.pt")
    with pytest.raises(XLMUserError, match="not a classifier"):
        XLMClassificationHubInterface.from_pretrained(pretrained, data_name_or_path=str(data_bin))
    clf = XLMClassificationHubInterface.from_pretrained(save, checkpoint_file="checkpoint_best.pt")
    with pytest.raises(XLMUserError, match="not one of the model's"):
        clf.classify("Hallo", "fr")
    for wrong, named in (
        (b"Hallo", "texts is bytes"),
        (None, "texts is None"),
        (["Hallo", 7], "texts\\[1\\] is a int"),
    ):
        with pytest.raises(XLMUserError, match=named):
            clf.classify(wrong, "de")
    with pytest.raises(XLMUserError, match="no word predictions"):
        clf.fill_mask("A <mask> editor.", "en")
    assert clf.extract_features(clf.encode("A text editor.", "en"), "en").shape[-1] == 64


@pytest.mark.slow
def test_random_init_takes_the_data_directory_vocabulary(xcls, data_bin, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(xcls, data)
    proc = fairseq("train", data, *CLASSIFY_ARGS, "--max-epoch", "1", "--save-dir", tmp_path / "s1", ok=False)
    assert proc.returncode != 0 and "no dict.txt; give --pretrained-xlm-checkpoint" in proc.stderr
    for name in ("dict.txt", "text_pipeline.json", "spm.model"):
        shutil.copy(data_bin / name, data / name)
    proc = fairseq("train", data, *CLASSIFY_ARGS, "--max-epoch", "1", "--save-dir", tmp_path / "s2")
    assert "initialised from" not in proc.stdout + proc.stderr
    valid = json_logs(proc.stdout + proc.stderr, "valid")
    assert {"valid_acc_en", "valid_acc_de", "valid_acc"} <= set(valid[-1])
    # the languages were those of the files, carried by the checkpoint
    state = torch.load(tmp_path / "s2" / "checkpoint_last.pt", map_location="cpu", weights_only=False)
    assert state["task_state"]["langs"] == ["de", "en"] and not state["cfg"]["task"]["langs"]
    assert state["task_state"]["labels"] == sorted(set(read_tsv(str(xcls / "train.en.tsv")).labels))


def _digests(*dirs):
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest() for d in dirs for p in sorted(d.rglob("*")) if p.is_file()
    }


BAD_INPUT = {
    "unknown label": ("valid.de.tsv", "id\tlabel\ttext\nx\tpoetry\tEin Gedicht.\n", "label 'poetry' is not one of"),
    "missing column": ("valid.de.tsv", "id\ttext\nx\tEin Gedicht.\n", "no 'label' column"),
    "empty file": ("valid.de.tsv", "", "valid.de.tsv: empty file"),
    "invalid UTF-8": ("valid.de.tsv", b"id\tlabel\ttext\nx\ttext\tEin Ged\xffcht.\n", "invalid UTF-8"),
    "language not in the model": ("train.fr.tsv", "id\tlabel\ttext\nx\ttext\tUn texte.\n", "'fr' is not one of"),
    "ragged row": ("valid.de.tsv", "id\tlabel\ttext\nx\ttext\n", "2 tab-separated fields, the header has 3"),
}


@pytest.mark.parametrize(  # a fairseq-train each: the fast tier runs the first
    "case",
    [pytest.param(case, marks=() if i == 0 else pytest.mark.slow) for i, case in enumerate(BAD_INPUT)],
    ids=list(BAD_INPUT),
)
def test_bad_input_is_one_line_and_touches_nothing(case, xcls, classifier, pretrained, tmp_path):
    name, content, message = BAD_INPUT[case]
    data, save = tmp_path / "data", tmp_path / "save"
    shutil.copytree(xcls, data)
    shutil.copytree(classifier[0], save)  # a run that was going: its checkpoints must survive
    path = data / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    before = _digests(data, save)
    proc = fairseq(
        "train",
        data,
        *CLASSIFY_ARGS,
        "--pretrained-xlm-checkpoint",
        pretrained,
        "--max-epoch",
        "4",
        "--save-dir",
        save,
        ok=False,
    )
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert proc.returncode != 0 and len(errors) == 1, proc.stderr[-2000:]
    assert message in errors[0] and name in errors[0]
    assert "Traceback" not in proc.stderr
    assert _digests(data, save) == before


@pytest.mark.slow
def test_conflicting_dictionary_beside_the_tsvs(xcls, pretrained, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(xcls, data)
    (data / "dict.txt").write_text("<special0> 1\n<special1> 1\nfoo 5\n", encoding="utf-8")
    proc = fairseq(
        "train",
        data,
        *CLASSIFY_ARGS,
        "--pretrained-xlm-checkpoint",
        pretrained,
        "--max-epoch",
        "1",
        "--save-dir",
        tmp_path / "save",
        ok=False,
    )
    assert (
        proc.returncode != 0 and f"{data / 'dict.txt'}: not the dictionary {pretrained} was trained with" in proc.stderr
    )
    assert f"remove dict.txt from {data}" in proc.stderr
    assert not (tmp_path / "save" / "checkpoint_last.pt").exists()


@pytest.mark.slow
def test_truncated_pretrained_checkpoint(xcls, pretrained, tmp_path):
    broken = tmp_path / "broken.pt"
    broken.write_bytes(pretrained.read_bytes()[:20000])  # a copy killed half-way
    proc = fairseq(
        "train",
        xcls,
        *CLASSIFY_ARGS,
        "--pretrained-xlm-checkpoint",
        broken,
        "--max-epoch",
        "1",
        "--save-dir",
        tmp_path / "save",
        ok=False,
    )
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert proc.returncode != 0 and len(errors) == 1 and "Traceback" not in proc.stderr
    assert "broken.pt: not a readable checkpoint, truncated or corrupt" in errors[0]


def test_rows_as_xlm_feeds_them():
    eos = 2
    row, cut = encode_row([10, 11, 12], None, eos, max_len=256, max_positions=512)
    assert row == [eos, 10, 11, 12, eos] and not cut
    # a pair: </s> a </s> b </s> (XLM's concat_batches without position reset)
    row, _ = encode_row([10, 11], [20], eos, max_len=256, max_positions=512)
    assert row == [eos, 10, 11, eos, 20, eos]
    # XLM's truncate: max_len tokens of </s> w .. </s>, the last one </s>
    row, cut = encode_row(list(range(10, 20)), [20, 21, 22], eos, max_len=5, max_positions=512)
    assert row == [eos, 10, 11, 12, eos, 20, 21, 22, eos] and cut
    row, cut = encode_row(list(range(10, 20)), None, eos, max_len=256, max_positions=6)
    assert row == [eos, 10, 11, 12, 13, eos] and cut
    data = SentenceClassificationDataset([[2, 5, 2], [2, 5, 6, 7, 2]], [1, 0], [3, 0], pad=1, shuffle=False, seed=1)
    batch = data.collater([data[i] for i in data.ordered_indices()])
    assert batch["net_input"]["src_tokens"].tolist() == [[2, 5, 2, 1, 1], [2, 5, 6, 7, 2]]
    assert batch["net_input"]["src_langs"].tolist() == [1, 0] and batch["target"].tolist() == [3, 0]
    assert batch["langs"].tolist() == [1, 0]
    # --lang-id: the model reads both rows with id 0, accuracy is still counted by the rows' own languages
    data = SentenceClassificationDataset([[2, 5, 2], [2, 5, 6, 7, 2]], [1, 0], [3, 0], 1, False, 1, model_langs=[0, 0])
    batch = data.collater([data[i] for i in data.ordered_indices()])
    assert batch["net_input"]["src_langs"].tolist() == [0, 0] and batch["langs"].tolist() == [1, 0]


def test_xlm_fine_tuning_defaults(xcls, pretrained):
    """XLM's XNLI fine-tuning: the head's dropout is its own option, 0 by default (XLM's --dropout);
    training batches are random rows (grouped by length only with --group-by-length); sentences are
    truncated in training only."""
    common = ["--pretrained-xlm-checkpoint", pretrained, "--truncate-len", "16", "--dropout", "0.1"]
    task, cfg = setup_task(xcls, "xlm_classification", *common)
    model = task.build_model(cfg.model)
    assert model.classification_head.dropout == 0.0 and model.lm.dropout == 0.1
    task.load_dataset("train")
    task.load_dataset("valid")
    train, valid = task.dataset("train"), task.dataset("valid")
    assert train.sizes.max() <= 16 and (train.sizes == 16).sum() > 10, "training sentences are cut"
    assert valid.sizes.max() > 40, "validation rows are whole"
    whole, _ = setup_task(xcls, "xlm_classification", "--pretrained-xlm-checkpoint", pretrained)
    whole.load_dataset("train")
    train = whole.dataset("train")  # rows of many lengths
    order = train.ordered_indices()
    assert sorted(order.tolist()) == list(range(len(train)))
    steps = np.diff(train.sizes[order].astype(np.int64))
    steps = steps[steps != 0]  # (many rows are cut to the same length)
    assert len(steps) > 20 and 0.25 < (steps < 0).mean() < 0.75, "random rows, not by length"
    grouped, cfg = setup_task(xcls, "xlm_classification", *common, "--group-by-length", "--classifier-dropout", "0.3")
    assert grouped.build_model(cfg.model).classification_head.dropout == 0.3
    grouped.load_dataset("train")
    sizes = grouped.dataset("train").sizes[grouped.dataset("train").ordered_indices()]
    assert (sizes[1:] >= sizes[:-1]).all()


def test_mean_pooling_reads_every_real_position(xcls, pretrained):
    """--classifier-pooling: XLM's first position by default; ``mean`` averages the row's states
    and ignores padding, so a row scores the same alone and padded beside a longer one."""
    task, cfg = setup_task(xcls, "xlm_classification", "--pretrained-xlm-checkpoint", pretrained)
    assert task.build_model(cfg.model).classification_head.pooling == "first"
    task, cfg = setup_task(
        xcls, "xlm_classification", "--pretrained-xlm-checkpoint", pretrained, "--classifier-pooling", "mean"
    )
    model = task.build_model(cfg.model).eval()
    short, long = torch.tensor([[2, 10, 11, 12, 2]]), torch.tensor([[2, 13, 14, 15, 16, 17, 18, 2]])
    pad = model.lm.pad_index
    batch = torch.cat([torch.nn.functional.pad(short, (0, 3), value=pad), long])
    with torch.no_grad():
        alone, _ = model(short, src_langs=torch.tensor([0]))
        padded, _ = model(batch, src_langs=torch.tensor([0, 0]))
        states, _ = model(short, src_langs=torch.tensor([0]), features_only=True)
        model.classification_head.pooling = "first"
        first, _ = model(short, src_langs=torch.tensor([0]))
    assert torch.allclose(alone[0], padded[0], atol=1e-5)
    assert torch.allclose(alone, model.classification_head.proj(states.mean(1)), atol=1e-5)
    assert not torch.allclose(alone, first, atol=1e-3)


def test_finetune_layers():
    assert list(parse_layer_range("0:_1", 6)) == [0, 1, 2, 3, 4, 5, 6]
    assert list(parse_layer_range("4:_1", 6)) == [4, 5, 6]
    assert list(parse_layer_range("0:0", 6)) == [0]
    from xlm_fairseq.errors import XLMUserError

    for bad in ("all", "0:7", "1"):
        with pytest.raises(XLMUserError, match="--finetune-layers"):
            parse_layer_range(bad, 6)


def test_lang_id_reads_every_row_as_one_language(classifier, xcls, tmp_path, capsys):
    """lang_id="en" on a classifier fine-tuned without it: German rows get English's language id
    (what hand-fed tokens with that id give), in Python and with ``classify --lang-id``; a
    language the model lacks is one line."""
    from xlm_fairseq.inference.classification_hub import XLMClassificationHubInterface as Hub

    save, _ = classifier
    own, as_en = (
        Hub.from_pretrained(save, "checkpoint_best.pt"),
        Hub.from_pretrained(save, "checkpoint_best.pt", lang_id="en"),
    )
    assert as_en.task.model_lang_id("de") == as_en.lang2id["en"] != own.task.model_lang_id("de")
    rows = read_tsv(str(xcls / "valid.de.tsv"))
    p_own, p_en = own.probabilities(rows.texts, "de"), as_en.probabilities(rows.texts, "de")
    assert not torch.allclose(p_own, p_en, atol=1e-3)
    tokens = torch.tensor(own.task.encode_rows(rows.texts[:1], None, "de")[0][0])
    with torch.no_grad():
        logits, _ = own.model(tokens[None], src_langs=torch.tensor([own.lang2id["en"]]))
    assert torch.allclose(logits.softmax(-1)[0], p_en[0], atol=1e-5)
    expected = 100 * np.mean([as_en.labels[i] == g for i, g in zip(p_en.argmax(-1).tolist(), rows.labels)])
    js = tmp_path / "acc.json"
    run([BIN / "xlm-fairseq-classify", save, xcls / "valid.de.tsv", "--lang-id", "en", "--json", js])
    assert json.loads(js.read_text())["valid.de.tsv"]["accuracy"] == pytest.approx(expected, abs=0.01)
    status, err = in_process(classify_main, [save, xcls / "valid.de.tsv", "--lang-id", "xx"], capsys)
    errors = [line for line in err.splitlines() if "error" in line]
    assert status != 0 and len(errors) == 1 and "--lang-id xx" in errors[0], err[-2000:]


@pytest.mark.slow
def test_fine_tuning_with_lang_id_validates_and_predicts_with_it(xcls, pretrained, tmp_path):
    """fairseq-train --lang-id en: German validation rows read with English's id, and the
    checkpoint predicts so by default; a bad --lang-id stops before training, writing nothing."""
    save = tmp_path / "save"
    bad = fairseq(
        "train",
        xcls,
        *CLASSIFY_ARGS,
        "--pretrained-xlm-checkpoint",
        pretrained,
        "--max-update",
        "5",
        "--lang-id",
        "xx",
        "--save-dir",
        save,
        ok=False,
    )
    errors = [line for line in bad.stderr.splitlines() if line.startswith("error: ")]
    assert bad.returncode != 0 and len(errors) == 1 and "--lang-id xx" in errors[0], bad.stderr[-2000:]
    assert not save.exists() or not any(save.iterdir())
    proc = fairseq(
        "train",
        xcls,
        *CLASSIFY_ARGS,
        "--pretrained-xlm-checkpoint",
        pretrained,
        "--max-epoch",
        "1",
        "--lang-id",
        "en",
        "--save-dir",
        save,
    )
    logged = float(json_logs(proc.stdout + proc.stderr, "valid")[-1]["valid_acc_de"])
    js = tmp_path / "acc.json"
    run(
        [
            BIN / "xlm-fairseq-classify",
            save,
            xcls / "valid.de.tsv",
            "--checkpoint-file",
            "checkpoint_last.pt",
            "--json",
            js,
        ]
    )
    assert json.loads(js.read_text())["valid.de.tsv"]["accuracy"] == pytest.approx(logged, abs=0.01)


@pytest.mark.slow
def test_frozen_layers_do_not_move(xcls, pretrained, tmp_path):
    """--finetune-layers 2:_1 on the 2-layer model: the embeddings and layer 1 keep their pretrained
    values, layer 2 and the head are trained."""
    save = tmp_path / "save"
    fairseq(
        "train",
        xcls,
        *CLASSIFY_ARGS,
        "--pretrained-xlm-checkpoint",
        pretrained,
        "--max-update",
        "5",
        "--finetune-layers",
        "2:_1",
        "--disable-validation",
        "--save-dir",
        save,
    )
    before = torch.load(pretrained, map_location="cpu", weights_only=False)["model"]
    after = torch.load(save / "checkpoint_last.pt", map_location="cpu", weights_only=False)["model"]
    prefix = "encoder.transformer."
    for name in ("embeddings.weight", "position_embeddings.weight", "layer_norm_emb.weight", "ffns.0.lin1.weight"):
        assert torch.equal(before[prefix + name], after[prefix + name]), name
    # language embeddings are reordered to the classifier's languages (the same here)
    assert not torch.equal(before[prefix + "ffns.1.lin1.weight"], after[prefix + "ffns.1.lin1.weight"])
    assert "classification_head.proj.weight" in after


@pytest.mark.slow
def test_sentence_pairs_from_xnli_layout(pretrained, tmp_path):
    """The official XNLI/MultiNLI layouts through python -m preprocess.xnli, then a pair classifier."""
    xnli, mnli = tmp_path / "XNLI-1.0", tmp_path / "multinli_1.0"
    xnli.mkdir()
    mnli.mkdir()
    header = [
        "language",
        "gold_label",
        "sentence1_binary_parse",
        "sentence2_binary_parse",
        "sentence1_parse",
        "sentence2_parse",
        "sentence1",
        "sentence2",
        "promptID",
        "pairID",
        "genre",
    ]
    en = head(SAMPLE / "en-de" / "test.en-de.en", tmp_path / "en", 60).read_text().splitlines()
    de = head(SAMPLE / "en-de" / "test.en-de.de", tmp_path / "de", 60).read_text().splitlines()
    labels = ["entailment", "neutral", "contradiction"]
    for split in ("dev", "test"):
        rows = ["\t".join(header)]
        for lang, text in (("en", en), ("de", de), ("fr", en)):
            for i in range(20):
                rows.append("\t".join([lang, labels[i % 3], "", "", "", "", text[i], text[i + 20], "1", str(i), "g"]))
        rows.append("\t".join(["de", "-", "", "", "", "", "no gold label", "x", "1", "99", "g"]))
        (xnli / f"xnli.{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    mnli_header = [
        "gold_label",
        "sentence1_binary_parse",
        "sentence2_binary_parse",
        "sentence1_parse",
        "sentence2_parse",
        "sentence1",
        "sentence2",
        "promptID",
        "pairID",
        "genre",
    ]
    rows = ["\t".join(mnli_header)]
    for i in range(40):
        rows.append("\t".join([labels[i % 3], "", "", "", "", en[i], en[i + 20], "1", f"{i}e", "fiction"]))
    (mnli / "multinli_1.0_train.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "xnli-data"
    proc = run([BIN / "python", "-m", "preprocess.xnli", out, "--xnli", xnli, "--mnli", mnli])
    assert "valid left out: 1 rows" in proc.stdout
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{s}.{lang}.tsv" for s in ("valid", "test") for lang in ("de", "en", "fr")] + ["train.en.tsv"]
    )
    rows = read_tsv(str(out / "valid.de.tsv"))
    assert rows.is_pair and rows.texts[0] == de[0] and rows.texts_b[0] == de[20] and len(rows) == 20
    again = run([BIN / "python", "-m", "preprocess.xnli", out, "--xnli", xnli, "--mnli", mnli], ok=False)
    assert again.returncode == 2 and "exists; give --force" in again.stderr
    # fr is not a language of the model: left out of the default validation languages
    save = tmp_path / "save"
    proc = fairseq(
        "train", out, *CLASSIFY_ARGS, "--pretrained-xlm-checkpoint", pretrained, "--max-epoch", "1", "--save-dir", save
    )
    log = proc.stdout + proc.stderr
    assert "fr left out (not languages of the model)" in log
    assert {"valid_acc_en", "valid_acc_de"} <= set(json_logs(log, "valid")[-1])
    from xlm_fairseq import XLMModel

    clf = XLMModel.from_pretrained(save, checkpoint_file="checkpoint_last.pt")
    assert clf.labels == sorted(labels)
    assert clf.classify("Ein Satz.", "de", texts_b="Noch ein Satz.") in labels


@pytest.mark.slow  # the command line end to end; test_lexicon reads the same hub in the fast tier
def test_retrieval_command(pretrained, data_bin, tmp_path):
    en, de = tmp_path / "t.en", tmp_path / "t.de"
    for lang, path in (("en", en), ("de", de)):
        lines = open(SAMPLE / "en-de" / f"test.en-de.{lang}", encoding="utf-8").readlines()[:40]
        path.write_text("".join(lines), encoding="utf-8")
    js = tmp_path / "r.json"
    proc = run(
        [
            BIN / "python",
            "-m",
            "xlm_fairseq.evaluation.retrieval",
            pretrained,
            "--data",
            data_bin,
            "--src",
            f"en={en}",
            "--tgt",
            f"de={de}",
            "--json",
            js,
        ]
    )
    result = json.loads(js.read_text())
    assert result["pairs"] == 40
    for direction in ("en-de", "de-en"):  # accuracy@1: k of the 40 sentences found
        assert any(abs(result[direction] - 100 * k / 40) < 0.01 for k in range(41)), result
    assert "retrieval accuracy@1 over 40 pairs: en->de" in proc.stdout
    # a file against itself: every sentence finds itself (distinct lines, identical encodings)
    js2 = tmp_path / "same.json"
    run(
        [
            BIN / "python",
            "-m",
            "xlm_fairseq.evaluation.retrieval",
            pretrained,
            "--data",
            data_bin,
            "--src",
            f"en={en}",
            "--tgt",
            f"en={en}",
            "--json",
            js2,
        ]
    )
    assert json.loads(js2.read_text())["en-en"] == 100.0
    short = tmp_path / "short.de"
    short.write_text("Eins.\n", encoding="utf-8")
    bad = run(
        [
            BIN / "python",
            "-m",
            "xlm_fairseq.evaluation.retrieval",
            pretrained,
            "--data",
            data_bin,
            "--src",
            f"en={en}",
            "--tgt",
            f"de={short}",
        ],
        ok=False,
    )
    assert bad.returncode == 2 and "not line-aligned" in bad.stderr


@pytest.mark.slow
def test_xcls_recipe_tiny(tmp_path):
    """The recipe end to end at its CI size with two LM budgets in minutes (as --experiment runs):
    the LM's speed measured, each budget scored (perplexity, probe, retrieval) and fine-tuned, the
    best row's seeds and their self-training, the table and the figure; a vocabulary size of its own."""
    work = tmp_path / "w"
    xcls = ["bash", ROOT / "recipes" / "xcls.sh", "--tiny", "--lm-minutes", "0.1,0.2", "--work-dir", work]
    xcls += ["--vocab-size", "900"]
    path = {"PATH": f"{BIN}:/usr/bin:/bin"}
    run([*xcls, "--finetune-budgets", "last"], env_extra=path)  # the 0.1-min LM scored, not fine-tuned
    results = json.loads((work / "results.json").read_text())
    assert "classifier" not in results["runs"]["mlm_tlm@0.1min"] and results["seeds"] is None
    assert "| mlm_tlm | 0.1min |" in (work / "results.md").read_text()
    assert "vocabulary 900;" in (work / "results.md").read_text()
    assert (work / "corpus.txt").read_text() == "sample, vocabulary 900\n"  # a re-run without the option is refused
    assert sentencepiece.SentencePieceProcessor(model_file=str(work / "data-bin" / "spm.model")).vocab_size() == 900
    kept = work / "checkpoints" / "pretrain_mlm_tlm" / "budget_0.2min.pt"
    before = kept.stat().st_mtime_ns
    # the re-run adds its classifier, a second seed and a round of self-training (two runs at a time), nothing else
    run([*xcls, "--seeds", "2", "--jobs", "2", "--lm-clock", "time", "--self-train", "1"], env_extra=path)
    assert kept.stat().st_mtime_ns == before
    results = json.loads((work / "results.json").read_text())
    assert set(results["runs"]) == {"random", "mlm_tlm@0.1min", "mlm_tlm@0.2min"}
    speed = results["speed"]["mlm_tlm"]
    short, long = results["runs"]["mlm_tlm@0.1min"]["lm"], results["runs"]["mlm_tlm@0.2min"]["lm"]
    # budgets counted in updates from the measured speed; the second continues the first
    assert 0 < short["updates"] < long["updates"] <= round(speed * 60 * 0.2) + 1
    for lm in (short, long):
        assert lm["lm"]["en"]["fullmask_ppl"] > 1 and "en-de" in lm["retrieval"]
        assert lm["probe"]["contextual"]["csls_p@1"] <= lm["probe"]["contextual"]["csls_p@5"]
    assert results["probe_random"]["contextual"]["nn_p@1"] >= 0
    assert all("classifier" in r for r in results["runs"].values())
    # the German rows scored twice by each classifier: their own language id, and English's (--lang-id)
    assert all(0 <= r["classifier"]["acc_de_en_id"] <= 100 for r in results["runs"].values())
    random_dir = work / "checkpoints" / "classify_random"  # the predictions of both readings are kept
    assert (random_dir / "predictions" / "valid.de.pred.tsv").exists()
    assert (random_dir / "predictions_lang_id_en" / "valid.de.pred.tsv").exists()
    assert "'dropout': 0.1," in (work / "checkpoints" / "pretrain_mlm_tlm" / "train.log").read_text()
    seeds = results["seeds"]
    assert seeds["row"] in ("mlm_tlm@0.1min", "mlm_tlm@0.2min") and seeds["seeds"] == [1, 2] and "acc_de_en_id" in seeds
    assert (work / "checkpoints" / f"classify_{seeds['row']}_seed2" / "eval.json").exists()
    # self-training: German rows of the pool, labelled by the seed's classifier, beside the English ones
    trained, pool = results["self_training"], (work / "self_train" / "pool.de.tsv").read_text().splitlines()
    assert pool[0] == "id\ttext" and len(pool) > 100  # the pool carries no label
    (first,) = trained["rounds"]
    assert trained["row"] == seeds["row"] and first["pseudo_rows"] == [round(0.3 * (len(pool) - 1))] * 2
    assert all(0 <= a <= 100 for a in first["pseudo_accuracy"]) and "acc_de_en_id" in first
    assert 0 <= trained["tfidf"]["acc_de"] <= 100  # the reference self-trained on the same pool
    assert len(trained["english_only_acc_de_en_id"]) == len(first["acc_de_en_id_runs"]) == 2
    round_dir = work / "self_train" / f"{seeds['row']}_round1_seed2"
    teacher = work / "checkpoints" / f"classify_{seeds['row']}_seed2" / "pool_predictions" / "pool.de.pred.tsv"
    predicted = dict(line.split("\t")[:2] for line in teacher.read_text().splitlines()[1:])
    pseudo = [line.split("\t") for line in (round_dir / "train.de.tsv").read_text().splitlines()[1:]]
    assert len(pseudo) == first["pseudo_rows"][1] and all(label == predicted[i] for i, label, _ in pseudo)
    assert {text for _, _, text in pseudo} <= {line.split("\t")[1] for line in pool[1:]}
    table = (work / "results.md").read_text()
    rows = ("| random |", "| mlm_tlm | 0.1min |", "| mlm_tlm | 0.2min |", "| majority class |", "Seeds of")
    for row in (*rows, "- round 1: pseudo-labelled rows"):
        assert row in table, row
    assert (work / "figures" / "xcls.png").stat().st_size > 1000
    assert (work / "figures" / "xcls-self-training.png").stat().st_size > 1000
    bad = run([*xcls[:3], "--lm-minutes", "30,15", "--work-dir", work], ok=False, env_extra=path)
    assert bad.returncode == 2 and "--lm-minutes" in bad.stderr and "increasing minutes" in bad.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--size", "256"], "--size: expected DIMSxLAYERS"),
        (["--jobs", "0"], "--jobs: expected 1 or more"),
        (["--vocab-size", "0"], "--vocab-size: expected 1 or more"),
        (["--jobs", "2", "--lm-minutes", "1"], "--jobs: LMs side by side need --lm-clock time"),
        (["--device", "cuda"], "--device cuda: torch sees no GPU"),
        (["--self-train", "-1"], "--self-train: expected 0 or more rounds, got -1"),
        (["--self-train", "1", "--shared-data", "/nonexistent"], "--self-train: /nonexistent/en-de/ddtp.de not found"),
        (
            ["--corpus", "shared+ddtp", "--shared-data", "/nonexistent"],
            "--corpus shared+ddtp: /nonexistent/en-de/ddtp.en",
        ),
    ],
)
def test_xcls_recipe_bad_options_are_one_line(tmp_path, args, message):
    """The GPU options refuse what they cannot do before anything runs (this machine has no GPU)."""
    if "--device" in args and torch.cuda.is_available():
        args = ["--size", "7x2"]  # a GPU here: another refusal of the same kind
        message = "--size: expected DIMSxLAYERS like 256x4 (dims a multiple of 4)"
    proc = run(
        [BIN / "python", "-m", "recipes.experiments.xcls", "--tiny", "--work-dir", tmp_path / "w", *args], ok=False
    )
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2  # argparse: usage line + error line
    assert not (tmp_path / "w").exists()
