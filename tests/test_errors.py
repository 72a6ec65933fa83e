"""Bad input to the plugin's commands: both tasks in fairseq-train, fairseq-generate/-interactive,
the hub, the converter, and data-bins of other layouts. Each case is one exact ``error:`` line naming
the file or option, a non-zero exit, no traceback, and every file of the data-bin, the checkpoints
and the save dir byte for byte as before (SHA-256). ``preprocess/`` has its own matrix
(test_prepare.py: parallel files of different lengths, invalid UTF-8, empty files, ...).

Every case fails before training, so each runs in this process: the command's own entry point
(fairseq's ``cli_main`` with its argv, the hub, the converter's ``main``) must raise a user error
whose one line (what the plugin's excepthook prints) is the expected one. One case per fairseq
command (``END_TO_END``) runs as its own process, for the printed line and the exit status."""

import hashlib
import importlib
import json
import shutil
import sys

import pytest
import torch
from conftest import BIN, PRETRAIN_ARGS, ROOT, SAMPLE, UNMT_ARGS, head, in_process, run

from xlm_fairseq.data.dictionary import load_dictionary
from xlm_fairseq.patches.user_errors import user_error_line

GENERATE = ["--user-dir", ROOT / "xlm_fairseq", "--task", "translation_lm", "--gen-subset", "test", "--cpu"]
TRAIN_MT = [*UNMT_ARGS, "--langs", "en,de,ro", "--max-update", "2"]
TRAIN_LM = [*PRETRAIN_ARGS, "--langs", "en,de,ro", "--max-update", "2"]
VALIDATED_LM = [a for a in TRAIN_LM if a != "--disable-validation"]
NOT_READABLE = "not a readable checkpoint, truncated or corrupt (RuntimeError: PytorchStreamReader failed reading zip "
NOT_READABLE += "archive: failed finding central directory)"
NOT_TRANSLATION = (
    "a pretrained encoder (cross_lingual_lm), not a translation model; train one from it with --task translation_lm "
    "--pretrained-xlm-checkpoint CHECKPOINT, or use its features through XLMModel.from_pretrained"
)


INVALID_UTF8 = b"Hallo Welt\nEin Ged\xffcht\nmehr\n"  # what every case gets on standard input (as bytes)


def _hub(code):
    """A hub call: in this process, or (for the long-input test) ``python -c``."""
    return ["hub", code]


def _hub_process(code):
    return [sys.executable, "-c", f"import xlm_fairseq\nfrom xlm_fairseq import XLMModel\n{code}"]


def _generate(c, *args):
    """fairseq-generate of the copied UNMT checkpoint on the copied data-bin; test split unless args say."""
    return ["generate", c.data, *GENERATE, "--path", c.save / "checkpoint_last.pt", *args]


def _interactive(c, *args):
    """fairseq-interactive de->en with the copied UNMT checkpoint."""
    return ["interactive", c.data, *GENERATE, "-s", "de", "-t", "en", "--path", c.save / "checkpoint_last.pt", *args]


