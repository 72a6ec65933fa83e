"""The paths GPU users take first, checked on CPU: --bf16 and --memory-efficient-fp16 train every
task and --bf16 generates; --amp autocasts the objectives; fp16 gradients sit in the range of
fairseq's loss scaler."""

import math

import pytest
import torch
from conftest import DEVICE, PRETRAIN_ARGS, UNMT_ARGS, fairseq, generate_lines, json_logs, setup_task
from fairseq.trainer import Trainer
from test_xlm_classification import CLASSIFY_ARGS, xcls  # noqa: F401  (its fixture)

FP16_MIN_NORMAL = 2.0**-14
TASK_RUNS = {
    "cross_lingual_lm": [*PRETRAIN_ARGS, "--langs", "en,de,ro", "--mlm-steps", "en,de,en-de"],
    "translation_lm": [*UNMT_ARGS, "--langs", "en,de", "--ae-steps", "en", "--bt-steps", "de-en-de"]
    + ["--mt-steps", "en-de", "--disable-validation"],
}


@pytest.mark.parametrize(
    "task,precision",
    [  # the fast tier trains one (a fairseq-train each)
        pytest.param(
            task, precision, marks=() if (task, precision) == ("cross_lingual_lm", "--bf16") else pytest.mark.slow
        )
        for task in [*TASK_RUNS, "xlm_classification"]
        for precision in ["--bf16", "--memory-efficient-fp16"]
    ],
)
def test_every_task_trains_in_half_precision(task, precision, data_bin, pretrained, tmp_path, request):
    """--bf16 used to stop at start-up: fairseq's parser makes it imply --tpu, then asks torch_xla
    for a device."""
    if task == "xlm_classification":
        xcls = request.getfixturevalue("xcls")
        args = [xcls, *CLASSIFY_ARGS, "--pretrained-xlm-checkpoint", pretrained, "--disable-validation"]
    else:
        args = [data_bin, *TASK_RUNS[task]]
    proc = fairseq("train", *args, precision, "--max-update", "3", "--log-interval", "1", "--save-dir", tmp_path)
    records = json_logs(proc.stdout + proc.stderr, "train_inner")
    assert len(records) == 3
    assert all(math.isfinite(float(r["loss"])) for r in records)
    if precision == "--bf16":
        where = "CPU" if DEVICE == "cpu" else "the GPU"
        assert f"--bf16 without torch_xla: bfloat16 on {where}, not a TPU" in proc.stdout + proc.stderr
        state = torch.load(tmp_path / "checkpoint_last.pt", map_location="cpu", weights_only=False)
        assert not state["cfg"]["common"]["tpu"]


@pytest.mark.slow
def test_generate_computes_in_bf16(unmt, data_bin):
    """fairseq-generate casts models for --fp16 only; --bf16 ran in fp32 before. The same model in
    bf16 gives mostly the same words, and their scores carry bf16's rounding (8 significant bits):
    every one a little off the fp32 score, by more than fp16's rounding would make it."""
    ckpt = unmt[0] / "checkpoint_last.pt"
    hypos = {}
    for precision in ([], ["--bf16"]):
        lines, out = generate_lines(data_bin, ckpt, "en", "de", "--beam", "1", "--max-sentences", "8", *precision)
        assert len(lines["H"]) == 60
        fields = [line.split("\t") for line in out.splitlines() if line.startswith("H-")]
        hypos[bool(precision)] = {int(f[0][2:]): (float(f[1]), f[2]) for f in fields}
    same = [i for i in range(60) if hypos[True][i][1] == hypos[False][i][1]]
    assert len(same) >= 30, same
    diffs = [abs(hypos[True][i][0] - hypos[False][i][0]) for i in same]
    assert sum(d > 0 for d in diffs) >= 0.9 * len(same), diffs  # fp32 arithmetic: all 0
    assert 1e-3 < sum(diffs) / len(diffs) and max(diffs) < 0.1, diffs  # measured: mean 0.005, max 0.014


def trainer_and_batch(data_bin, *precision):
    """fairseq's Trainer over translation_lm (MT and AE steps, the summed loop), and one training
    batch. The tests call the task's train_step with the trainer's model, criterion and optimizer:
    fairseq's handler of an fp16 overflow (the scaler's normal start) calls .cuda()."""
    args = ["--langs", "en,de", "--mt-steps", "en-de", "--ae-steps", "de", "--cpu", "--max-tokens", "4000"]
    task, cfg = setup_task(data_bin, "translation_lm", *args, "--optimizer", "adam", "--lr", "0.0001", *precision)
    task.load_dataset("train")
    model, criterion = task.build_model(cfg.model), task.build_criterion(cfg.criterion)
    trainer = Trainer(cfg, task, model, criterion)
    itr = task.get_batch_iterator(task.dataset("train"), max_tokens=4000, seed=1, max_positions=(512, 512))
    batch = next(iter(itr.next_epoch_itr(shuffle=True)))
    return trainer, model, batch


def test_fp16_gradients_are_in_the_loss_scalers_range(data_bin):
    """At fairseq's default loss scale (128), a mean token loss made ~all logit gradients fp16
    subnormals (their size is p/ntokens); summed losses (fairseq's convention) keep them normal."""
    trainer, model, batch = trainer_and_batch(data_bin, "--memory-efficient-fp16")
    assert trainer.optimizer.scaler.loss_scale == 128
    grads = []

    def keep_logit_grads(module, inputs, output):
        output[0].register_hook(grads.append)

    model.register_forward_hook(keep_logit_grads)
    trainer.task.train_step(batch, trainer.model, trainer.criterion, trainer.optimizer, 0)
    assert len(grads) == 2
    nonzero = torch.cat([g.flatten() for g in grads])
    assert nonzero.dtype == torch.float16
    nonzero = nonzero[nonzero != 0].float().abs()
    subnormal = (nonzero < FP16_MIN_NORMAL).float().mean().item()
    assert subnormal < 0.01, f"{subnormal:.1%} of the logit gradients are fp16 subnormals"


def test_amp_autocasts_every_objective(data_bin):
    """fairseq's train_step autocasts under --amp; the tasks' own objective loop did not."""
    trainer, model, batch = trainer_and_batch(data_bin, "--amp")
    seen = []
    model.register_forward_pre_hook(lambda m, i: seen.append(torch.is_autocast_cpu_enabled()))
    trainer.task.train_step(batch, trainer.model, trainer.criterion, trainer.optimizer, 0)
    assert len(seen) == 2 and all(seen)
