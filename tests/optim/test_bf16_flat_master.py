"""xlm_fairseq/optim/adam.py (FlatMaster): xlm_adam keeps --bf16's fp32 master weights in one flat tensor,
as --fp16 does, and a run resumes across the two layouts."""

import pytest
import torch
from conftest import PRETRAIN_ARGS, fairseq, json_logs


@pytest.mark.slow  # five fairseq-train runs; the fast tier checks the flat tensor in process (the next test)
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


def test_a_gradient_fp16optimizer_replaced_goes_back_into_the_flat_tensor():
    """fairseq's FP16Optimizer gives a master weight that no update reached a new zero gradient instead of
    copying into its view of the flat gradient; xlm_adam copies such a gradient back before clipping and
    stepping, so the flat update equals the per-tensor one (with the stale view it would not)."""
    from omegaconf import OmegaConf

    from xlm_fairseq.optim.adam import XLMAdam

    def build(bf16):
        options = dict(adam_betas="(0.9, 0.98)", adam_eps=1e-6, weight_decay=0.01, use_old_adam=False)
        options.update(fp16_adam_stats=False, tpu=False, lr=[0.01], bf16=bf16, fp16_no_flatten_grads=False)
        torch.manual_seed(0)
        params = [torch.nn.Parameter(torch.randn(3, 4)), torch.nn.Parameter(torch.randn(5))]
        for p in params:
            p.grad = torch.zeros_like(p)  # as FP16Optimizer builds its master weights
        return XLMAdam(OmegaConf.create(options), params), params

    (flat_optimizer, flat), (reference_optimizer, reference) = build(True), build(False)
    assert flat_optimizer.flat_master is not None and reference_optimizer.flat_master is None
    for step in range(3):
        for params in (flat, reference):
            params[0].grad.copy_(torch.full((3, 4), 0.1 * (step + 1)))  # copied into its view
            params[1].grad = torch.full((5,), -0.2)  # replaced
        norms = [optimizer.clip_grad_norm(0) for optimizer in (flat_optimizer, reference_optimizer)]
        assert norms[0] == pytest.approx(float(norms[1]), rel=1e-6)
        flat_optimizer.step()
        reference_optimizer.step()
        for a, b in zip(flat, reference):
            assert torch.allclose(a, b, rtol=1e-6, atol=0), (step, a, b)
    (flat_tensor,) = flat_optimizer.optimizer.param_groups[0]["params"]
    assert flat[1].grad.untyped_storage().data_ptr() == flat_tensor.grad.untyped_storage().data_ptr()
