"""The paths GPU users take first, checked on CPU: --bf16 and --memory-efficient-fp16 train every
task and --bf16 generates; --amp autocasts the objectives; fp16 gradients sit in the range of
fairseq's loss scaler; TF32 is on unless --no-tf32; on an accelerator (the meta device here) no
forward and no decoding step waits for the device."""

import math

import pytest
import torch
from conftest import DEVICE, PRETRAIN_ARGS, UNMT_ARGS, fairseq, generate_lines, json_logs, setup_task
from fairseq.trainer import Trainer
from test_classification import CLASSIFY_ARGS, xcls  # noqa: F401  (its fixture)
from torch.utils._python_dispatch import TorchDispatchMode

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


def test_tf32_unless_asked_not_to(data_bin):
    """fairseq's commands (through call_main) run the XLM tasks with TF32 unless --no-tf32; setting up
    a task alone (a hub, a test) leaves torch's setting as it is."""
    from fairseq.distributed import utils as distributed_utils

    def tf32():
        return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32

    seen = []
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        for extra in ((), ("--no-tf32",)):
            _, cfg = setup_task(data_bin, "cross_lingual_lm", "--langs", "en,de", *extra)
            seen.append(tf32())
            distributed_utils.call_main(cfg, lambda cfg: seen.append(tf32()))
        assert seen == [(False, False), (True, True), (True, True), (False, False)]
    finally:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False


READS = (torch.ops.aten._local_scalar_dense.default, torch.ops.aten.is_nonzero.default, torch.ops.aten.item.default)


