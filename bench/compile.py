"""Does ``torch.compile`` pay for XLM's LM step? An MLM training step (embeddings, the stack, the
output layer on a fixed 15 % of positions, cross-entropy, backward, Adam) of the plugin's own
:class:`XLMTransformer`, eager against compiled, at the benchmark's sizes and XLM's own (1024 x 6),
in one process. Shapes are static (fixed blocks, a fixed number of predicted positions), the case
compiling is made for; the recompiles and graph breaks it needed are reported.

    python bench/compile.py --device cuda --precision bf16    # -> bench/results/compile-cuda-bf16.json

Not a fairseq-train run: the question is what the model's own step gains, before building a
``--compile`` option around it (#35)."""

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.report import finish, versions  # noqa: E402
from bench.sizes import SIZES, Size, mlm_flops_per_token  # noqa: E402

# XLM's WMT16 en-de model (mlm_ende_1024): 1024 dims, 6 layers, 8 heads, 60k words, 256-token streams
XLM_SIZE = dataclasses.replace(SIZES["256"], dim=1024, layers=6, heads=8, ffn=4096, vocab=60000, blocks=32)
COMPILE_SIZES = {**SIZES, "xlm": XLM_SIZE}
DTYPES = {"fp32": None, "fp16": "float16", "bf16": "bfloat16"}


def mlm_step(size: Size, device: str, precision: str, mode: str, steps: int, warmup: int):
    """(tokens/s over ``steps`` timed steps, seconds of the ``warmup`` steps before them, compile counters)."""
    import torch
    import torch.nn.functional as F

    from xlm_fairseq.modules.transformer import XLMTransformer

    torch.manual_seed(0)
    model = XLMTransformer(
        n_words=size.vocab,
        pad_index=1,
        n_langs=2,
        dim=size.dim,
        n_layers=size.layers,
        n_heads=size.heads,
        ffn_dim=size.ffn,
        dropout=size.lm_dropout,
        attention_dropout=size.lm_dropout,
    ).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    bs, slen = size.blocks, size.block
    n_pred = int(0.15 * bs * slen)
    dtype = getattr(torch, DTYPES[precision]) if DTYPES[precision] else None

    def loss_fn(tokens, langs, pred, targets):
        with torch.autocast(device_type=device, dtype=dtype, enabled=dtype is not None):
            x = model(tokens, langs=langs)
            scores = model.pred_layer(x.reshape(-1, x.size(-1))[pred])
        return F.cross_entropy(scores.float(), targets)

    run = loss_fn if mode == "eager" else torch.compile(loss_fn, mode=None if mode == "compile" else mode)
    batches = [
        (
            torch.randint(4, size.vocab, (bs, slen), device=device),
            torch.randint(0, 2, (bs,), device=device),
            torch.randperm(bs * slen, device=device)[:n_pred],
            torch.randint(4, size.vocab, (n_pred,), device=device),
        )
        for _ in range(4)
    ]
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def step(i):
        loss = run(*batches[i % len(batches)])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    import torch._dynamo

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    sync()
    start = time.perf_counter()
    for i in range(warmup):
        step(i)
    sync()
    warm_seconds = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(steps):
        step(i)
    sync()
    seconds = time.perf_counter() - start
    counters = torch._dynamo.utils.counters
    compiled = {
        "graph_breaks": sum(counters["graph_break"].values()),
        "unique_graphs": counters["stats"]["unique_graphs"],
    }
    return bs * slen * steps / seconds, warm_seconds, compiled


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--precision", choices=list(DTYPES), default="fp32", help="autocast dtype (fp32: none)")
    p.add_argument("--sizes", default="recipes,256,xlm", help=f"of: {', '.join(COMPILE_SIZES)}")
    p.add_argument("--modes", default=None, help="eager,compile[,reduce-overhead] (default: the latter on cuda)")
    p.add_argument("--steps", type=int, default=None, help="timed steps (default 50 on cpu, 200 on cuda)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per mode, alternating; the median counts")
    p.add_argument("--out", type=Path, default=None, help="default: bench/results/compile-DEVICE-PREC.json")
    args = p.parse_args(argv)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch sees no GPU here")
    sizes = [s for s in args.sizes.split(",") if s]
    unknown = [s for s in sizes if s not in COMPILE_SIZES]
    if unknown or not sizes:
        p.error(f"--sizes: unknown size {', '.join(unknown) or '(none given)'}; choose from {', '.join(COMPILE_SIZES)}")
    modes = (args.modes or ("eager,compile,reduce-overhead" if args.device == "cuda" else "eager,compile")).split(",")
    if "eager" not in modes or any(m not in ("eager", "compile", "reduce-overhead") for m in modes):
        p.error(f"--modes {','.join(modes)}: eager and any of compile, reduce-overhead")
    steps = args.steps or (200 if args.device == "cuda" else 50)
    out = args.out or ROOT / "bench" / "results" / f"compile-{args.device}-{args.precision}.json"
    torch.backends.cuda.matmul.allow_tf32 = True  # as the plugin sets it under fairseq's commands

    started = time.time()
    result = {
        "device": args.device,
        "precision": args.precision,
        "steps": steps,
        "sizes": {},
        "versions": versions(args.device),
    }
    rows = [
        "| size | mode | tokens/s | vs eager | training FLOP/s | first steps (s) | graphs | breaks |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in sizes:
        size = COMPILE_SIZES[name]
        runs = {m: [] for m in modes}
        for _ in range(args.repeats):
            for mode in modes:
                rate, warm, compiled = mlm_step(size, args.device, args.precision, mode, steps, warmup=5)
                runs[mode].append({"tokens_per_s": rate, "first_steps_s": warm, **compiled})
                print(f"{name:>8} {mode:<16} {rate:12.0f} tok/s  first 5 steps {warm:6.1f} s  {compiled}", flush=True)
        figures = {}
        for mode, rs in runs.items():
            rate = statistics.median(r["tokens_per_s"] for r in rs)
            figures[mode] = {**rs[-1], "tokens_per_s": rate, "first_steps_s": max(r["first_steps_s"] for r in rs)}
        eager = figures["eager"]["tokens_per_s"]
        for mode, f in figures.items():
            f["ratio_to_eager"] = f["tokens_per_s"] / eager
            f["tflops"] = mlm_flops_per_token(size) * f["tokens_per_s"] / 1e12
            rows.append(
                f"| {name} ({size.dim}x{size.layers}) | {mode} | {f['tokens_per_s']:,.0f} | "
                f"{f['ratio_to_eager']:.2f} | {f['tflops']:.2f} T | {f['first_steps_s']:.1f} | "
                f"{f['unique_graphs']} | {f['graph_breaks']} |"
            )
        result["sizes"][name] = {"dims": dataclasses.asdict(size), "figures": figures, "runs": runs}
    finish(out, result, started, {"compile": "\n".join(rows)})


if __name__ == "__main__":
    main()
