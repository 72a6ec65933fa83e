"""What this machine's CPU can do that changes the plugin's choices: bf16 matrix products in hardware."""

import torch


def cpu_bf16_hardware() -> str:
    """The instructions with which this CPU multiplies bf16 matrices in hardware: "AMX" (Intel Sapphire
    Rapids and later), "AVX-512 BF16" (AMD Zen 4 and later; Intel Cooper Lake's is not measured), or ""
    where torch emulates bf16, slower than fp32. With either, ``--bf16`` pretrains the recipes' LM faster
    than fp32 at the same validation perplexity (bench/README.md has the figures)."""
    cpu = torch.cpu  # (torch's private checks, 2.3 on)
    if getattr(cpu, "_is_amx_tile_supported", lambda: False)():
        return "AMX"
    if getattr(cpu, "_is_avx512_bf16_supported", lambda: False)():
        return "AVX-512 BF16"
    return ""


def cpu_multiplies_bf16() -> bool:
    return bool(cpu_bf16_hardware())