class HostSyncs(TorchDispatchMode):
    """Counts reads of a device tensor's value into Python (``bool(t)``, ``int(t)``, ``.item()``):
    on the meta device they have no value, so each returns False; ``nonzero`` or ``tolist`` (syncs
    too) raise there."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in READS:
            self.count += 1
            return False
        return func(*args, **(kwargs or {}))


def test_no_host_sync_per_forward_or_decoding_step():
    """On an accelerator the forward never waits for the device; greedy decoding asks once per
    GREEDY_SYNC_EVERY steps whether every sentence has finished."""
    from tiny_models import tiny_stack

    from xlm_fairseq.generation import GREEDY_SYNC_EVERY, generate_greedy

    encoder, decoder = tiny_stack().eval().to("meta"), tiny_stack(is_decoder=True).eval().to("meta")
    tokens = torch.randint(4, 50, (6, 12)).to("meta")
    langs = torch.zeros(6, dtype=torch.long, device="meta")
    with HostSyncs() as syncs:
        enc = encoder(tokens, langs=langs)
        positions = torch.arange(12)[None].expand(6, 12).to("meta")  # given positions (TLM's restart)
        decoder(tokens, langs=langs, positions=positions, causal=True, src_enc=enc, src_padding_mask=tokens.eq(1))
    assert syncs.count == 0
    max_len = 40
    with HostSyncs() as syncs, torch.no_grad():
        out, lengths = generate_greedy(decoder, enc, tokens.eq(1), langs, max_len, eos=2)
    assert out.shape == (6, max_len + 1) and out.device.type == "meta"
    assert syncs.count == max_len // GREEDY_SYNC_EVERY


def test_summed_loop_all_reduces_once_per_update(data_bin, tmp_path):
    """PyTorch's DDP all-reduces in every backward pass; the objectives of an update used to cost one
    all-reduce each (counted with a communication hook, one process over gloo)."""
    import torch.distributed as dist
    from fairseq import optim
    from torch.nn.parallel import DistributedDataParallel

    from xlm_fairseq.objectives.schedule import run_objectives

    args = ["--langs", "en,de", "--mt-steps", "en-de", "--ae-steps", "de,en", "--cpu", "--max-tokens", "1000"]
    task, cfg = setup_task(data_bin, "translation_lm", *args, "--optimizer", "adam", "--lr", "0.0001")
    task.load_dataset("train")
    itr = task.get_batch_iterator(task.dataset("train"), max_tokens=1000, seed=1, max_positions=(512, 512))
    sample = next(iter(itr.next_epoch_itr(shuffle=True)))
    keys = ["mt_en-de", "ae_de", "ae_en"]
    assert all(sample.get(k) for k in keys)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        model = DistributedDataParallel(task.build_model(cfg.model), find_unused_parameters=True)
        criterion = task.build_criterion(cfg.criterion)
        optimizer = optim.build_optimizer(cfg.optimizer, list(model.parameters()))
        calls = []

        def count(state, bucket):  # stands for the all-reduce: one process has nothing to add
            calls.append(bucket.index())
            done = torch.futures.Future()
            done.set_result(bucket.buffer())
            return done

        model.register_comm_hook(None, count)
        objectives = [task.objective(key) for key in keys]
        run_objectives(sample, model, criterion, objectives[:1], optimizer=optimizer)
        one = len(calls)
        calls.clear()
        run_objectives(sample, model, criterion, objectives, optimizer=optimizer)
        assert one > 0 and len(calls) == one
    finally:
        dist.destroy_process_group()


def test_classification_counts_without_host_sync():
    """Rows and hits per row language (``langs``; the model may read the rows with other ids,
    ``--lang-id``), on the meta device: no read of a tensor into Python."""
    from xlm_fairseq.criterions.classification import XLMSentenceClassificationCriterion

    class Task:
        langs = ["en", "de", "fr"]
        target_dictionary = None

    class Scores(torch.nn.Module):
        def forward(self, src_tokens, src_langs):
            return torch.zeros(src_tokens.size(0), 9, device=src_tokens.device), None

    criterion = XLMSentenceClassificationCriterion(Task())
    sample = {
        "net_input": {"src_tokens": torch.ones(5, 7, dtype=torch.long), "src_langs": torch.zeros(5, dtype=torch.long)},
        "langs": torch.tensor([0, 2, 2, 0, 2]),
        "target": torch.tensor([1, 0, 3, 1, 1]),
        "ntokens": 35,
    }
    _, _, log = criterion(Scores(), sample)
    assert [int(log[f"{lang}:rows"]) for lang in Task.langs] == [2, 0, 3]
    assert [int(log[f"{lang}:correct"]) for lang in Task.langs] == [0, 0, 1]  # class 0 everywhere
    meta = {
        "net_input": {k: v.to("meta") for k, v in sample["net_input"].items()},
        "langs": sample["langs"].to("meta"),
        "target": sample["target"].to("meta"),
        "ntokens": 35,
    }
    with HostSyncs() as syncs:
        criterion(Scores(), meta)
    assert syncs.count == 0


def test_cpu_run_clips_on_a_machine_with_a_gpu(monkeypatch):
    """fairseq's clip_grad_norm_ put the norm on the GPU whenever one was visible, and a --cpu run with
    --clip-norm stopped at its first update there (seen on an H100). With a GPU made visible to it
    (here: torch.cuda.is_available patched), fairseq's function still reaches for the device; the
    plugin's clips the CPU gradients as a machine without a GPU does."""
    from fairseq import utils

    import xlm_fairseq  # noqa: F401  (installs the patches)
    from xlm_fairseq.patches import cpu_clip_norm

    def params():
        torch.manual_seed(0)
        ps = [torch.nn.Parameter(torch.randn(4, 3)), torch.nn.Parameter(torch.randn(5))]
        for p in ps:
            p.grad = torch.randn_like(p) * 10
        return ps

    expected = params()
    expected_norm = utils.clip_grad_norm_(expected, 5.0)  # no GPU visible: fairseq's CPU arithmetic
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises((RuntimeError, AssertionError, AttributeError)):
        cpu_clip_norm._original_clip_grad_norm_(params(), 5.0)  # asks torch for a CUDA device
    clipped = params()
    assert utils.clip_grad_norm_ is cpu_clip_norm.clip_grad_norm_
    norm = utils.clip_grad_norm_(clipped, 5.0)
    assert norm.device.type == "cpu" and torch.equal(norm, expected_norm) and norm > 5
    for p, q in zip(clipped, expected):
        assert torch.equal(p.grad, q.grad)
    total = torch.norm(torch.stack([p.grad.norm() for p in clipped]))
    assert abs(total.item() - 5.0) < 1e-4


