"""xlm_fairseq/patches/bf16_flat_master.py: --bf16 keeps fp32 master weights in one flat tensor, as
--fp16 does, and a run resumes across the two layouts."""

import pytest
import torch
from conftest import PRETRAIN_ARGS, fairseq, json_logs


def test_bf16_master_weights_are_one_flat_tensor_and_runs_resume_across_layouts(data_bin, tmp_path):
    """fairseq kept --bf16's fp32 master weights per tensor (a TPU preference): Adam, clipping and zeroing
    ran once per parameter tensor. Off a TPU they are one flat tensor now, with the same updates as
    --fp16-no-flatten-grads (fairseq's layout), and a run saved in either layout resumes in the other
    as it resumes in its own (a resumed run's master weights restart from the bf16 model's)."""
    args = [data_bin, *PRETRAIN_ARGS, "--langs", "en,de", "--mlm-steps", "en,de", "--bf16", "--log-interval", "1"]

    def train(save_dir, updates, *layout):
        proc = fairseq("train", *args, "--max-update", str(updates), "--save-dir", save_dir, *layout)
        return [float(r["loss"]) for r in json_logs(proc.stdout + proc.stderr, "train_inner")]

    def optimizer_state(save_dir):
        state = torch.load(save_dir / "checkpoint_last.pt", map_location="cpu", weights_only=False)
        return state["last_optimizer_state"]["state"]

    flat, per_tensor = tmp_path / "flat", tmp_path / "per_tensor"
    flat_losses = train(flat, 3) + train(flat, 6)
    per_tensor_losses = train(per_tensor, 3, "--fp16-no-flatten-grads")
    per_tensor_moments = optimizer_state(per_tensor)
    assert len(per_tensor_moments) > 1
    per_tensor_losses += train(per_tensor, 6)  # a flat run resumes the per-tensor one
    assert len(flat_losses) == 6 and per_tensor_losses == pytest.approx(flat_losses, abs=1e-3), per_tensor_losses
    (moments,) = optimizer_state(per_tensor).values()
    params = sum(m["exp_avg"].numel() for m in per_tensor_moments.values())
    assert moments["exp_avg"].shape == (params,) and moments["exp_avg_sq"].abs().sum() > 0
    assert train(per_tensor, 8, "--fp16-no-flatten-grads")[-1] > 0  # and back per tensor
    assert len(optimizer_state(per_tensor)) == len(per_tensor_moments)
