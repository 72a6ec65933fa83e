"""Released models through maintained libraries: Hugging Face ids resolved by huggingface_hub (offline
here, against a cache laid out as huggingface_hub lays it out), the lowercasing a model was trained
with read from its vocabulary, and a sentencepiece LM exported with a working fast HF tokenizer."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch
from conftest import ROOT
from hf_models import make_hf_dir

from xlm_fairseq import checkpoints, convert

COMMIT = "0123456789abcdef0123456789abcdef01234567"
REPO = "FacebookAI/xlm-tiny-ende"


def _hf_cache(root, hf_dir, repo=REPO):
    """``HF_HUB_CACHE`` with ``repo`` at ``main`` = COMMIT, as huggingface_hub stores a download."""
    model = root / f"models--{repo.replace('/', '--')}"
    (model / "refs").mkdir(parents=True)
    (model / "refs" / "main").write_text(COMMIT)
    shutil.copytree(hf_dir, model / "snapshots" / COMMIT)
    return root


def _env(tmp_path, **extra):
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    env.update(HF_HUB_CACHE=str(tmp_path / "hub"), XLM_FAIRSEQ_CACHE=str(tmp_path / "xlmcache"), **extra)
    return env


def _python(code_or_args, env):
    args = ["-c", code_or_args] if isinstance(code_or_args, str) else code_or_args
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=ROOT)


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("released") / "hf"
    make_hf_dir(str(d))
    return d


@pytest.mark.slow  # Hub ids end to end (a subprocess per route); test_hub converts HF dirs in the fast tier
def test_convert_and_from_pretrained_take_hub_ids(hf_dir, tmp_path):
    _hf_cache(tmp_path / "hub", hf_dir)
    env = _env(tmp_path)
    by_id = tmp_path / "by-id"
    proc = _python(["-m", "xlm_fairseq.convert", REPO, str(by_id)], env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    by_dir = convert.convert_hf(str(hf_dir), str(tmp_path / "by-dir"))
    for name in ("dict.txt", "bpe.codes", "text_pipeline.json"):
        assert (by_id / name).read_bytes() == open(os.path.join(by_dir, name), "rb").read(), name
    ours, theirs = (
        checkpoints.load(by_id / "model.pt")["model"],
        checkpoints.load(os.path.join(by_dir, "model.pt"))["model"],
    )
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)

    # from_pretrained: converted once into XLM_FAIRSEQ_CACHE, then reused
    code = (
        "import sys; from xlm_fairseq import XLMModel; m = XLMModel.from_pretrained(sys.argv[1]); "
        "t = m.encode('the cat sat on the mat .', 'en'); print(m.model_dir, tuple(m.extract_features(t, 'en').shape))"
    )
    first = _python([*["-c", code], REPO], env)
    assert first.returncode == 0, first.stderr[-2000:]
    model_dir, shape = first.stdout.split()[0], first.stdout.split(" ", 1)[1].strip()
    assert model_dir == str(tmp_path / "xlmcache" / "converted" / f"FacebookAI--xlm-tiny-ende--{COMMIT}")
    assert shape.startswith("(1, ") and shape.endswith(", 32)")
    mtime = os.path.getmtime(os.path.join(model_dir, "model.pt"))
    again = _python([*["-c", code], REPO], env)
    assert again.returncode == 0 and again.stdout == first.stdout
    assert os.path.getmtime(os.path.join(model_dir, "model.pt")) == mtime  # not converted again


def test_unknown_hub_id_offline_is_one_line(tmp_path):
    (tmp_path / "hub").mkdir()
    out = tmp_path / "out"
    proc = _python(["-m", "xlm_fairseq.convert", "FacebookAI/xlm-mlm-ende-1024", str(out)], _env(tmp_path))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "FacebookAI/xlm-mlm-ende-1024: not in the Hugging Face cache" in proc.stderr
    assert "HF_HUB_OFFLINE" in proc.stderr and not out.exists()


def test_lowercasing_follows_the_vocabulary(hf_dir, tmp_path):
    """HF's tokenizer_config.json says lowercase for XLM's cased MT models too: the vocabulary decides."""
    lowercase = convert.read_hf_dir(str(hf_dir))
    assert lowercase.lowercase is True and not any("do_lowercase" in n for n in lowercase.notes)

    cased_dir = tmp_path / "cased"
    shutil.copytree(hf_dir, cased_dir)
    vocab = json.loads((cased_dir / "vocab.json").read_text())
    vocab = {(t[0].upper() + t[1:] if i > 20 and t[0].isalpha() else t): i for t, i in vocab.items()}
    (cased_dir / "vocab.json").write_text(json.dumps(vocab))
    cased = convert.read_hf_dir(str(cased_dir))
    assert cased.lowercase is False
    assert any("do_lowercase_and_remove_accent=true" in n and "uppercase" in n for n in cased.notes)
    out = convert.convert_hf(str(cased_dir), str(tmp_path / "out"))
    assert json.load(open(os.path.join(out, "text_pipeline.json")))["lowercase_and_remove_accent"] is False
    assert "uppercase" in open(os.path.join(out, "README.md")).read()
    # --lowercase wins over the vocabulary
    assert convert.read_hf_dir(str(cased_dir), lowercase=True).lowercase is True


def test_sentencepiece_lm_exports_a_fast_tokenizer(pretrained, data_bin, tmp_path):
    """--to hf on our own (sentencepiece) LM: AutoTokenizer gives the model's ids for Moses-tokenised
    text, and transformers' XLMWithLMHeadModel on them gives our logits."""
    from conftest import SAMPLE
    from transformers import AutoTokenizer, PreTrainedTokenizerFast, XLMWithLMHeadModel

    from xlm_fairseq import XLMModel

    out = convert.export_hf(str(pretrained), str(tmp_path / "hf"))
    hub = XLMModel.from_pretrained(str(pretrained), data_name_or_path=str(data_bin))
    hf_tok = AutoTokenizer.from_pretrained(out)
    assert isinstance(hf_tok, PreTrainedTokenizerFast)
    hf = XLMWithLMHeadModel.from_pretrained(out).eval()
    perm = convert.swap_permutation(len(hub.dictionary))
    lines = (SAMPLE / "en-de" / "test.en-de.de").read_text(encoding="utf-8").splitlines()[:20]
    for text in lines:
        ours = hub.encode(text, "de")
        ids = hf_tok(hub.tokenizer.tokenize(text, "de"))["input_ids"]
        assert ids == perm[ours].tolist(), text
        if text is lines[0]:
            with torch.no_grad():
                langs = torch.full((1, len(ids)), hub.lang2id["de"])
                theirs = hf(input_ids=torch.tensor([ids]), langs=langs).logits
            assert (hub.predict(ours, "de")[..., perm] - theirs).abs().max() <= 1e-4
    assert hf_tok.mask_token == "<special1>" and hf_tok.convert_tokens_to_ids("<special1>") == hf.config.mask_index
    assert "Moses" in open(os.path.join(out, "README.md")).read()
