"""xlm_fairseq.convert: HF XLM directory / original XLM .pth -> fairseq checkpoint -> HF, with the
same logits all the way; the command line and its refusals; safe checkpoint loading.

Everything runs on CPU with a tiny random XLM (vocabulary of ~70 entries, emb_dim 32, 2 layers)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import ROOT, SAMPLE, TRAIN_ARGS, fairseq, in_process
from hf_models import LANG2ID, SPECIALS, learn_bpe, make_hf_dir

import xlm_fairseq  # noqa: F401  (registers model/task, installs the safe loader)
from preprocess.errors import UserError
from xlm_fairseq import checkpoints, convert
from xlm_fairseq.convert.cli import main as convert_main
from xlm_fairseq.errors import XLMUserError

TOL = 1e-4


def write_xlm_pth(path, hf_model, hf_dir, module_prefix=True):
    """The HF model's weights as XLM's trainer saves them: model/params/dico_* (numpy in params)."""
    with open(os.path.join(hf_dir, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    id2word = {i: convert.hf_token_to_xlm_word(t) for t, i in vocab.items()}
    word2id = {w: i for i, w in id2word.items()}
    counts = {w: (0 if w in SPECIALS else 100 - i) for i, w in id2word.items()}
    cfg = hf_model.config
    state = {}
    for k, v in hf_model.state_dict().items():
        if k.endswith("position_ids"):
            continue
        k = k[len("transformer.") :] if k.startswith("transformer.") else k
        state[("module." if module_prefix else "") + k] = v.clone()
    params = {
        "emb_dim": np.int64(cfg.emb_dim),  # numpy scalars, as in real XLM checkpoints
        "n_layers": cfg.n_layers,
        "n_heads": cfg.n_heads,
        "dropout": np.float64(cfg.dropout),
        "attention_dropout": cfg.attention_dropout,
        "gelu_activation": True,
        "sinusoidal_embeddings": cfg.sinusoidal_embeddings,
        "use_lang_emb": cfg.use_lang_emb,
        "share_inout_emb": True,
        "asm": False,
        "n_langs": cfg.n_langs,
        "lang2id": dict(LANG2ID),
        "id2lang": {i: lang for lang, i in LANG2ID.items()},
        "langs": ["en", "de"],
        "n_words": np.int64(len(id2word)),
        "word_mask_keep_rand": np.array([0.8, 0.1, 0.1]),
        "lambda_mlm": "1",
    }
    torch.save(
        {"model": state, "params": params, "dico_id2word": id2word, "dico_word2id": word2id, "dico_counts": counts},
        path,
    )


def batch():
    """HF-order ids with right padding (pad = 2), and per-token language ids."""
    g = torch.Generator().manual_seed(1)
    lengths = [12, 7, 3, 9]
    tokens = torch.full((len(lengths), max(lengths)), 2, dtype=torch.long)
    langs = torch.zeros_like(tokens)
    for i, n in enumerate(lengths):
        tokens[i, :n] = torch.randint(4, VOCAB_SIZE[0], (n,), generator=g)
        tokens[i, 0] = tokens[i, n - 1] = 1  # </s> ... </s>
        tokens[i, 2] = 5  # <special1>, the mask
        langs[i, :n] = torch.randint(0, 2, (n,), generator=g)
    return tokens, langs


VOCAB_SIZE = [len(SPECIALS) + len(learn_bpe()[1])]


def hf_logits(model, tokens, langs):
    with torch.no_grad():
        return model(input_ids=tokens, langs=langs).logits


def our_logits_hf_order(fairseq_model, tokens, langs):
    """Our model on the same batch: ids mapped to fairseq order, logits mapped back to HF order."""
    perm = convert.swap_permutation(VOCAB_SIZE[0])
    fairseq_model.eval()
    with torch.no_grad():
        logits, _ = fairseq_model(perm[tokens], src_langs=langs)
    return logits[..., perm]


def max_delta(a, b, tokens):
    keep = tokens.ne(2)
    return (a[keep] - b[keep]).abs().max().item()


@pytest.fixture(scope="module", params=[True, False], ids=["lang_emb", "no_lang_emb"])
def hf_case(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_lang_emb" if request.param else "hf_no_lang_emb")
    hf_dir = str(root / "hf")
    # the no-language-embedding case also uses sinusoidal positions
    model = make_hf_dir(hf_dir, use_lang_emb=request.param, sinusoidal=not request.param)
    out = str(root / "converted")
    convert.convert_hf(hf_dir, out)
    return {"root": root, "hf_dir": hf_dir, "model": model, "out": out, "use_lang_emb": request.param}


# --------------------------------------------------------------------------------------------
# equivalence
# --------------------------------------------------------------------------------------------


def test_permutation_and_spelling():
    perm = convert.swap_permutation(6)
    assert perm.tolist() == [0, 2, 1, 3, 4, 5]
    assert perm[perm].tolist() == list(range(6))
    for hf, xlm in (("the</w>", "the"), ("th", "th@@"), ("<special3>", "<special3>"), ("</s>", "</s>"), (".</w>", ".")):
        assert convert.hf_token_to_xlm_word(hf) == xlm
        assert convert.xlm_word_to_hf_token(xlm) == hf


def checkpoint_langs(out_dir):
    return torch.load(os.path.join(out_dir, "model.pt"), weights_only=False)["cfg"]["task"]["langs"]


def test_converted_dir_layout(hf_case):
    from fairseq.data import Dictionary

    out = hf_case["out"]
    assert sorted(os.listdir(out)) == ["README.md", "bpe.codes", "dict.txt", "model.pt", "text_pipeline.json"]
    assert checkpoint_langs(out) == "en,de"  # the language list is stored once, with the model
    d = Dictionary.load(os.path.join(out, "dict.txt"))
    assert len(d) == VOCAB_SIZE[0]
    assert d.symbols[:4] == ["<s>", "<pad>", "</s>", "<unk>"] and d.symbols[4:14] == SPECIALS[4:]
    assert d.index("the") > 13 and "th@@" in d.indices  # fastBPE spelling
    info = json.load(open(os.path.join(out, "text_pipeline.json")))
    assert info["subwords"] == "xlm_bpe" and info["subword_model"] == "bpe.codes" and info["subword_sha256"]
    assert info["lowercase_and_remove_accent"] is True and info["ro_remove_diacritics"] is True
    # the checkpoint carries the same settings (fairseq's task_state), as a training checkpoint does
    assert checkpoints.load(os.path.join(out, "model.pt"))["task_state"]["text_pipeline"] == info
    merges = open(os.path.join(hf_case["hf_dir"], "merges.txt")).read()
    assert open(os.path.join(out, "bpe.codes")).read() == merges
    cfg = checkpoints.load(os.path.join(out, "model.pt"))["cfg"]
    assert cfg["model"]["no_lang_emb"] is (not hf_case["use_lang_emb"])
    assert cfg["model"]["sinusoidal_embeddings"] is (not hf_case["use_lang_emb"])
    assert cfg["model"]["max_positions"] == 48
    assert cfg["model"]["encoder_ffn_embed_dim"] == 128
    assert cfg["model"]["attention_dropout"] == 0.05
    assert cfg["task"]["langs"] == "en,de" and cfg["task"]["data"] == os.path.abspath(out)


def test_hf_equivalence(hf_case):
    from fairseq import checkpoint_utils

    from xlm_fairseq.models.xlm import XLMModel

    tokens, langs = batch()
    ref = hf_logits(hf_case["model"], tokens, langs)

    hub = XLMModel.from_pretrained(hf_case["out"])
    d_hub = max_delta(our_logits_hf_order(hub.model, tokens, langs), ref, tokens)

    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [os.path.join(hf_case["out"], "model.pt")], arg_overrides={"data": hf_case["out"]}
    )
    d_ens = max_delta(our_logits_hf_order(models[0], tokens, langs), ref, tokens)
    print(
        f"\nHF -> fairseq ({'lang emb' if hf_case['use_lang_emb'] else 'no lang emb, sinusoidal'}): "
        f"max |delta| logits = {d_hub:.2e} (from_pretrained), {d_ens:.2e} (load_model_ensemble_and_task)"
    )
    assert d_hub <= TOL and d_ens <= TOL
    assert task.langs == ["en", "de"] and len(task.source_dictionary) == VOCAB_SIZE[0]
    # language embeddings matter exactly when the source has them
    flipped = max_delta(our_logits_hf_order(hub.model, tokens, 1 - langs), ref, tokens)
    assert (flipped > 1e-2) is hf_case["use_lang_emb"]


def test_xlm_pth_equivalence(hf_case):
    pth = str(hf_case["root"] / "model.pth")
    write_xlm_pth(pth, hf_case["model"], hf_case["hf_dir"], module_prefix=hf_case["use_lang_emb"])
    out = str(hf_case["root"] / "from_pth")
    convert.convert_xlm_pth(pth, out, codes=os.path.join(hf_case["hf_dir"], "merges.txt"))
    from xlm_fairseq.models.xlm import XLMModel

    tokens, langs = batch()
    ref = hf_logits(hf_case["model"], tokens, langs)
    hub = XLMModel.from_pretrained(out)
    d = max_delta(our_logits_hf_order(hub.model, tokens, langs), ref, tokens)
    print(
        f"\nXLM .pth -> fairseq ({'lang emb' if hf_case['use_lang_emb'] else 'no lang emb, sinusoidal'}): "
        f"max |delta| logits = {d:.2e}"
    )
    assert d <= TOL
    # same dictionary words as the HF route; counts come from dico_counts
    words = lambda p: [line.split()[0] for line in open(os.path.join(p, "dict.txt"))]  # noqa: E731
    assert words(out) == words(hf_case["out"])
    assert open(os.path.join(out, "dict.txt")).readline().split() == ["<special0>", "0"]


def test_xlm_pth_without_codes_gets_readme(hf_case, tmp_path):
    pth = str(tmp_path / "m.pth")
    write_xlm_pth(pth, hf_case["model"], hf_case["hf_dir"])
    out = convert.convert_xlm_pth(pth, str(tmp_path / "out"))
    assert not os.path.exists(os.path.join(out, "bpe.codes"))
    readme = open(os.path.join(out, "README.md")).read()
    assert "bpe.codes" in readme and "Missing" in readme
    assert json.load(open(os.path.join(out, "text_pipeline.json")))["subword_sha256"] is None


def test_export_hf_roundtrip(hf_case, tmp_path):
    from transformers import XLMTokenizer, XLMWithLMHeadModel

    hf_out = convert.export_hf(hf_case["out"], str(tmp_path / "hf_again"))
    back = XLMWithLMHeadModel.from_pretrained(hf_out).eval()
    tokens, langs = batch()
    ref = hf_logits(hf_case["model"], tokens, langs)
    d = max_delta(hf_logits(back, tokens, langs), ref, tokens)
    print(
        f"\nfairseq -> HF round trip ({'lang emb' if hf_case['use_lang_emb'] else 'no lang emb, sinusoidal'}): "
        f"max |delta| logits = {d:.2e}"
    )
    assert d <= TOL
    assert back.config.use_lang_emb is hf_case["use_lang_emb"] and back.config.n_langs == 2
    assert back.config.sinusoidal_embeddings is (not hf_case["use_lang_emb"])
    assert back.config.lang2id == LANG2ID and back.config.max_position_embeddings == 48
    assert json.load(open(os.path.join(hf_out, "vocab.json"))) == json.load(
        open(os.path.join(hf_case["hf_dir"], "vocab.json"))
    )
    text = "The cat sat on the mat, here."
    pieces = XLMTokenizer.from_pretrained(hf_out).tokenize(text, lang="en")
    assert pieces == XLMTokenizer.from_pretrained(hf_case["hf_dir"]).tokenize(text, lang="en")
    assert pieces[:2] == ["the</w>", "cat</w>"] and pieces[-1] == ".</w>"


# --------------------------------------------------------------------------------------------
# command line and refusals
# --------------------------------------------------------------------------------------------


def _cli(*args):
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run(
        [sys.executable, "-m", "xlm_fairseq.convert", *args],
        cwd=str(ROOT),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _error_lines(stderr):
    # `import xlm_fairseq` itself may log an INFO line (fairseq turns root logging on at import)
    return [line for line in stderr.splitlines() if not line.startswith(("INFO:", "DEBUG:"))]


def test_cli(tmp_path, capsys):
    """The command converts; its refusals, each one line, come from the same main run in this process."""
    hf_dir = str(tmp_path / "hf")
    make_hf_dir(hf_dir)
    out = tmp_path / "cli_out"
    r = _cli(hf_dir, str(out))
    assert r.returncode == 0, r.stderr
    assert (out / "model.pt").is_file() and (out / "dict.txt").is_file()
    assert not [p for p in os.listdir(tmp_path) if "partial" in p]  # temp dir renamed away

    assert r.stdout.strip() == f"wrote {out}"
    status, err = in_process(convert_main, [hf_dir, out], capsys)  # exists, not empty, no --force
    lines = _error_lines(err)
    assert status == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "--force" in lines[0]

    bad = tmp_path / "notes.txt"
    bad.write_text("not a model\n")
    status, err = in_process(convert_main, [bad, tmp_path / "never"], capsys)
    lines = _error_lines(err)
    assert status == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "not an XLM .pth" in lines[0]
    assert not (tmp_path / "never").exists()


def test_refusals_in_process(hf_case, tmp_path):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("x")
    with pytest.raises(UserError, match="not empty"):  # preprocess.files refuses OUT_DIR
        convert.convert_hf(hf_case["hf_dir"], str(taken))
    assert (taken / "keep.txt").exists()
    with pytest.raises(XLMUserError, match="neither"):
        convert.convert(str(tmp_path), str(tmp_path / "o"))  # a directory of nothing known
    with pytest.raises(XLMUserError, match="names no languages"):
        cfg = json.load(open(os.path.join(hf_case["hf_dir"], "config.json")))
        src = tmp_path / "nolangs"
        src.mkdir()
        for name in os.listdir(hf_case["hf_dir"]):
            (src / name).write_bytes(open(os.path.join(hf_case["hf_dir"], name), "rb").read())
        cfg.pop("lang2id"), cfg.pop("id2lang")
        (src / "config.json").write_text(json.dumps(cfg))
        (src / "tokenizer_config.json").write_text("{}")
        convert.convert_hf(str(src), str(tmp_path / "o2"))
    out = convert.convert_hf(str(tmp_path / "nolangs"), str(tmp_path / "o3"), langs="en,de")
    assert checkpoint_langs(out) == "en,de"
    with pytest.raises(XLMUserError, match="already an xlm_fairseq"):
        convert.convert(hf_case["out"], str(tmp_path / "o4"))
    # --force replaces
    out = convert.convert_hf(hf_case["hf_dir"], str(taken), force=True)
    assert not (taken / "keep.txt").exists() and (taken / "model.pt").exists()


# --------------------------------------------------------------------------------------------
# safe loading
# --------------------------------------------------------------------------------------------


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch '{self.marker}'",))


def test_checkpoint_reader_refuses_code(tmp_path):
    from fairseq import checkpoint_utils

    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"model": {"w": torch.zeros(2)}, "cfg": None, "payload": _Evil(str(marker))}, str(path))

    with pytest.raises(XLMUserError) as e:
        checkpoints.load(str(path))
    print("\ncheckpoints.load:", e.value)
    assert "refused" in str(e.value) and "system" in str(e.value)
    assert not marker.exists()

    with pytest.raises(XLMUserError, match="refused to load, it asks to run code") as e:  # fairseq's reader
        checkpoint_utils.load_checkpoint_to_cpu(str(path))
    assert "system" in str(e.value)
    assert not marker.exists()

    with pytest.raises(XLMUserError, match="refused"):  # the converter reads through checkpoints.load too
        convert.convert(str(path), str(tmp_path / "out"))
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_converted_checkpoint_loads_with_plain_torch_load(hf_case):
    state = torch.load(os.path.join(hf_case["out"], "model.pt"))  # torch's default: weights_only
    assert "encoder.transformer.embeddings.weight" in state["model"]
    assert state["cfg"]["model"]["_name"] == "xlm_transformer"


@pytest.mark.slow  # two fairseq-train runs a case; the fast tier checks the converted models in process
def test_classifier_from_converted_model(hf_case, tmp_path):
    """A converted Hugging Face model fine-tunes as a classifier: its vocabulary, lowercasing BPE
    pipeline and languages come from the converted dir; an --arch that does not fit it is one line
    saying how it was built."""

    cfg = checkpoints.load(os.path.join(hf_case["out"], "model.pt"))["cfg"]["model"]
    arch = [
        f"--{n.replace('_', '-')}={cfg[n]}"
        for n in (
            "encoder_embed_dim",
            "encoder_layers",
            "encoder_attention_heads",
            "encoder_ffn_embed_dim",
            "max_positions",
        )
    ]
    arch += [f"--{n.replace('_', '-')}" for n in ("no_lang_emb", "sinusoidal_embeddings") if cfg[n]]
    data = tmp_path / "data"
    data.mkdir()
    train = (SAMPLE / "xcls" / "train.en.tsv").read_text(encoding="utf-8").splitlines(keepends=True)[:41]
    (data / "train.en.tsv").write_text("".join(train), encoding="utf-8")
    labels = {line.split("\t")[1] for line in train[1:]}
    for name in ("valid.en.tsv", "valid.de.tsv"):  # the rows of labels the 40 training rows have
        lines = (SAMPLE / "xcls" / name).read_text(encoding="utf-8").splitlines(keepends=True)
        (data / name).write_text("".join(lines[:1] + [x for x in lines[1:60] if x.split("\t")[1] in labels]))
    common = [
        *TRAIN_ARGS,
        "--task",
        "xlm_classification",
        "--pretrained-xlm-checkpoint",
        hf_case["out"],
        "--truncate-len",
        "20",
        "--batch-size",
        "8",
        "--lr",
        "0.0001",
        "--max-update",
        "4",
    ]
    proc = fairseq("train", data, *common, *arch, "--save-dir", tmp_path / "save")
    log = proc.stdout + proc.stderr
    assert "initialised from" in log and "truncated to --truncate-len 20" in log
    valid = [line for line in log.splitlines() if "| valid |" in line]
    assert valid and '"valid_acc_de"' in valid[-1]
    wrong = fairseq("train", data, *common, "--save-dir", tmp_path / "wrong", ok=False)  # xlm_tiny's own dims
    errors = [line for line in wrong.stderr.splitlines() if line.startswith("error: ")]
    assert wrong.returncode != 0 and len(errors) == 1
    assert "the model of --arch" in errors[0] and f"--encoder-embed-dim {cfg['encoder_embed_dim']}" in errors[0]
