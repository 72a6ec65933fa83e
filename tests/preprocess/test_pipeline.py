"""One text pipeline: a few hundred real lines (typographic quotes, dashes, ellipses, Romanian cedilla
and comma-below letters, control characters) give the same pieces through every path that reads
text -- preprocess/ (the binarised data-bin), the pipeline object, the tasks' fairseq tokenizer/BPE,
fairseq's registry (--tokenizer xlm --bpe xlm), the LM and translation hubs and fairseq-interactive --
with sentencepiece and with XLM's fastBPE codes (lowercased), and the same text back."""

import collections
import json
import subprocess
import sys
from argparse import Namespace

import pytest
import torch
from conftest import BIN, ROOT, SAMPLE, run

LANGS = ("en", "de", "ro")
TYPOGRAPHIC = "„“”«»–—…‚‘’"
CONTROL = ("\x07", "\u200b", "\t", "\ufeff", "\u00ad", "\x1f")


def _real_lines(lang, n_typographic=70, n_plain=30):
    pair = "en-ro" if lang == "ro" else "en-de"
    files = [SAMPLE / pair / f"{split}.{pair}.{lang}" for split in ("test", "valid")] + [SAMPLE / pair / f"mono.{lang}"]
    typographic, plain = [], []
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            if any(ch in line for ch in TYPOGRAPHIC):
                typographic.append(line)
            elif len(plain) < n_plain:
                plain.append(line)
    lines = typographic[:n_typographic] + plain
    if lang == "ro":  # both spellings of ș ț occur in real Romanian text: make half of them cedillas
        lines = [line.translate(str.maketrans("șțȘȚ", "şţŞŢ")) if i % 2 else line for i, line in enumerate(lines)]
    # a control or format character inside every fifth line
    return [line[:9] + CONTROL[i % len(CONTROL)] + line[9:] if i % 5 == 0 else line for i, line in enumerate(lines)]


@pytest.fixture(scope="module")
def lines(tmp_path_factory):
    raw = tmp_path_factory.mktemp("pipeline_raw")
    out = {}
    for lang in LANGS:
        out[lang] = _real_lines(lang)
        (raw / f"text.{lang}").write_text("".join(line + "\n" for line in out[lang]), encoding="utf-8")
    assert sum(map(len, out.values())) >= 300
    assert any("ş" in line or "ţ" in line for line in out["ro"]) and any("ș" in line for line in out["ro"])
    assert all(any(ch in "".join(out[lang]) for ch in "„«…–") for lang in ("de", "ro"))
    return raw, out


def _prepare(dest, raw, *options):
    mono = [arg for lang in LANGS for arg in ("--mono", f"train:{lang}={raw}/text.{lang}")]
    run([sys.executable, "-m", "preprocess.prepare", dest, "--langs", ",".join(LANGS), *mono, "--quiet", *options])
    return dest


def _binarised(dest, lang, dictionary):
    from fairseq.data import data_utils

    ds = data_utils.load_indexed_dataset(str(dest / f"train.{lang}"), dictionary)
    return [ds[i].tolist() for i in range(len(ds))]


def _task(data, lang):
    from fairseq import tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.options import get_generation_parser, parse_args_and_arch

    parser = get_generation_parser()
    args = parse_args_and_arch(
        parser, [str(data), "--user-dir", str(ROOT / "xlm_fairseq"), "--task", "translation_lm", "-s", lang, "-t", lang]
    )
    return tasks.setup_task(convert_namespace_to_omegaconf(args).task)


def _registry(data, lang):
    from fairseq.data import encoders

    tokenizer = encoders.build_tokenizer(Namespace(tokenizer="xlm", xlm_pipeline=str(data), source_lang=lang))
    return tokenizer, encoders.build_bpe(Namespace(bpe="xlm", xlm_pipeline=str(data)))


def _check_every_path(data, raw_lines, binarised_bin, hubs):
    """Ids of every path equal the binarised data-bin's; every decoder gives the same text back."""
    import xlm_fairseq  # noqa: F401  (registers --tokenizer xlm / --bpe xlm and the tasks)
    from preprocess.pipeline import load_pipeline
    from xlm_fairseq.data.data_bin import load_data_bin_dictionary as load_dictionary

    dictionary = load_dictionary(str(data))
    pipeline = load_pipeline([str(data)])
    unk_pieces = collections.Counter()
    for lang in LANGS:
        expected = _binarised(binarised_bin, lang, dictionary)
        task = _task(data, lang)
        task_tok, task_bpe = task.build_tokenizer(None), task.build_bpe(None)
        reg_tok, reg_bpe = _registry(data, lang)
        assert len(expected) == len(raw_lines[lang])
        for text, ids in zip(raw_lines[lang], expected):
            pieces = pipeline.pieces(text, lang)
            unk_pieces.update(p for p in pieces if dictionary.index(p) == dictionary.unk())
            assert [dictionary.index(p) for p in pieces] + [dictionary.eos()] == ids, text
            for tok, bpe in ((task_tok, task_bpe), (reg_tok, reg_bpe)):
                line = bpe.encode(tok.encode(text))
                assert dictionary.encode_line(line, add_if_not_exist=False).tolist() == ids, text
            for hub in hubs:
                assert hub.encode(text, lang).tolist()[-len(ids) :] == ids, (type(hub).__name__, text)
            # back to text: the pipeline, fairseq's decode (bpe, then tokenizer) and the hubs agree
            tokens = torch.tensor(ids)
            back = pipeline.detokenize([dictionary[i] for i in ids[:-1]], lang)
            task_tok.target_lang = lang
            assert task_tok.decode(task_bpe.decode(dictionary.string(tokens))) == back
            for hub in hubs:
                assert hub.decode(tokens, lang) == back
    return unk_pieces


