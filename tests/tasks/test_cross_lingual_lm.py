"""cross_lingual_lm through fairseq's own CLI: options, MLM/TLM/CLM training, metrics, resume (its bad input:
test_errors.py)."""

import pytest
import torch
from conftest import PRETRAIN_ARGS, ROOT, fairseq, json_logs, setup_task


def test_cross_lingual_lm_is_ours_in_the_cli():
    out = fairseq("train", "--user-dir", ROOT / "xlm_fairseq", "--task", "cross_lingual_lm", "--help").stdout
    for option in (
        "--mlm-steps",
        "--clm-steps",
        "--span-steps",
        "--sample-alpha",
        "--lg-sampling-factor",
        "--mask-keep-rand",
        "--pretrained-xlm-checkpoint",
    ):
        assert option in out, option
    assert "--monolingual-langs" not in out, "fairseq's legacy cross_lingual_lm options must be gone"


@pytest.mark.slow  # 240 updates; the fast tier trains through the session fixture `pretrained`
def test_pretraining_end_to_end(data_bin, tmp_path):
    """MLM on en/de, TLM on en-de, CLM on en, MASS's span masking on de, a few hundred updates: valid
    MLM perplexity falls and every objective's metrics are logged in training and validation."""
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
        "--span-steps",
        "de",
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
    for key in ("mlm_en", "mlm_de", "tlm_en-de", "clm_en", "span_de"):
        for metric in ("loss", "ppl", "acc"):
            assert f"valid_{key}_{metric}" in valid[-1], (key, metric, valid[-1].keys())
            assert f"train_{key}_{metric}" in train[-1]
    # XLM's validation perplexity: the same positions, all shown as the mask token (harder)
    for key in ("mlm_en", "mlm_de", "tlm_en-de"):
        assert float(valid[-1][f"valid_{key}_fullmask_ppl"]) > float(valid[-1][f"valid_{key}_ppl"]), key
    assert "valid_clm_en_fullmask_ppl" not in valid[-1] and "valid_span_de_fullmask_ppl" not in valid[-1]
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
    assert float(valid[-1]["valid_span_de_ppl"]) < 0.75 * float(valid[0]["valid_span_de_ppl"])
    assert (save / "checkpoint_best.pt").exists()
    # the checkpoint loads with the hub interface
    from xlm_fairseq import XLMModel

    hub = XLMModel.from_pretrained(str(save), checkpoint_file="checkpoint_best.pt", data_name_or_path=str(data_bin))
    feats = hub.extract_features(hub.encode("This is a test.", "en"), "en")
    assert feats.shape[-1] == 64


@pytest.mark.slow
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


def test_init_embeddings_replaces_the_rows_given(data_bin, tmp_path):
    """--init-embeddings: the model built for training has the file's rows where they hold numbers, its own
    random rows where they are NaN, and a zero padding row."""
    from xlm_fairseq.data.dictionary import load_dictionary

    words = len(load_dictionary(str(data_bin)))
    weights = torch.full((words, 64), float("nan"))
    weights[10:20] = torch.randn(10, 64)
    weights[1] = 1.0  # the padding row: never taken
    torch.save(weights, tmp_path / "emb.pt")
    task, cfg = setup_task(
        data_bin,
        "cross_lingual_lm",
        "--langs",
        "en,de,ro",
        "--mlm-steps",
        "en",
        "--init-embeddings",
        tmp_path / "emb.pt",
    )
    table = task.build_model(cfg.model).encoder.transformer.embeddings
    assert table.padding_idx == 1 and not table.weight[1].any()
    assert torch.equal(table.weight[10:20], weights[10:20])
    rest = torch.cat([table.weight[2:10], table.weight[20:]])
    assert not rest.isnan().any() and 0.08 < rest.std().item() < 0.17  # random init, std 64 ** -0.5


def test_a_checkpoint_carries_what_checks_it(pretrained, data_bin):
    """What ModelAssets checks a dictionary against, and the language list, are in every checkpoint;
    the list once, in task_state (the model's state dict holds none)."""
    from xlm_fairseq import checkpoints
    from xlm_fairseq.data.dictionary import dictionary_digest, load_dictionary

    state = checkpoints.load(str(pretrained))
    task_state = state["task_state"]
    assert task_state["dictionary_sha256"] == dictionary_digest(load_dictionary(str(data_bin)))
    assert task_state["langs"] == ["en", "de", "ro"]
    assert "_extra_state" not in state["model"] and not state["cfg"]["model"].get("langs")
