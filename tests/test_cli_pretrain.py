"""cross_lingual_lm through fairseq's own CLI: options, MLM/TLM/CLM training, metrics, resume, errors."""

import torch
from conftest import PRETRAIN_ARGS, ROOT, fairseq, json_logs


def test_cross_lingual_lm_is_ours_in_the_cli():
    out = fairseq("train", "--user-dir", ROOT / "xlm_fairseq", "--task", "cross_lingual_lm", "--help").stdout
    for option in (
        "--mlm-steps",
        "--clm-steps",
        "--sample-alpha",
        "--lg-sampling-factor",
        "--mask-keep-rand",
        "--mlm-words-only",
        "--pretrained-xlm-checkpoint",
    ):
        assert option in out, option
    assert "--monolingual-langs" not in out, "fairseq's legacy cross_lingual_lm options must be gone"


def test_pretraining_end_to_end(data_bin, tmp_path):
    """MLM on en/de, TLM on en-de, CLM on en, a few hundred updates: valid MLM perplexity falls and
    every objective's metrics are logged in training and validation."""
    save = tmp_path / "ckpt"
    args = [a for a in PRETRAIN_ARGS if a != "--disable-validation"]
    proc = fairseq(
        "train",
        data_bin,
        *args,
        "--langs",
        "en,de,ro",
        "--mlm-steps",
        "en,de,en-de",
        "--clm-steps",
        "en",
        "--max-update",
        "240",
        "--validate-interval-updates",
        "40",
        "--save-interval-updates",
        "240",
        "--best-checkpoint-metric",
        "mlm_fullmask_ppl",
        "--save-dir",
        save,
    )
    valid = json_logs(proc.stdout + proc.stderr, "valid")
    train = json_logs(proc.stdout + proc.stderr, "train")
    assert len(valid) >= 3
    for key in ("mlm_en", "mlm_de", "tlm_en-de", "clm_en"):
        for metric in ("loss", "ppl", "acc"):
            assert f"valid_{key}_{metric}" in valid[-1], (key, metric, valid[-1].keys())
            assert f"train_{key}_{metric}" in train[-1]
    # XLM's validation perplexity: the same positions, all shown as the mask token (harder)
    for key in ("mlm_en", "mlm_de", "tlm_en-de"):
        assert float(valid[-1][f"valid_{key}_fullmask_ppl"]) > float(valid[-1][f"valid_{key}_ppl"]), key
    assert "valid_clm_en_fullmask_ppl" not in valid[-1]
    # XLM's valid_mlm_ppl, what its recipes select on: the mean over the MLM languages (not TLM's)
    for record in valid:
        mean = (float(record["valid_mlm_en_fullmask_ppl"]) + float(record["valid_mlm_de_fullmask_ppl"])) / 2
        assert abs(float(record["valid_mlm_fullmask_ppl"]) - mean) <= 0.01 * mean, record
    assert "train_mlm_fullmask_ppl" not in train[-1]
    first, last = float(valid[0]["valid_mlm_en_ppl"]), float(valid[-1]["valid_mlm_en_ppl"])
    print(
        f"valid mlm_en_ppl: {first} at update {valid[0]['valid_num_updates']} "
        f"-> {last} at {valid[-1]['valid_num_updates']}"
    )
    assert last < 0.75 * first, (first, last)
    assert (save / "checkpoint_best.pt").exists()
    # the checkpoint loads with the hub interface
    from xlm_fairseq import XLMModel

    hub = XLMModel.from_pretrained(str(save), checkpoint_file="checkpoint_best.pt", data_name_or_path=str(data_bin))
    feats = hub.extract_features(hub.encode("This is a test.", "en"), "en")
    assert feats.shape[-1] == 64


def test_resume_continues_from_checkpoint_last(data_bin, tmp_path):
    save = tmp_path / "ckpt"
    common = [
        data_bin,
        *PRETRAIN_ARGS,
        "--langs",
        "en,de,ro",
        "--mlm-steps",
        "en,de",
        "--save-dir",
        save,
        "--log-interval",
        "1",
    ]
    fairseq("train", *common, "--max-update", "10")
    state = torch.load(save / "checkpoint_last.pt")  # default weights_only loader, allowlisted by the plugin
    assert state["optimizer_history"][-1]["num_updates"] == 10
    proc = fairseq("train", *common, "--max-update", "15")
    updates = [int(r["num_updates"]) for r in json_logs(proc.stdout + proc.stderr, "train_inner")]
    assert updates[0] == 11 and updates[-1] == 15, updates


def _error_line(proc):
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode != 0
    assert len(lines) == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_explicit_incompatible_criterion_is_refused(data_bin, tmp_path):
    proc = fairseq(
        "train",
        data_bin,
        *PRETRAIN_ARGS,
        "--langs",
        "en,de",
        "--mlm-steps",
        "en",
        "--max-update",
        "1",
        "--criterion",
        "label_smoothed_cross_entropy",
        "--save-dir",
        tmp_path / "c",
        ok=False,
    )
    assert "--criterion label_smoothed_cross_entropy" in _error_line(proc)
    assert not (tmp_path / "c" / "checkpoint_last.pt").exists()


def test_language_not_in_langs_is_refused(data_bin, tmp_path):
    proc = fairseq(
        "train",
        data_bin,
        *PRETRAIN_ARGS,
        "--langs",
        "en,de",
        "--mlm-steps",
        "en,fr",
        "--max-update",
        "1",
        "--save-dir",
        tmp_path / "c",
        ok=False,
    )
    line = _error_line(proc)
    assert "--mlm-steps" in line and "'fr'" in line


def test_missing_training_data_names_the_file(data_bin, tmp_path):
    proc = fairseq(
        "train",
        data_bin,
        *PRETRAIN_ARGS,
        "--langs",
        "en,de,ro",
        "--mlm-steps",
        "de-ro",
        "--max-update",
        "1",
        "--save-dir",
        tmp_path / "c",
        ok=False,
    )
    line = _error_line(proc)
    assert "train.de-ro.de.bin" in line


def test_restart_from_pretrained_keeps_weights_and_remaps_languages(pretrained, data_bin, tmp_path):
    """--pretrained-xlm-checkpoint starts from a checkpoint; languages are matched by name."""
    from fairseq import checkpoint_utils

    save = tmp_path / "c"
    fairseq(
        "train",
        data_bin,
        *PRETRAIN_ARGS,
        "--langs",
        "ro,en",
        "--mlm-steps",
        "en",
        "--max-update",
        "1",
        "--lr",
        "1e-9",
        "--warmup-updates",
        "0",
        "--lr-scheduler",
        "fixed",
        "--pretrained-xlm-checkpoint",
        pretrained,
        "--save-dir",
        save,
    )
    old = torch.load(pretrained)["model"]
    new = torch.load(save / "checkpoint_last.pt")["model"]
    key = "encoder.transformer.lang_embeddings.weight"
    assert torch.allclose(new[key][0], old[key][2], atol=1e-5) and torch.allclose(new[key][1], old[key][0], atol=1e-5)
    assert torch.allclose(
        new["encoder.transformer.ffns.1.lin2.weight"], old["encoder.transformer.ffns.1.lin2.weight"], atol=1e-5
    )
    del checkpoint_utils
