"""Speed benchmark: xlm-fairseq against fairseq's own implementations, side by side in one run.

    python bench/run.py [--quick] [--sizes recipes,256] [--work-dir DIR] [--out bench/results/latest.json]
    python bench/run.py --device cuda --precision {fp32,fp16,bf16} [--quick]   # on one GPU

On the same real data (the shipped en-de Debian sample, one joint sentencepiece vocabulary per size)
and matched model sizes (``sizes.py``: the recipes' 128 x 3, and 256 x 4), it measures, per size:

* pretraining, input tokens/s: ``cross_lingual_lm`` MLM (en, de) and MLM+TLM (en, de, de-en) against
  ``--task masked_lm --arch roberta_base`` shrunk to the same dims, on the same blocks;
* UNMT, source sentences/s of AE+BT updates: ``translation_lm`` (--ae-steps en,de
  --bt-steps en-de-en,de-en-de) against ``--task online_backtranslation`` with a ``transformer`` of
  the same size, same --max-tokens, same noise;
* inference, ``fairseq-generate`` sentences/s at beam 5 and beam 1 against a ``transformer`` trained
  by ``--task translation``; every hypothesis is forced to the same length (--min-len = max length),
  so the ratio measures decoding cost, not what an untrained model chooses to say;
* peak resident memory of every training process (the child's ``ru_maxrss``);
* model FLOP utilisation of LM steps and of translation steps: training FLOP/s counted from the
  matmuls of each model (output layer included), divided by the fp32 matmul FLOP/s torch reaches
  here (4096x256 @ 256x1024), measured in the same run.

Training throughput is read from fairseq's own ``train_inner`` logs (``wps``, ``bsz``/``wpb``),
one window per ``--log-interval``; the first window (warm-up) is dropped. A figure is the median of
the windows of a run, and with ``--repeats`` > 1 the median over runs, which alternate ours / peer.
Generation throughput is fairseq-generate's own "sentences/s" line (model loading excluded).

On a GPU (``--device cuda``) both sides run with the same ``--fp16`` / ``--bf16`` (or fp32: TF32
matmuls, as the plugin enables under CUDA); the reference matmul runs in that precision, and the
result records the GPU and the attention kernels torch may choose. fairseq's parser turns ``--bf16``
into ``--tpu``, which only the plugin takes back, so under bf16 the peers run with ``--user-dir``
too. The peers train with fairseq's own Adam (``with_fairseqs_adam``) where ours take the recipes' optimizer, and
the plugin leaves fairseq's Adam and its bf16 master weights as they are for them.
"""

import argparse
import dataclasses
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

# a script's siblings: its directory is the first on sys.path
from children import BenchError, busy_processes, run_child, tool
from flops import matmul_flops
from measure import measure_generation, measure_training
from report import finish, table, versions
from sizes import SIZES, mlm_flops_per_token, translation_flops_per_target_token
from workload import (
    GEN_BATCH,
    GEN_LEN,
    PRECISION_FLAGS,
    ROOT,
    TRAIN_COMMON,
    at_precision,
    device_flags,
    prepare_data,
    with_fairseqs_adam,
)

# ---- the run ---------------------------------------------------------------------------------