def test_sentencepiece_pipeline_is_the_same_everywhere(lines, data_bin, pretrained, unmt, tmp_path):
    from xlm_fairseq import XLMModel

    raw, raw_lines = lines
    binarised = _prepare(
        tmp_path / "bin", raw, "--spm-model", data_bin / "spm.model", "--dict", data_bin / "dict.txt", "--workers", "2"
    )
    lm = XLMModel.from_pretrained(str(pretrained), data_name_or_path=str(data_bin))
    mt = XLMModel.from_pretrained(str(unmt[0]), "checkpoint_last.pt", data_name_or_path=str(data_bin))
    unk = _check_every_path(data_bin, raw_lines, binarised, [lm, mt])
    # what used to become <unk> at inference: typographic punctuation is normalised as in training
    assert not set(TYPOGRAPHIC) & set("".join(unk)), unk

    # fairseq-interactive, as the README runs it (no pipeline flags): its S- lines are those pieces
    proc = subprocess.run(
        [BIN / "fairseq-interactive", data_bin, "--user-dir", ROOT / "xlm_fairseq", "--task", "translation_lm"]
        + ["-s", "de", "-t", "en", "--path", unmt[0] / "checkpoint_last.pt", "--cpu", "--beam", "1", "--max-len-b", "1"]
        + ["--buffer-size", "64"],
        input="".join(line + "\n" for line in raw_lines["de"]),
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    shown = {}
    for line in proc.stdout.splitlines():
        if line.startswith("S-"):
            head, text = line.split("\t", 1)
            shown[int(head[2:])] = text
    assert len(shown) == len(raw_lines["de"])
    expected = [mt.string(torch.tensor(ids)) for ids in _binarised(binarised, "de", mt.src_dict)]
    assert [shown[i] for i in range(len(shown))] == expected


def _learn_bpe(words, merges):
    """fastBPE's learner, small: the most frequent adjacent pair, merged, ``merges`` times."""
    vocab = collections.Counter(tuple(w[:-1]) + (w[-1] + "</w>",) for w in words)
    codes = []
    for _ in range(merges):
        pairs = collections.Counter()
        for word, count in vocab.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        if not pairs:
            break
        (a, b), count = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        codes.append(f"{a} {b} {count}")
        merged = collections.Counter()
        for word, c in vocab.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == (a, b):
                    out.append(a + b)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += c
        vocab = merged
    return codes


def test_xlm_bpe_pipeline_is_the_same_everywhere(lines, tmp_path):
    from fairseq.checkpoint_utils import torch_persistent_save
    from omegaconf import OmegaConf

    from preprocess.pipeline import PipelineSettings, TextPipeline, read_settings
    from preprocess.text import tokenize
    from xlm_fairseq import XLMModel, convert

    raw, raw_lines = lines
    words = [w for lang in LANGS for line in raw_lines[lang] for w in tokenize(line, lang, True, True).split()]
    codes = tmp_path / "codes"
    codes.write_text("\n".join(_learn_bpe(words, 300)) + "\n", encoding="utf-8")
    applier = TextPipeline(PipelineSettings("xlm_bpe", "codes"), str(codes))
    counts = collections.Counter(p for w in words for p in applier.split(w))
    # the rarest pieces stay out of the dictionary: <unk> on every path alike
    kept = [p for p, c in counts.most_common() if c > 1]
    vocab = tmp_path / "vocab"
    vocab.write_text("".join(f"<special{i}> 0\n" for i in range(10)) + "".join(f"{p} {counts[p]}\n" for p in kept))
    data = _prepare(
        tmp_path / "bpe-bin",
        raw,
        "--bpe-codes",
        codes,
        "--dict",
        vocab,
        "--lowercase-and-remove-accent",
        "--ro-remove-diacritics",
    )
    settings = read_settings(str(data))
    assert settings.lowercase_and_remove_accent and settings.ro_remove_diacritics and settings.subwords == "xlm_bpe"

    # a (random) LM over this vocabulary, saved as training saves one: settings in its task_state
    cfg, _, model = convert.build_fairseq_model(str(data), list(LANGS), 32, 2, 4, 0.1, 0.1, 512, False, True)
    cfg_dict = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    state = {"cfg": cfg_dict, "model": model.state_dict(), "args": None, "extra_state": {}}
    state["optimizer_history"] = [{"criterion_name": "x", "optimizer_name": "x", "lr_scheduler_state": {}}]
    state["task_state"] = {"text_pipeline": settings.to_dict()}
    torch_persistent_save(state, str(tmp_path / "lm.pt"))
    lm = XLMModel.from_pretrained(str(tmp_path), "lm.pt", data_name_or_path=str(data))
    assert lm.tokenizer.settings == settings

    _check_every_path(data, raw_lines, data, [lm])
    assert json.loads((data / "text_pipeline.json").read_text())["lowercase_and_remove_accent"] is True
