"""Corpora bigger than one data-bin: ``DATA1:DATA2:...`` as fairseq's translation tasks read it (the
training data of epoch k from shard (k - 1) mod n; valid and test from the first), every shard with
the first one's dictionary; a shard written with preprocess.prepare --spm-model/--dict of the first."""

import re
import sys

import pytest
from conftest import PRETRAIN_ARGS, SAMPLE, UNMT_ARGS, fairseq, run

LINES = slice(3000, 3400)  # other lines of the sample than the session's data-bin holds


@pytest.fixture(scope="module")
def second_shard(data_bin, tmp_path_factory):
    root = tmp_path_factory.mktemp("shard")
    args = []
    for lang in ("en", "de"):
        lines = (SAMPLE / "en-de" / f"mono.{lang}").read_text(encoding="utf-8").splitlines(True)[LINES]
        (root / f"mono.{lang}").write_text("".join(lines), encoding="utf-8")
        args += ["--mono", f"train:{lang}={root / f'mono.{lang}'}"]
    shard = root / "data-bin-2"
    run(
        [
            sys.executable,
            "-m",
            "preprocess.prepare",
            shard,
            "--langs",
            "en,de",
            "--spm-model",
            data_bin / "spm.model",
            "--dict",
            data_bin / "dict.txt",
            *args,
            "--quiet",
        ]
    )
    return shard


def _read_from(log: str, split: str, key: str):
    """The data file each load of ``split`` ``key`` read, in order (the tasks log it)."""
    return re.findall(rf"{split} {re.escape(key)}: \d+ samples from (\S+)", log)


def test_pretraining_reads_one_shard_per_epoch(data_bin, second_shard, tmp_path):
    """Epoch 1 from the first shard, epoch 2 from the second (fairseq loads the next epoch's data as
    an epoch ends, so one epoch shows both); the small shard first, so that the epoch is short."""
    proc = fairseq(
        "train",
        f"{second_shard}:{data_bin}",
        *PRETRAIN_ARGS,
        "--langs",
        "en,de",
        "--mlm-steps",
        "en,de",
        "--max-epoch",
        "1",
        "--no-save",
        "--log-interval",
        "1000",
    )
    log = proc.stdout + proc.stderr
    assert "2 shards" in log
    assert _read_from(log, "train", "mlm_en") == [f"{second_shard}/train.en", f"{data_bin}/train.en"]


def test_translation_reads_one_shard_per_epoch(pretrained, data_bin, second_shard, tmp_path):
    proc = fairseq(
        "train",
        f"{second_shard}:{data_bin}",
        *UNMT_ARGS,
        "--langs",
        "en,de",
        "--ae-steps",
        "en,de",
        "--disable-validation",
        "--max-epoch",
        "1",
        "--pretrained-xlm-checkpoint",
        pretrained,
        "--save-dir",
        tmp_path / "ckpt",
        "--log-interval",
        "1000",
    )
    log = proc.stdout + proc.stderr
    # epoch 1 from the first shard named (400 lines a language), epoch 2 from the next (3,000)
    sizes = [int(n) for n in re.findall(r"train ae_en: (\d+) samples from", log)]
    assert sizes == [400, 3000], sizes


def test_a_shard_with_another_dictionary_is_one_line(data_bin, tmp_path):
    other = tmp_path / "other"
    mono = tmp_path / "mono.en"
    mono.write_text("".join((SAMPLE / "en-de" / "mono.en").read_text().splitlines(True)[:300]))
    run(
        [
            sys.executable,
            "-m",
            "preprocess.prepare",
            other,
            "--langs",
            "en",
            "--vocab-size",
            "300",
            "--mono",
            f"train:en={mono}",
            "--quiet",
        ]
    )
    proc = fairseq(
        "train",
        f"{data_bin}:{other}",
        *PRETRAIN_ARGS,
        "--langs",
        "en",
        "--mlm-steps",
        "en",
        "--max-update",
        "1",
        "--no-save",
        ok=False,
    )
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert proc.returncode != 0 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert f"{other}/dict.txt: not the dictionary of {data_bin}/dict.txt" in errors[0]
