"""The reference matmul rate that model FLOP utilisation is measured against."""

import statistics
import time


def matmul_flops(device="cpu", precision="fp32", repeats=5, calls=20):
    """FLOP/s of the benchmark's reference matmul, (4096x256) @ (256x1024), median of repeats, on the
    device and in the precision of the run (fp32 under CUDA: TF32, as the plugin sets it)."""
    import torch

    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    torch.backends.cuda.matmul.allow_tf32 = True
    a = torch.randn(4096, 256, device=device, dtype=dtype)
    b = torch.randn(256, 1024, device=device, dtype=dtype)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(5):
        a @ b
    rates = []
    calls = calls if device == "cpu" else calls * 100
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            a @ b
        sync()
        rates.append(2 * 4096 * 256 * 1024 * calls / (time.perf_counter() - start))
    return statistics.median(rates)