@pytest.mark.parametrize("hardware", ["AMX", "AVX-512 BF16", ""])
def test_fp32_pretraining_on_a_cpu_that_multiplies_bf16_names_bf16(hardware, monkeypatch, caplog):
    """Where the CPU multiplies bf16 in hardware (AMX or AVX-512 BF16), fp32 pretraining on it says that
    --bf16 is faster (once, at start-up); not in bf16, not for translation, not on other CPUs."""
    from types import SimpleNamespace

    from xlm_fairseq.patches import precision

    monkeypatch.setattr("xlm_fairseq.hardware.cpu_bf16_hardware", lambda: hardware)

    def cfg(task, bf16=False):
        common = SimpleNamespace(cpu=True, bf16=bf16, fp16=False, memory_efficient_fp16=False, amp=False)
        return SimpleNamespace(common=common, task=SimpleNamespace(_name=task))

    caplog.set_level("INFO", logger=precision.__name__)
    for args in (("cross_lingual_lm",), ("cross_lingual_lm", True), ("translation_lm",)):
        precision.hint_cpu_bf16(cfg(*args))
    hints = [r.getMessage() for r in caplog.records if "bf16 in hardware" in r.getMessage()]
    expected = f"this CPU multiplies bf16 in hardware ({hardware}): --bf16 pretrains faster (bench/README.md)"
    assert hints == ([expected] if hardware else [])


def test_cpu_bf16_hardware_reads_torchs_checks(monkeypatch):
    """AMX first (its CPUs have AVX-512 BF16 too), then AVX-512 BF16; neither, or a torch without the
    checks: none, so that --precision auto keeps fp32 where bf16 is emulated."""
    import torch

    from xlm_fairseq import hardware

    for amx, avx512_bf16, expected in ((True, True, "AMX"), (False, True, "AVX-512 BF16"), (False, False, "")):
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda amx=amx: amx)
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda v=avx512_bf16: v)
        assert hardware.cpu_bf16_hardware() == expected
        assert hardware.cpu_multiplies_bf16() is bool(expected)
    monkeypatch.delattr(torch.cpu, "_is_amx_tile_supported")
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported")
    assert hardware.cpu_bf16_hardware() == ""


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


def test_fairseqs_adam_stays_fairseqs_where_the_plugin_is_loaded(data_bin):
    """The benchmark's peers, and any fairseq run in a process that loads the plugin, train with fairseq's
    code: ``--optimizer adam`` steps in fairseq's loop and ``--bf16`` keeps its master weights per tensor;
    only the plugin's ``--optimizer xlm_adam`` takes the fused kernel and one flat master tensor."""
    from fairseq.optim import adam
    from fairseq.optim.fp16_optimizer import FP16Optimizer

    from xlm_fairseq.optim.adam import FusedStepAdam
    from xlm_fairseq.patches import precision

    assert adam.Adam.step.__module__ == "fairseq.optim.adam" and adam.Adam.step.__qualname__ == "Adam.step"
    built = {}
    for name in ("adam", "xlm_adam"):
        args = ["--langs", "en,de", "--mlm-steps", "en,de", "--cpu", "--bf16", "--optimizer", name, "--lr", "0.001"]
        task, cfg = setup_task(data_bin, "cross_lingual_lm", *args)
        precision.bf16_without_tpu(cfg)  # as fairseq-train's start does
        model = task.build_model(cfg.model).bfloat16()
        built[name] = FP16Optimizer.build_optimizer(cfg, [p for p in model.parameters() if p.requires_grad])
    assert not built["adam"].has_flat_params and type(built["adam"].fp32_optimizer.optimizer) is adam.Adam
    assert built["xlm_adam"].has_flat_params and type(built["xlm_adam"].fp32_optimizer.optimizer) is FusedStepAdam