def measure_size(size_name, size, args, flags, repeats, windows):
    """Every measurement of one model size, ours and the peers alternating; returns its figures."""
    # valid: the first 128 sentences of the test set (a --quick run at the 256 size)
    gen_subset = "valid" if args.quick and not size.quick_whole_test_set else "test"
    gen_repeats = 3

    def steps(interval):
        interval *= size.window_scale
        return ["--max-update", str(windows * interval), "--log-interval", str(interval)]

    work = args.work_dir.resolve() / size_name
    (work / "logs").mkdir(parents=True, exist_ok=True)
    print(
        f"size {size_name}: {size.dim} dims x {size.layers} layers, FFN {size.ffn}, {size.vocab} words "
        f"(work dir {work})",
        flush=True,
    )
    paths = prepare_data(work, size.vocab)

    user_dir = str(ROOT / "xlm_fairseq")
    train = [tool("fairseq-train")]
    common = [*TRAIN_COMMON, *flags]
    # only the plugin takes back the --tpu that fairseq's parser derives from --bf16
    peer_plugin = ["--user-dir", user_dir] if args.peer_precision == "bf16" else []
    pt = ["--tokens-per-sample", str(size.block), "--batch-size", str(size.blocks), *common]
    pt += [*size.dropout(size.lm_dropout), "--no-save"]
    ours_lm = [*train, str(paths["ours"]), "--user-dir", user_dir, "--task", "cross_lingual_lm", "--langs", "de,en"]
    ours_lm += ["--clm-steps", "", *size.ours(), *pt]
    peer_lm = [*train, str(paths["masked_lm"]), *peer_plugin, "--task", "masked_lm", "--criterion", "masked_lm"]
    peer_lm += ["--arch", "roberta_base", *size.stack("encoder"), "--max-positions", "512"]
    peer_lm += ["--sample-break-mode", "none", *pt, *steps(6)]
    pretrain = {
        # windows of about the same tokens: an update of ours trains 2 (MLM) or 3 (+TLM) objective batches
        "ours_mlm": ours_lm + ["--mlm-steps", "en,de", *steps(3)],
        "ours_mlm_tlm": ours_lm + ["--mlm-steps", "en,de,de-en", *steps(2)],
        **({"ours_mlm_compiled": ours_lm + ["--mlm-steps", "en,de", *steps(3), "--compile"]} if args.compile else {}),
        "peer_masked_lm": peer_lm,
    }
    noise = ["--word-shuffle", "3", "--word-dropout", "0.1", "--word-blank", "0.1"]
    translation = [*common, *size.dropout(size.mt_dropout), "--max-tokens", str(size.unmt_max_tokens)]
    un = [*translation, *steps(3)]
    ckpt = work / "checkpoints"
    ours_unmt = [*train, str(paths["ours"]), "--user-dir", user_dir, "--task", "translation_lm", "--langs", "de,en"]
    ours_unmt += ["--ae-steps", "en,de", "--bt-steps", "en-de-en,de-en-de", *noise, *size.ours()]
    ours_unmt += ["--max-sentence-len", "100", *un, "--save-dir", str(ckpt / "ours"), "--no-epoch-checkpoints"]
    peer_unmt = [*train, str(paths["online_backtranslation"]), *peer_plugin, "--task", "online_backtranslation"]
    peer_unmt += ["--mono-langs", "de,en", "--valid-lang-pairs", "de-en", "--max-word-shuffle-distance", "3"]
    peer_unmt += ["--word-dropout-prob", "0.1", "--word-blanking-prob", "0.1", "--criterion", "cross_entropy"]
    peer_unmt += [*size.peer_seq2seq(), "--max-source-positions", "512", "--max-target-positions", "512"]
    peer_unmt += [*un, "--no-save"]
    unmt = {"ours_unmt": ours_unmt, "peer_online_backtranslation": peer_unmt}
    if args.compile:  # in a save dir of its own: ours' checkpoint is the one generation reads
        unmt_compiled = unmt["ours_unmt_compiled"] = [*unmt["ours_unmt"], "--compile"]
        unmt_compiled[unmt_compiled.index("--save-dir") + 1] = str(ckpt / "ours_compiled")

    def as_peer(cmd):
        return at_precision(with_fairseqs_adam(cmd), ours=args.precision, peer=args.peer_precision)

    for commands in (pretrain, unmt):
        commands.update({name: as_peer(cmd) for name, cmd in commands.items() if name.startswith("peer")})
    runs = {}
    print("pretraining (input tokens/s)", flush=True)
    for _ in range(repeats):
        for name, cmd in pretrain.items():
            measure_training(name, cmd, work, runs)
    print("unsupervised MT, AE + BT (source sentences/s)", flush=True)
    for _ in range(repeats):
        for name, cmd in unmt.items():
            measure_training(name, cmd, work, runs)

    # the peer for generation: a plain transformer, trained just long enough to have a checkpoint
    shutil.rmtree(ckpt / "peer", ignore_errors=True)
    peer_mt = [*train, str(paths["translation"]), *peer_plugin, "--task", "translation", "-s", "de", "-t", "en"]
    peer_mt += [*size.peer_seq2seq(), *translation, "--max-update", "2"]
    peer_mt += ["--save-dir", str(ckpt / "peer"), "--no-epoch-checkpoints"]
    run_child(as_peer(peer_mt), work / "logs" / "peer_translation_train.log")
    gen = [tool("fairseq-generate"), *flags, "--batch-size", str(GEN_BATCH), "--gen-subset", gen_subset, "--quiet"]
    gen += ["--max-len-a", "0", "--max-len-b", str(GEN_LEN), "--min-len", str(GEN_LEN)]
    # fairseq's own checkpoints pickle argparse.Namespace, which torch >= 2.6 refuses by default; the
    # plugin allowlists it for ours (its checkpoint reader), the peer runs without the plugin
    peer_env = dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
    generate = {}
    for beam in (5, 1):
        ours = [*gen, str(paths["ours"]), "--user-dir", user_dir, "--task", "translation_lm", "-s", "de", "-t", "en"]
        ours += ["--path", str(ckpt / "ours" / "checkpoint_last.pt"), "--beam", str(beam)]
        peer = [*gen, str(paths["translation"]), "--task", "translation", "-s", "de", "-t", "en"]
        peer += ["--path", str(ckpt / "peer" / "checkpoint_last.pt"), "--beam", str(beam)]
        generate[f"ours_generate_beam{beam}"], generate[f"peer_generate_beam{beam}"] = ours, as_peer(peer)
    print(f"fairseq-generate (sentences/s, every hypothesis {GEN_LEN} tokens)", flush=True)
    for _ in range(gen_repeats):
        for name, cmd in generate.items():
            measure_generation(name, cmd, work, runs, env=None if name.startswith("ours") else peer_env)

    figures = {
        name: {key: statistics.median(r[key] for r in rs) for key in rs[0] if isinstance(rs[0][key], (int, float))}
        for name, rs in runs.items()
    }

    def ratio(ours, peer, key):
        return figures[ours][key] / figures[peer][key]

    def translation_flops(name):  # per second, at the run's mean target length (tokens / sentences)
        f = figures[name]
        length = f["tokens_per_s"] / f["sentences_per_s"]
        return translation_flops_per_target_token(size, length) * f["tokens_per_s"]

    compiled = (
        {
            "pretrain_compiled_ratio": ratio("ours_mlm_compiled", "peer_masked_lm", "tokens_per_s"),
            "unmt_compiled_ratio": ratio("ours_unmt_compiled", "peer_online_backtranslation", "sentences_per_s"),
        }
        if args.compile
        else {}
    )
    return {
        **compiled,
        "pretrain_ratio": ratio("ours_mlm", "peer_masked_lm", "tokens_per_s"),
        "pretrain_tlm_ratio": ratio("ours_mlm_tlm", "peer_masked_lm", "tokens_per_s"),
        "unmt_ratio": ratio("ours_unmt", "peer_online_backtranslation", "sentences_per_s"),
        "generate_beam5_ratio": ratio("ours_generate_beam5", "peer_generate_beam5", "sentences_per_s"),
        "generate_beam1_ratio": ratio("ours_generate_beam1", "peer_generate_beam1", "sentences_per_s"),
        "peak_rss_ratio": max(
            ratio("ours_mlm", "peer_masked_lm", "peak_rss_mib"),
            ratio("ours_unmt", "peer_online_backtranslation", "peak_rss_mib"),
        ),
        "peak_rss_ratio_pretrain": ratio("ours_mlm", "peer_masked_lm", "peak_rss_mib"),
        "peak_rss_ratio_unmt": ratio("ours_unmt", "peer_online_backtranslation", "peak_rss_mib"),
        # FLOP/s of the steps; divided by the reference matmul rate in main()
        "flops": {
            "lm": mlm_flops_per_token(size) * figures["ours_mlm"]["tokens_per_s"],
            "lm_peer": mlm_flops_per_token(size, extra_head_dim=size.dim) * figures["peer_masked_lm"]["tokens_per_s"],
            "translation": translation_flops("ours_unmt"),
            "translation_peer": translation_flops("peer_online_backtranslation"),
        },
        "figures": figures,
        "runs": runs,
        "dims": {**dataclasses.asdict(size), "generate_len": GEN_LEN, "generate_batch": GEN_BATCH},
        "repeats": {"training": repeats, "generation": gen_repeats},
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="one run per system, fewer updates")
    p.add_argument("--repeats", type=int, default=None, help="training runs per system (default 1 quick, 3 full)")
    p.add_argument(
        "--sizes",
        default=",".join(SIZES),
        help=f"model sizes to measure, comma-separated, of: {', '.join(SIZES)} (default: all)",
    )
    p.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "bench", help="data, checkpoints and logs")
    p.add_argument("--out", type=Path, default=None, help="default: bench/results/latest.json; on a GPU gpu-PREC.json")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--precision", choices=list(PRECISION_FLAGS), default="fp32", help="--fp16 / --bf16 on both sides")
    p.add_argument(
        "--peer-precision",
        choices=list(PRECISION_FLAGS),
        default=None,
        help="the peers' number format if not --precision (ours in bf16 against the peers' fastest: fp32)",
    )
    p.add_argument(
        "--compile",
        choices=["auto", "on", "off"],
        default="auto",
        help="also run ours with --compile (MLM, UNMT); auto: on a GPU, where it pays (bench/README)",
    )
    p.add_argument(
        "--beside-busy",
        type=int,
        default=0,
        metavar="N",
        help="measure beside N processes that keep a core busy each, as another job on the machine would",
    )
    args = p.parse_args(argv)
    args.compile = args.compile == "on" or (args.compile == "auto" and args.device == "cuda")
    args.peer_precision = args.peer_precision or args.precision
    sizes = [name.strip() for name in args.sizes.split(",") if name.strip()]
    unknown = [name for name in sizes if name not in SIZES]
    if unknown or not sizes:
        p.error(f"--sizes: unknown size {', '.join(unknown) or '(none given)'}; choose from {', '.join(SIZES)}")
    if args.out is None:
        name = "latest.json" if args.device == "cpu" else f"gpu-{args.precision}.json"
        args.out = ROOT / "bench" / "results" / name
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            p.error("--device cuda: torch sees no GPU here")
    flags = device_flags(args.device, args.precision)
    repeats = args.repeats or (1 if args.quick else 3)
    if repeats < 1:
        p.error("--repeats must be >= 1")
    # every training run logs `windows` windows of `interval` updates; the first (warm-up) is dropped
    windows = 4 if args.quick else 8

    started = time.time()
    peak = matmul_flops(args.device, args.precision)
    print(f"bench: reference matmul (4096x256 @ 256x1024, {args.precision}): {peak / 1e9:.1f} GFLOP/s", flush=True)
    peak_at_start = peak
    with busy_processes(args.beside_busy):
        per_size = {name: measure_size(name, SIZES[name], args, flags, repeats, windows) for name in sizes}
    # the machine's matmul rate drifts (shared cores): measured again at the end, the higher counts
    peak = max(peak, matmul_flops(args.device, args.precision))
    print(f"  reference matmul again: {peak / 1e9:.1f} GFLOP/s (at start {peak_at_start / 1e9:.1f})", flush=True)
    for figures in per_size.values():
        figures["mfu"] = {key: value / peak for key, value in figures.pop("flops").items()}
    result = {
        "sizes": per_size,
        "matmul_gflops": peak / 1e9,
        "mode": "quick" if args.quick else "full",
        "device": args.device,
        "precision": args.precision,
        "peer_precision": args.peer_precision,
        "beside_busy": args.beside_busy,
        "versions": versions(args.device),
    }
    tables = {name: table(figures, result["matmul_gflops"]) for name, figures in result["sizes"].items()}
    finish(args.out, result, started, tables)


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        sys.exit(f"bench: error: {e}")
