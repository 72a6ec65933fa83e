"""fairseq's --tensorboard-logdir with the plugin: every objective's metrics (per language or
direction), the schedules' weights and validation BLEU land in the event files, as TensorBoard
reads them (fairseq writes one directory per log: train_inner, train, valid)."""

import struct

from conftest import PRETRAIN_ARGS, UNMT_ARGS, fairseq


def scalar_tags(logdir):
    """{log: {tag: [(step, value)]}} of the TFRecord event files under ``logdir`` (length, CRC,
    record, CRC; records are tensorboard's Event protos, read with tensorboardX's)."""
    from tensorboardX.proto import event_pb2

    found = {}
    for path in logdir.glob("*/events.out.tfevents.*"):
        data, i, tags = path.read_bytes(), 0, found.setdefault(path.parent.name, {})
        while i < len(data):
            (n,) = struct.unpack("<Q", data[i : i + 8])
            event = event_pb2.Event.FromString(data[i + 12 : i + 12 + n])
            i += 12 + n + 4
            for value in event.summary.value:
                tags.setdefault(value.tag, []).append((event.step, value.simple_value))
    return found


def test_pretraining_curves(data_bin, tmp_path):
    logdir = tmp_path / "tb"
    fairseq(
        "train",
        data_bin,
        *PRETRAIN_ARGS,
        "--langs",
        "en,de",
        "--mlm-steps",
        "en,de,en-de",
        "--max-update",
        "4",
        "--log-interval",
        "2",
        "--no-save",
        "--tensorboard-logdir",
        logdir,
    )
    tags = scalar_tags(logdir)
    inner = tags["train_inner"]
    for tag in ("mlm_en_loss", "mlm_de_loss", "tlm_en-de_loss", "loss", "lr", "wps"):
        assert tag in inner, sorted(inner)
    assert [step for step, _ in inner["mlm_en_loss"]] == [2, 4] and all(v > 0 for _, v in inner["mlm_en_loss"])


def test_translation_curves_with_validation_bleu(pretrained, data_bin, tmp_path):
    logdir = tmp_path / "tb"
    fairseq(
        "train",
        data_bin,
        *UNMT_ARGS,
        "--langs",
        "en,de",
        "--ae-steps",
        "en,de",
        "--bt-steps",
        "en-de-en,de-en-de",
        "--valid-lang-pairs",
        "de-en,en-de",
        "--max-update",
        "4",
        "--validate-interval-updates",
        "4",
        "--log-interval",
        "2",
        "--pretrained-xlm-checkpoint",
        pretrained,
        "--save-dir",
        tmp_path / "ckpt",
        "--tensorboard-logdir",
        logdir,
    )
    tags = scalar_tags(logdir)
    for tag in ("ae_en_loss", "bt_de-en-de_loss", "bt_en-de-en_loss", "lambda_bt"):
        assert tag in tags["train_inner"], sorted(tags["train_inner"])
    valid = tags["valid"]
    for tag in ("bleu_de-en", "bleu_en-de", "bleu_tok_de-en", "mt_de-en_loss"):
        assert tag in valid, sorted(valid)
    assert valid["bleu_de-en"][-1][0] == 4 and 0 <= valid["bleu_de-en"][-1][1] <= 100
