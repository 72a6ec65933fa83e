"""Translators out to CTranslate2: ``xlm-fairseq-export --ctranslate2`` writes one CTranslate2
model per direction, and the exported directory's hub translates with it, giving fairseq's
translations token for token (float32) on a trained tiny model."""

import ast
import json
import os
import sys

import pytest
from conftest import ROOT, SAMPLE, blocking, generate_lines, head, in_process, run

from xlm_fairseq import XLMModel
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.inference.export import main as export_main

EXPORT = [sys.executable, "-m", "xlm_fairseq.inference.export"]


@pytest.fixture(scope="module")
def exported(unmt, tmp_path_factory):
    """The tiny UNMT model (en, de, ro) exported with float32 CTranslate2 models of every direction."""
    out = tmp_path_factory.mktemp("ct2") / "model"
    proc = run([*EXPORT, unmt[0] / "checkpoint_last.pt", out, "--ctranslate2"])
    assert "wrote" in proc.stdout
    return out


def _raw(lang, tmp_path, n=60):
    return head(SAMPLE / "en-de" / f"test.en-de.{lang}", tmp_path / f"test.{lang}", n).read_text().splitlines()


def test_one_model_per_direction(exported):
    pairs = sorted(os.listdir(exported / "ctranslate2"))
    assert pairs == ["de-en", "de-ro", "en-de", "en-ro", "ro-de", "ro-en", "settings.json"]
    assert sorted(os.listdir(exported / "ctranslate2" / "de-en")) == [
        "config.json",
        "model.bin",
        "shared_vocabulary.json",
    ]
    config = json.loads((exported / "ctranslate2" / "de-en" / "config.json").read_text())
    assert config["decoder_start_token"] == "</s>" and config["layer_norm_epsilon"] == 1e-12
    assert json.loads((exported / "ctranslate2" / "settings.json").read_text()) == {"compute_type": "default"}


@pytest.mark.parametrize("beam,lenpen", [(1, 1.0), (5, 0.0), (5, 1.0)])
def test_same_tokens_as_fairseq(exported, tmp_path, beam, lenpen):
    """Greedy and beam search: CTranslate2's pieces equal fairseq's SequenceGenerator's, de->en and
    en->ro (the language embedding of each side folds into its positions). With length normalisation
    (lenpen 1) a few of this barely trained model's hypotheses may differ: CTranslate2 bans </s> at
    the first step before the softmax, fairseq after it, so every hypothesis differs by
    log(1 - p(</s>)) at that step (0.06 here; ~0 for a trained model: 499 of 500 the same on the
    quickstart's test), which does not reorder sums but can reorder means of different lengths."""
    hub = XLMModel.from_pretrained(str(exported))
    dictionary = hub.task.source_dictionary
    for src, tgt in (("de", "en"), ("en", "ro")):
        tokens = [hub.encode(text, src) for text in _raw(src, tmp_path)]
        ours = hub.generate(tokens, src=src, tgt=tgt, beam=beam, max_len_b=30, lenpen=lenpen)
        ours = [[dictionary[i] for i in hypotheses[0]["tokens"][:-1]] for hypotheses in ours]
        pieces = [[dictionary[i] for i in t[:-1]] for t in tokens]
        max_positions = hub.models[0].max_decoder_positions()
        theirs = hub.ctranslate2.translate(pieces, src, tgt, beam, 0, 30, max_positions, length_penalty=lenpen)
        if beam > 1 and lenpen:
            assert sum(a == b for a, b in zip(theirs, ours)) >= 0.9 * len(ours)
        else:
            assert theirs == ours
        assert all(ours)  # no empty translation (fairseq's --min-len 1)


def test_translate_uses_ctranslate2(exported, unmt, data_bin, tmp_path):
    """The exported directory's translate() is CTranslate2's by default and gives fairseq-generate's
    text (lenpen 0: see test_same_tokens_as_fairseq); engine='fairseq' still works, and options
    CTranslate2 lacks are named."""
    hub = XLMModel.from_pretrained(str(exported))
    raw = _raw("de", tmp_path)
    ours = hub.translate(raw, src="de", tgt="en", beam=5, max_len_b=30, lenpen=0, split_sentences=False)
    assert hub.ctranslate2._translators  # it was CTranslate2 that translated
    options = ["--beam", "5", "--max-len-b", "30", "--lenpen", "0"]
    lines, _ = generate_lines(data_bin, unmt[0] / "checkpoint_last.pt", "de", "en", *options)
    assert ours == [lines["D"][i] for i in range(len(raw))]
    fairseq = hub.translate(
        raw[:5], "de", "en", beam=5, max_len_b=30, lenpen=0, engine="fairseq", split_sentences=False
    )
    assert fairseq == ours[:5]
    assert hub.translate(["", raw[0]], "de", "en", beam=5, max_len_b=30, lenpen=0, split_sentences=False) == [
        "",
        ours[0],
    ]
    with pytest.raises(XLMUserError, match="engine='ctranslate2' takes beam.*not sampling"):
        hub.translate(raw[0], src="de", tgt="en", sampling=True)


