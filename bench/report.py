"""What a benchmark run reports besides its figures: the machine and versions, and the markdown table."""

import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def versions(device="cpu"):
    import fairseq
    import torch

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "")
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "fairseq": fairseq.__version__,
        "torch_threads": torch.get_num_threads(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "commit": commit,
        "device": "cpu",
        **(gpu_facts() if device == "cuda" else {}),
    }


def gpu_facts():
    """The GPU, and the attention kernels torch's scaled_dot_product_attention may choose among."""
    import torch

    backends = torch.backends.cuda
    return {
        "device": torch.cuda.get_device_name(0),
        "cuda": torch.version.cuda,
        "capability": ".".join(map(str, torch.cuda.get_device_capability(0))),
        "sdpa_backends": {
            "flash": backends.flash_sdp_enabled(),
            "memory_efficient": backends.mem_efficient_sdp_enabled(),
            "math": backends.math_sdp_enabled(),
        },
        "tf32_matmul": backends.matmul.allow_tf32,
    }


def table(r, matmul_gflops):
    """The markdown table of one size's figures (``r``: what ``measure_size`` returned, with ``mfu``)."""
    f = r["figures"]
    rows = [
        ("pretraining MLM, tokens/s", "ours_mlm", "peer_masked_lm", "tokens_per_s", "masked_lm (roberta)"),
        ("pretraining MLM+TLM, tokens/s", "ours_mlm_tlm", "peer_masked_lm", "tokens_per_s", "masked_lm (roberta)"),
        (
            "UNMT AE+BT, sentences/s",
            "ours_unmt",
            "peer_online_backtranslation",
            "sentences_per_s",
            "online_backtranslation",
        ),
        (
            "generate beam 5, sentences/s",
            "ours_generate_beam5",
            "peer_generate_beam5",
            "sentences_per_s",
            "transformer",
        ),
        (
            "generate beam 1, sentences/s",
            "ours_generate_beam1",
            "peer_generate_beam1",
            "sentences_per_s",
            "transformer",
        ),
        ("peak RSS pretraining MLM, MiB", "ours_mlm", "peer_masked_lm", "peak_rss_mib", "masked_lm (roberta)"),
        ("peak RSS UNMT, MiB", "ours_unmt", "peer_online_backtranslation", "peak_rss_mib", "online_backtranslation"),
    ]
    out = ["| measure | ours | peer | ours/peer | peer system |", "|---|---:|---:|---:|---|"]
    for label, ours, peer, key, who in rows:
        a, b = f[ours][key], f[peer][key]
        out.append(f"| {label} | {a:.1f} | {b:.1f} | {a / b:.2f} | {who} |")
        compiled = f.get(f"{ours}_compiled")  # bench/run.py --compile: the same run with --compile, under it
        if compiled is not None and key != "peak_rss_mib":
            what, unit = label.rsplit(", ", 1)
            out.append(
                f"| {what}, --compile, {unit} | {compiled[key]:.1f} | {b:.1f} | {compiled[key] / b:.2f} | "
                f"{who}; {compiled.get('compiled_graphs', 0):.0f} graphs, {compiled.get('compile_s', 0):.1f} "
                "s compiling |"
            )
    mfu = r["mfu"]
    for label, key, who in (("MLM", "lm", "masked_lm (roberta)"), ("UNMT", "translation", "online_backtranslation")):
        out.append(
            f"| MFU, {label} steps (training FLOP/s / matmul {matmul_gflops:.0f} GFLOP/s) | {mfu[key]:.2f} | "
            f"{mfu[key + '_peer']:.2f} | {mfu[key] / mfu[key + '_peer']:.2f} | {who} |"
        )
    return "\n".join(out)


def finish(out: Path, result: dict, started: float, tables: dict) -> None:
    """Stamp a benchmark's result with what makes it a record of the docs' tables (date, machine,
    commit, command: recipes/experiments/tables.py) and its duration, write it to ``out`` as JSON and print its
    markdown tables (size name -> table)."""
    facts = result.get("versions", {})
    result["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    processor = facts.get("cpu", "?") if facts.get("device") in (None, "cpu") else facts["device"]
    result.setdefault("machine", f"{processor}, {facts.get('cores', '?')} cores")
    result.setdefault("commit", facts.get("commit", ""))
    script = os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)
    result.setdefault("command", shlex.join(["python", script, *sys.argv[1:]]))
    result["seconds"] = round(time.time() - started, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    for name, text in tables.items():
        print(f"\nsize {name}\n{text}")
    print(f"\nwrote {out} ({result['seconds']:.0f} s)")