def test_xlm_adam_updates_in_torchs_fused_kernel_as_fairseqs_adam_does(data_bin):
    """fairseq's Adam loops over the parameter tensors in Python, ten passes each; ``--optimizer xlm_adam``
    runs the update in torch's fused kernel, given eps where fairseq adds it (before v's bias correction).
    On a tiny model's real gradients, with weight decay, an eps that matters and a tensor that some steps
    leave out, weights and moments match fairseq's ``--optimizer adam``; torch's own eps placement would
    not. Tensors the kernel does not take (bf16 here) go to fairseq's loop."""
    from fairseq import optim
    from fairseq.optim import adam

    from xlm_fairseq.optim.adam import FusedStepAdam, fusable

    args = ["--langs", "en,de", "--mt-steps", "en-de", "--cpu", "--max-tokens", "1000"]
    args += ["--dropout", "0", "--attention-dropout", "0", "--weight-decay", "0.01"]
    hyper = ["--lr", "0.01", "--adam-betas", "(0.9,0.98)", "--adam-eps", "1e-3"]
    cfgs = {}
    task, cfgs["fused"] = setup_task(data_bin, "translation_lm", *args, *hyper, "--optimizer", "xlm_adam")
    _, cfgs["loop"] = setup_task(data_bin, "translation_lm", *args, *hyper, "--optimizer", "adam")
    task.load_dataset("train")
    itr = task.get_batch_iterator(task.dataset("train"), max_tokens=1000, seed=1, max_positions=(512, 512))
    batch = next(iter(itr.next_epoch_itr(shuffle=False)))["mt_en-de"]
    torch.manual_seed(1)
    cfg = cfgs["fused"]
    models = {name: task.build_model(cfg.model) for name in ("fused", "loop", "torch_eps")}
    for model in models.values():
        model.load_state_dict(models["fused"].state_dict())
    criterion = task.build_criterion(cfg.criterion)
    optimizers = {
        name: optim.build_optimizer(cfgs[name].optimizer, list(models[name].parameters())) for name in ("fused", "loop")
    }
    assert type(optimizers["fused"].optimizer) is FusedStepAdam and type(optimizers["loop"].optimizer) is adam.Adam
    optimizers["torch_eps"] = torch.optim.AdamW(
        models["torch_eps"].parameters(), lr=0.01, betas=(0.9, 0.98), eps=1e-3, weight_decay=0.01, fused=True
    )
    # a tensor without a gradient every other step
    left_out = next(name for name, _ in models["fused"].named_parameters() if name.endswith("lang_embeddings.weight"))
    for i in range(6):
        for name, model in models.items():
            optimizers[name].zero_grad()
            criterion(model, batch, key="mt_en-de")[0].backward()
            if i % 2:
                dict(model.named_parameters())[left_out].grad = None
            optimizers[name].step()

    def gap(a, b):
        return max((p - q).abs().max().item() for p, q in zip(models[a].parameters(), models[b].parameters()))

    assert gap("fused", "loop") < 1e-5 and gap("torch_eps", "loop") > 20 * 1e-5
    fused, loop = (optimizers[name].optimizer.state for name in ("fused", "loop"))
    for (name, p), q in zip(models["fused"].named_parameters(), models["loop"].parameters()):
        assert fused[p]["step"] == loop[q]["step"] == (3 if name == left_out else 6)
        assert torch.allclose(fused[p]["exp_avg_sq"], loop[q]["exp_avg_sq"], rtol=1e-4, atol=1e-8)

    half = torch.nn.Parameter(torch.ones(4, dtype=torch.bfloat16))
    half.grad = torch.ones_like(half)
    bf16_adam = FusedStepAdam([half], lr=0.1)
    assert not fusable(bf16_adam)
    bf16_adam.step()
    assert bf16_adam.state[half]["step"] == 1 and (half < 1).all()