def test_int8(unmt, exported, tmp_path):
    """--quantization int8: loaded as int8 (the weights are quantized on load, see
    ctranslate2_models.py); translations stay close to float32's on this tiny model."""
    out = tmp_path / "int8"
    run(
        [
            *EXPORT,
            unmt[0] / "checkpoint_last.pt",
            out,
            "--ctranslate2",
            "--quantization",
            "int8",
            "--directions",
            "de-en",
        ]
    )
    assert sorted(os.listdir(out / "ctranslate2")) == ["de-en", "settings.json"]
    int8, fp32 = XLMModel.from_pretrained(str(out)), XLMModel.from_pretrained(str(exported))
    assert int8.ctranslate2.translator("de", "en").compute_type.startswith("int8")
    raw = _raw("de", tmp_path)
    a = int8.translate(raw, src="de", tgt="en", max_len_b=30)
    b = fp32.translate(raw, src="de", tgt="en", max_len_b=30)
    assert sum(x == y for x, y in zip(a, b)) >= len(raw) // 2, (a, b)


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--directions", "de-fr"], "--directions: 'de-fr' is not SRC-TGT of two of the model's languages"),
        (["--quantization", "int8"], "--quantization and --directions go with --ctranslate2"),
    ],
)
def test_bad_export_options_are_one_line(unmt, tmp_path, extra, message, capsys):
    """Refused by the command's main in this process (the command itself: test_a_pretrained_lm_is_refused)."""
    out = tmp_path / "out"
    args = [unmt[0] / "checkpoint_last.pt", out, *extra]
    status, err = in_process(export_main, args + (["--ctranslate2"] if "--directions" in extra else []), capsys)
    assert status == 2 and err.count("\n") == 1 and message in err
    assert not out.exists()


def test_a_pretrained_lm_is_refused(pretrained, tmp_path):
    out = tmp_path / "out"
    proc = run([*EXPORT, pretrained, out, "--ctranslate2"], ok=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "exports translation models" in proc.stderr
    assert not out.exists()


def test_serving_benchmark_child(exported, tmp_path):
    """bench/serving.py's CTranslate2 process: forced-length translations and a sentences/s figure."""
    hub = XLMModel.from_pretrained(str(exported))
    dictionary = hub.task.source_dictionary
    pieces = [[dictionary[i] for i in hub.encode(text, "de")[:-1]] for text in _raw("de", tmp_path, 10)]
    (tmp_path / "pieces.json").write_text(json.dumps(pieces))
    child = [sys.executable, ROOT / "bench" / "ctranslate2_child.py", exported, "de-en", tmp_path / "pieces.json"]
    result = json.loads(run([*child, "5", "12", "8"]).stdout.splitlines()[-1])
    assert result["words"] == 10 * 12 and result["compute_type"] == "float32"
    assert result["cpu_isa"] == os.environ.get("CT2_FORCE_CPU_ISA", "default")  # the hub may have set it
    assert result["sentences_per_s"] > 0 and result["peak_rss_mib"] > 0


@pytest.mark.parametrize(
    "flags,environ,expected",
    [
        ("fpu avx2 avx512f avx512cd avx512vl avx512dq avx512bw", {}, {"CT2_FORCE_CPU_ISA": "AVX512"}),
        ("fpu avx2 avx512f avx512cd avx512vl avx512dq", {}, {}),  # no avx512bw: CTranslate2 would refuse AVX512
        ("fpu avx2 avx512f avx512cd avx512vl avx512dq avx512bw", {"CT2_FORCE_CPU_ISA": "AVX2"}, {}),
        (None, {}, {}),  # no /proc/cpuinfo (not Linux)
    ],
)
def test_avx512_is_asked_for_where_the_cpu_has_it(tmp_path, flags, environ, expected):
    """CTranslate2 runs AVX2 kernels unless asked for AVX-512; the hub asks where the CPU has
    CTranslate2's AVX-512 set, and keeps a value the user set."""
    from xlm_fairseq.inference.ctranslate2_models import ctranslate2_environment

    cpuinfo = tmp_path / "cpuinfo"
    if flags is not None:
        cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    assert ctranslate2_environment(environ, str(cpuinfo)) == expected


def test_docs_serving_without_torch_runs_as_written(exported, tmp_path):
    """docs/serving.md's server without torch or fairseq: its lines, on the exported tiny model, in a
    process where torch, fairseq and the plugin cannot be imported."""
    text = (ROOT / "docs" / "serving.md").read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0] for b in text.split("```python\n")[1:]]
    snippet = next(b for b in blocks if "import ctranslate2" in b)
    script = tmp_path / "serve.py"
    blocked = blocking("torch", "fairseq", "fairseq_cli", "xlm_fairseq")
    script.write_text(blocked + snippet.replace('"models/unmt', f'"{exported}'))
    proc = run([sys.executable, script], cwd=ROOT)
    outputs = ast.literal_eval(proc.stdout.strip().splitlines()[-1])  # the snippet prints a list of str
    assert len(outputs) == 2 and all(isinstance(o, str) for o in outputs), proc.stdout
