"""xlm_fairseq/hardware.py: which CPUs multiply bf16 in hardware, read from torch's checks."""

import torch


def test_cpu_bf16_hardware_reads_torchs_checks(monkeypatch):
    """AMX first (its CPUs have AVX-512 BF16 too), then AVX-512 BF16; neither, or a torch without the
    checks: none, so that --precision auto keeps fp32 where bf16 is emulated."""

    from xlm_fairseq import hardware

    for amx, avx512_bf16, expected in ((True, True, "AMX"), (False, True, "AVX-512 BF16"), (False, False, "")):
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda amx=amx: amx)
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda v=avx512_bf16: v)
        assert hardware.cpu_bf16_hardware() == expected
        assert hardware.cpu_multiplies_bf16() is bool(expected)
    monkeypatch.delattr(torch.cpu, "_is_amx_tile_supported")
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported")
    assert hardware.cpu_bf16_hardware() == ""
