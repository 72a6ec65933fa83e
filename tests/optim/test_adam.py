"""xlm_fairseq/optim/adam.py: --optimizer xlm_adam updates in torch's fused kernel as fairseq's adam does,
and fairseq's adam stays fairseq's where the plugin is loaded."""

import torch
from conftest import setup_task


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
    assert len(built["adam"].fp32_optimizer.optimizer.param_groups[0]["params"]) > 1
    ours = built["xlm_adam"].fp32_optimizer
    assert type(ours.optimizer) is FusedStepAdam and ours.flat_master is not None
    (flat,) = ours.optimizer.param_groups[0]["params"]  # the master weights are views of one tensor
    storage = flat.untyped_storage().data_ptr()
    assert all(p.untyped_storage().data_ptr() == storage for p in built["xlm_adam"].fp32_params)
    assert flat.numel() == sum(p.numel() for p in built["xlm_adam"].fp32_params)


def test_importing_the_plugin_replaces_no_method_of_fairseqs_optimizers():
    """The flat bf16 master weights come with ``xlm_adam`` itself: every function of fairseq's optimizer
    classes (FP16Optimizer's build_optimizer and load_state_dict among them) is fairseq's own."""
    import importlib
    import inspect
    import pkgutil

    import fairseq.optim

    import xlm_fairseq  # noqa: F401

    replaced = []
    for info in pkgutil.walk_packages(fairseq.optim.__path__, "fairseq.optim."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # a backend not installed here (apex, bitsandbytes)
            continue
        for cls in vars(module).values():
            if not (inspect.isclass(cls) and cls.__module__ == module.__name__):
                continue
            for name, attr in vars(cls).items():
                func = getattr(attr, "__func__", attr)
                if callable(func) and not getattr(func, "__module__", "fairseq").startswith("fairseq"):
                    replaced.append(f"{cls.__qualname__}.{name} ({func.__module__})")
    assert not replaced, replaced


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