def _swap_two_symbols(c):
    data = c.data
    lines = (data / "dict.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    lines[20], lines[21] = lines[21], lines[20]
    (data / "dict.txt").write_text("".join(lines), encoding="utf-8")


def _truncate(path):
    content = path.read_bytes()
    path.write_bytes(content[: len(content) // 3])


def _init_embeddings(c, *more):
    return [
        "train",
        c.data,
        *TRAIN_LM,
        "--mlm-steps",
        "en",
        "--init-embeddings",
        c.tmp / "emb.pt",
        *more,
        "--save-dir",
        c.tmp / "new",
    ]


# id: (setup(c) run before the checksums are taken, command(c), the exact error line); c has the
# paths data (a copy of the data-bin), save (a copy of a UNMT save dir), lm (a copy of an LM checkpoint)
CASES = {
    # ---- fairseq-train ------------------------------------------------------------------
    "language missing from --langs": (
        None,
        lambda c: ["train", c.data, *TRAIN_LM, "--mlm-steps", "en,fr", "--save-dir", c.save],
        "--mlm-steps: language 'fr' is not in --langs en,de,ro",
    ),
    "--init-embeddings of another shape": (
        lambda c: torch.save(torch.zeros(7, 64), c.tmp / "emb.pt"),
        lambda c: _init_embeddings(c),
        "--init-embeddings {tmp}/emb.pt: embeddings of shape (7, 64), the encoder of the model expects "
        "({words}, 64) (the dictionary's size x --encoder-embed-dim)",
    ),
    "--init-embeddings not a torch file": (
        lambda c: (c.tmp / "emb.pt").write_text("0.1 0.2\n"),
        lambda c: _init_embeddings(c),
        "--init-embeddings {tmp}/emb.pt: not a file of torch.save",
    ),
    "--init-embeddings with a pretrained LM": (
        lambda c: torch.save(torch.zeros(7, 64), c.tmp / "emb.pt"),
        lambda c: _init_embeddings(c, "--pretrained-xlm-checkpoint", c.lm),
        "--init-embeddings starts a model from scratch; --pretrained-xlm-checkpoint has its own",
    ),
    "--bt-steps without monolingual data": (
        lambda c: [(c.data / f"train.ro.{ext}").unlink() for ext in ("bin", "idx")],
        lambda c: ["train", c.data, *TRAIN_MT, "--bt-steps", "ro-en-ro", "--disable-validation", "--save-dir", c.save],
        "missing monolingual data {data}/train.ro.bin",
    ),
    "--mt-steps without parallel data": (
        None,
        lambda c: ["train", c.data, *TRAIN_MT, "--mt-steps", "de-ro", "--disable-validation", "--save-dir", c.save],
        "no parallel train data for de-ro (looked for {data}/train.de-ro.de.bin)",
    ),
    # without parallel valid data a direction is validated by its round trip on monolingual valid text:
    # without that too, nothing is
    "--valid-lang-pairs without parallel or monolingual valid data": (
        lambda c: [(c.data / f"valid.de.{ext}").unlink() for ext in ("bin", "idx")],
        lambda c: ["train", c.data, *TRAIN_MT, "--ae-steps", "en", "--valid-lang-pairs", "de-ro", "--save-dir", c.save],
        "no valid data for any of de-ro: validation needs parallel valid.{{src}}-{{tgt}}.* or, for round trips, "
        "monolingual valid.{{src}} (use --disable-validation to train without)",
    ),
    "--best-checkpoint-metric of a language without valid data": (
        lambda c: [(c.data / f"valid.en.{ext}").unlink() for ext in ("bin", "idx")],
        lambda c: [
            "train",
            c.data,
            *VALIDATED_LM,
            "--mlm-steps",
            "en,de",
            "--best-checkpoint-metric",
            "mlm_en_ppl",
            "--save-dir",
            c.save,
        ],
        "--best-checkpoint-metric mlm_en_ppl: no valid data for mlm_en ({data}/valid.en.bin); validated: loss, ppl, "
        "mlm_de_ppl, mlm_de_fullmask_ppl",
    ),
    "--best-checkpoint-metric of a direction not validated": (
        None,
        lambda c: [
            "train",
            c.data,
            *TRAIN_MT,
            "--ae-steps",
            "en",
            "--bt-steps",
            "en-de-en",
            "--valid-lang-pairs",
            "en-de",
            "--best-checkpoint-metric",
            "bleu_de-en",
            "--save-dir",
            c.save,
        ],
        "--best-checkpoint-metric bleu_de-en: not among what 'valid' validates; validated: loss, ppl, mt_en-de_ppl, "
        "bleu_en-de, bleu_tok_en-de, bleu_mean, bleu_tok_mean",
    ),
    "--langs with a language the data-bin was not prepared for": (
        None,
        lambda c: ["train", c.data, *TRAIN_LM, "--langs", "en,de,ro,fr", "--mlm-steps", "en", "--save-dir", c.save],
        "--langs en,de,ro,fr: {data} was prepared for en,de,ro (its manifest.json), not fr; prepare the data with "
        "every language of --langs",
    ),
    "an explicit incompatible --criterion": (
        None,
        lambda c: [
            "train",
            c.data,
            *TRAIN_LM,
            "--mlm-steps",
            "en",
            "--criterion",
            "label_smoothed_cross_entropy",
            "--save-dir",
            c.tmp / "new",
        ],
        "--criterion label_smoothed_cross_entropy cannot train --task cross_lingual_lm; leave --criterion out (the "
        "task uses xlm_cross_entropy)",
    ),
    "--mlm-steps of a pair without parallel data": (
        None,
        lambda c: ["train", c.data, *TRAIN_LM, "--mlm-steps", "de-ro", "--save-dir", c.tmp / "new"],
        "missing parallel data {data}/train.de-ro.de.bin",
    ),
    "--span-ratio outside (0, 1]": (
        None,
        lambda c: [
            "train",
            c.data,
            *TRAIN_LM,
            "--span-steps",
            "de",
            "--span-ratio",
            "1.5",
            "--save-dir",
            c.tmp / "new",
        ],
        "--span-ratio must be in (0, 1], got 1.5",
    ),
    "--pretrained-xlm-checkpoint of another vocabulary": (
        lambda c: (c.data / "dict.txt").write_text(
            "".join((c.data / "dict.txt").read_text(encoding="utf-8").splitlines(keepends=True)[:-5]), encoding="utf-8"
        ),
        lambda c: [
            "train",
            c.data,
            *TRAIN_MT,
            "--ae-steps",
            "en",
            "--pretrained-xlm-checkpoint",
            c.lm,
            "--disable-validation",
            "--save-dir",
            c.tmp / "new",
        ],
        "{data}/dict.txt: not the dictionary {lm} was trained with (2006 types for its 2011 embedding rows); "
        "binarise the data with the pretrained model's dict.txt/spm.model (preprocess --spm-model/--dict)",
    ),
    "resume from a truncated checkpoint_last.pt": (
        lambda c: _truncate(c.save / "checkpoint_last.pt"),
        lambda c: ["train", c.data, *TRAIN_MT, "--ae-steps", "en", "--disable-validation", "--save-dir", c.save],
        "{save}/checkpoint_last.pt: " + NOT_READABLE + "; to resume from another checkpoint of that directory, "
        "give it as --restore-file (this file is left as it is)",
    ),
    "resume with another vocabulary": (
        lambda c: (c.data / "dict.txt").write_text(
            "".join((c.data / "dict.txt").read_text(encoding="utf-8").splitlines(keepends=True)[:-5]), encoding="utf-8"
        ),
        lambda c: ["train", c.data, *TRAIN_MT, "--ae-steps", "en", "--disable-validation", "--save-dir", c.save],
        "{save}/checkpoint_last.pt: the checkpoint's vocabulary has 2011 entries, the dictionary "
        "({data}/dict.txt) 2006: use the model with the data-bin and --langs it was trained with",
    ),
    "resume with --langs in another order": (
        None,
        lambda c: [
            "train",
            c.data,
            *TRAIN_MT,
            "--langs",
            "de,en,ro",
            "--ae-steps",
            "en",
            "--disable-validation",
            "--save-dir",
            c.save,
        ],
        "{save}/checkpoint_last.pt: the checkpoint was trained with --langs en,de,ro, not de,en,ro: language ids "
        "are positions in that list; give --langs en,de,ro",
    ),
    "--pretrained-xlm-checkpoint that is truncated": (
        lambda c: _truncate(c.lm),
        lambda c: [
            "train",
            c.data,
            *TRAIN_MT,
            "--ae-steps",
            "en",
            "--pretrained-xlm-checkpoint",
            c.lm,
            "--disable-validation",
            "--save-dir",
            c.tmp / "new",
        ],
        "{lm}: " + NOT_READABLE,
    ),
    # ---- fairseq-generate / fairseq-interactive ----------------------------------------------
    "generate with an LM checkpoint": (
        None,
        lambda c: ["generate", c.data, *GENERATE, "-s", "de", "-t", "en", "--path", c.lm],
        "the checkpoint is " + NOT_TRANSLATION,
    ),
    "interactive with an LM checkpoint": (
        None,
        lambda c: ["interactive", c.data, *GENERATE, "-s", "de", "-t", "en", "--path", c.lm],
        "the checkpoint is " + NOT_TRANSLATION,
    ),
    "interactive with invalid UTF-8 on standard input": (
        None,
        lambda c: _interactive(c),
        "invalid UTF-8 in standard input line 2 (byte 0xff at byte 8 of the line)",
    ),
    "interactive with an --input file of invalid UTF-8": (
        lambda c: (c.tmp / "input.de").write_bytes(INVALID_UTF8),
        lambda c: _interactive(c, "--input", c.tmp / "input.de"),
        "invalid UTF-8 in {tmp}/input.de line 2 (byte 0xff at byte 8 of the line)",
    ),
    "generate without -s/-t": (
        None,
        lambda c: _generate(c),
        "fairseq-generate translates one direction: give -s SRC -t TGT (of en,de,ro)",
    ),
    "generate a language the model lacks": (
        None,
        lambda c: _generate(c, "-s", "fr", "-t", "en"),
        "-s/-t: language 'fr' is not in --langs en,de,ro",
    ),
    "generate with --langs in another order": (
        None,
        lambda c: _generate(c, "-s", "de", "-t", "en", "--langs", "de,en,ro"),
        "--langs de,en,ro is not the model's language list en,de,ro; leave --langs out, or give that list in that "
        "order",
    ),
    "generate with another dictionary of the same size": (
        _swap_two_symbols,
        lambda c: _generate(c, "-s", "de", "-t", "en"),
        "{data}/dict.txt: not the dictionary the model was trained with (2011 types, other symbols or order); "
        "give the data-bin it was trained on, or a model dir made by xlm-fairseq-export",
    ),
    "generate a missing split": (
        None,
        lambda c: _generate(c, "-s", "de", "-t", "en", "--gen-subset", "test2"),
        "no parallel test2 data for de-en (looked for {data}/test2.de-en.de.bin)",
    ),
    "generate with a truncated checkpoint": (
        lambda c: _truncate(c.save / "checkpoint_last.pt"),
        lambda c: _generate(c, "-s", "de", "-t", "en"),
        "{save}/checkpoint_last.pt: " + NOT_READABLE,
    ),
    # ---- data-bins of other layouts ------------------------------------------------------
    "a fairseq-preprocess data-bin": (
        lambda c: [
            (c.data / "dict.txt").rename(c.data / "dict.en.txt"),
            shutil.copy(c.data / "dict.en.txt", c.data / "dict.de.txt"),
        ],
        lambda c: ["train", c.data, *TRAIN_LM, "--mlm-steps", "en", "--save-dir", c.tmp / "new"],
        "{data}/dict.txt: a fairseq-preprocess data-bin (dict.de.txt, dict.en.txt: a dictionary per language); "
        "XLM shares one dictionary: make the data-bin from text with `xlm-fairseq-prepare`",
    ),
    "XLM's own .pth data": (
        lambda c: [(c.data / "dict.txt").unlink(), (c.data / "train.en.pth").write_bytes(b"")],
        lambda c: ["train", c.data, *TRAIN_LM, "--mlm-steps", "en", "--save-dir", c.tmp / "new"],
        "{data}/dict.txt: XLM's own binarised data (.pth files); XLM shares one dictionary: make the data-bin from "
        "text with `xlm-fairseq-prepare`",
    ),
    "a data-bin of a newer format": (
        lambda c: (c.data / "manifest.json").write_text(
            json.dumps(dict(json.loads((c.data / "manifest.json").read_text()), format=2))
        ),
        lambda c: ["train", c.data, *TRAIN_LM, "--mlm-steps", "en", "--save-dir", c.tmp / "new"],
        "{data}/manifest.json: data-bin format 2, newer than this xlm-fairseq reads (1); update xlm-fairseq",
    ),
    # ---- the hub and the converter -------------------------------------------------------
    "translate with an LM in the hub": (
        None,
        lambda c: _hub(
            f"XLMModel.from_pretrained('{c.lm.parent}', checkpoint_file='{c.lm.name}', "
            f"data_name_or_path='{c.data}').translate('Hallo Welt', 'de', 'en')"
        ),
        "{lm_dir}: " + NOT_TRANSLATION,
    ),
    "a truncated checkpoint in the hub": (
        lambda c: _truncate(c.save / "checkpoint_last.pt"),
        lambda c: _hub(
            f"XLMModel.from_pretrained('{c.save}', checkpoint_file='checkpoint_last.pt', data_name_or_path='{c.data}')"
        ),
        "{save}/checkpoint_last.pt: " + NOT_READABLE,
    ),
    "convert a truncated checkpoint": (
        lambda c: _truncate(c.lm),
        lambda c: ["convert", c.lm, c.tmp / "converted"],
        "{lm}: not an XLM .pth nor an xlm_fairseq checkpoint (not a file torch.save writes)",
    ),
}


class Paths:
    def __init__(self, tmp, data_bin, unmt_dir, lm):
        self.tmp = tmp
        self.data = tmp / "data-bin"
        self.save = tmp / "save"
        self.lm = tmp / "lm" / "checkpoint_lm.pt"
        shutil.copytree(data_bin, self.data)
        shutil.copytree(unmt_dir, self.save)
        self.lm.parent.mkdir()
        shutil.copy(lm, self.lm)


def _checksums(*dirs):
    sums = {}
    for d in dirs:
        for path in sorted(d.rglob("*")):
            if path.is_file():
                sums[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return sums


# run as processes: one case per fairseq command
END_TO_END = {
    "language missing from --langs",
    "generate with an LM checkpoint",
    "interactive with invalid UTF-8 on standard input",
}
assert END_TO_END <= set(CASES)


def _error_in_process(argv, monkeypatch, capsys):
    """The error line the command prints, run in this process (it must fail with a user error, or
    the converter's exit status 2)."""
    kind, args = argv[0], [str(a) for a in argv[1:]]
    if kind == "convert":
        from xlm_fairseq.convert.cli import main

        monkeypatch.setattr(sys, "argv", ["convert"])
        status, err = in_process(main, args, capsys)
        assert status == 2
        lines = [line for line in err.splitlines() if "error:" in line]
        assert len(lines) == 1, lines
        return lines[0]
    if kind == "hub":

        def command():
            from xlm_fairseq import XLMModel

            exec(args[0], {"XLMModel": XLMModel})
    else:
        cli_main = importlib.import_module(f"fairseq_cli.{kind}").cli_main
        from xlm_fairseq import patches

        patches.install()  # as in the command, where the plugin is imported after fairseq_cli's module
        monkeypatch.setattr(sys, "argv", [f"fairseq-{kind}", *args])
        command = cli_main
    with pytest.raises(Exception) as failure:
        command()
    line = user_error_line(failure.value)
    assert line is not None, f"not a user error: {failure.value!r}"
    return f"error: {line}"


def _error_of_process(argv):
    argv = [BIN / f"fairseq-{argv[0]}", *argv[1:]]
    proc = run(argv, ok=False, input=INVALID_UTF8.decode("utf-8", "surrogateescape"), errors="surrogateescape")
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert proc.returncode != 0, proc.stderr[-3000:]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return errors[0]


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_and_loses_nothing(case, data_bin, unmt, pretrained, tmp_path, monkeypatch, capsys):
    setup, command, expected = CASES[case]
    c = Paths(tmp_path, data_bin, unmt[0], pretrained)
    if setup is not None:
        setup(c)
    before = _checksums(c.data, c.save, c.lm.parent)
    argv = command(c)
    if case in END_TO_END:
        error = _error_of_process(argv)
    else:
        error = _error_in_process(argv, monkeypatch, capsys)
    words = len(load_dictionary(str(c.data))) if "{words}" in expected else None  # some cases' data has no dict
    line = expected.format(data=c.data, save=c.save, lm=c.lm, lm_dir=c.lm.parent, tmp=c.tmp, words=words)
    assert error in (f"error: {line}", f"convert: error: {line}"), error
    assert _checksums(c.data, c.save, c.lm.parent) == before


@pytest.mark.slow
def test_long_inputs_are_cut_or_skipped_and_counted(unmt, data_bin, tmp_path):
    """A training line longer than the model's positions is skipped and counted (never a crash
    mid-epoch); an input to translate that long is cut to the positions, with a warning, and
    translated (fairseq-interactive and the hub)."""
    raw = tmp_path / "raw"
    raw.mkdir()
    long_en = " ".join(f"word{i % 50}" for i in range(1500))
    for lang in ("en", "de"):
        head(SAMPLE / "en-de" / f"train.en-de.{lang}", raw / f"p.{lang}", 200)
        with open(raw / f"p.{lang}", "a", encoding="utf-8") as f:
            f.write(long_en + "\n")
    data = tmp_path / "bin"
    run(
        [
            sys.executable,
            "-m",
            "preprocess.prepare",
            data,
            "--langs",
            "en,de",
            "--vocab-size",
            "500",
            "--quiet",
            "--para",
            f"train:en-de={raw}/p",
            "--para",
            f"valid:en-de={raw}/p",
        ]
    )
    proc = run(
        [
            BIN / "fairseq-train",
            data,
            *UNMT_ARGS,
            "--langs",
            "en,de",
            "--mt-steps",
            "en-de",
            "--max-update",
            "3",
            "--max-sentence-len",
            "2000",
            "--save-dir",
            tmp_path / "save",
        ]
    )
    log = proc.stdout + proc.stderr
    assert "mt_en-de: 1 of 201 samples over the max positions ([512. 512.]) skipped" in log, log[-3000:]

    text = " ".join(["Wort"] * 800)
    proc = run(
        [
            BIN / "fairseq-interactive",
            data_bin,
            *GENERATE,
            "-s",
            "de",
            "-t",
            "en",
            "--path",
            unmt[0] / "checkpoint_last.pt",
        ],
        input=f"Hallo Welt\n{text}\n",
    )
    assert "1 of 1 inputs over the model's 512 positions: translated from their first 510 subwords" in proc.stderr
    assert sum(line.startswith("H-") for line in proc.stdout.splitlines()) == 2
    code = (
        f"hub = XLMModel.from_pretrained('{unmt[0]}', checkpoint_file='checkpoint_last.pt', "
        f"data_name_or_path='{data_bin}')\n"
        f"print(len(hub.translate(['{text}', 'Hallo'], 'de', 'en', beam=1, split_sentences=False)))"
    )
    proc = run(_hub_process(code))
    assert proc.stdout.strip() == "2"
    assert "1 of 2 inputs over the model's 512 positions: translated from their first 510 subwords" in proc.stderr
