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
import runpy
import shutil
import statistics
import sys
import time
from pathlib import Path

# a script's siblings: its directory is the first on sys.path
from children import BenchError, busy_processes, run_child, tool
from flops import matmul_flops
from logs import GENERATED, THREADS_CHANGED, compile_stats, train_windows
from report import finish, table, versions
from sizes import SIZES, mlm_flops_per_token, translation_flops_per_target_token

ROOT = Path(__file__).resolve().parents[1]
# the recipes' shared optimiser (recipes/lib/optim.flags), read by its one reader, loaded by its path
optim_flags = runpy.run_path(str(ROOT / "recipes" / "lib" / "optim.py"))["optim_flags"]
SAMPLE = ROOT / "recipes" / "data" / "en-de"



GEN_LEN = 40  # every generated hypothesis has exactly this many tokens
GEN_BATCH = 64

TRAIN_COMMON = [
    "--num-workers", "0", "--seed", "1", "--log-format", "json", "--disable-validation",
    *optim_flags(lr=1e-4, warmup_updates=100),
]


# ---- data ------------------------------------------------------------------------------------


def link(src: Path, dst: Path):
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.is_symlink() or dst.exists():
        dst.unlink()
    dst.symlink_to(src.resolve())


def prepare_data(work: Path, vocab: int) -> dict:
    """Our data-bin (preprocess/) and the same binarised files laid out as each fairseq peer wants."""
    data = work / "data-bin"
    head = work / "raw" / "test128.en-de"  # the quick mode's generation set
    head.parent.mkdir(parents=True, exist_ok=True)
    for lang in ("en", "de"):
        lines = (SAMPLE / f"test.en-de.{lang}").read_text(encoding="utf-8").splitlines(keepends=True)[:128]
        out = Path(f"{head}.{lang}")
        if not out.exists() or out.read_text(encoding="utf-8") != "".join(lines):  # preprocess checks mtimes
            out.write_text("".join(lines), encoding="utf-8")
    cmd = [tool("xlm-fairseq-prepare"), str(data), "--langs", "de,en", "--vocab-size", str(vocab),
           "--mono", f"train:en={SAMPLE / 'mono.en'}", "--mono", f"train:de={SAMPLE / 'mono.de'}",
           "--para", f"train:en-de={SAMPLE / 'train.en-de'}", "--para", f"test:en-de={SAMPLE / 'test.en-de'}",
           "--para", f"valid:en-de={head}", "--quiet"]
    run_child(cmd, work / "preprocess.log")

    def binary(prefix):
        return [(data / f"{prefix}.{ext}") for ext in ("bin", "idx")]

    # masked_lm reads one stream: en and de monolingual data merged into train.{bin,idx}
    mlm = work / "peer-masked_lm"
    if not (mlm / "train.idx").exists():
        from fairseq.data import indexed_dataset

        mlm.mkdir(parents=True, exist_ok=True)
        builder = indexed_dataset.make_builder(str(mlm / "train.bin"), impl="mmap", vocab_size=vocab + 100)
        for lang in ("en", "de"):
            builder.merge_file_(str(data / f"train.{lang}"))
        builder.finalize(str(mlm / "train.idx"))
    link(data / "dict.txt", mlm / "dict.txt")

    # online_backtranslation: DATA/{lang}/train.{bin,idx}, valid pair files, one dict.txt
    obt = work / "peer-online_backtranslation"
    link(data / "dict.txt", obt / "dict.txt")
    for lang in ("en", "de"):
        for src in binary(f"train.{lang}"):
            link(src, obt / lang / f"train{src.suffix}")
        for src in binary(f"valid.de-en.{lang}"):
            link(src, obt / f"valid.de-en.{lang}{src.suffix}")

    # translation: train/test pair files, dict.{lang}.txt
    mt = work / "peer-translation"
    for lang in ("en", "de"):
        link(data / "dict.txt", mt / f"dict.{lang}.txt")
        for split in ("train", "valid", "test"):
            for src in binary(f"{split}.de-en.{lang}"):
                link(src, mt / src.name)
    return {"ours": data, "masked_lm": mlm, "online_backtranslation": obt, "translation": mt}


# ---- measurements ----------------------------------------------------------------------------

def measure_training(name, cmd, work, runs):
    """One training process; appends {median of its windows, peak RSS} to runs[name]. Its ``--save-dir``
    is emptied first: fairseq would resume from the last run's checkpoint."""
    if "--save-dir" in cmd:
        shutil.rmtree(cmd[cmd.index("--save-dir") + 1], ignore_errors=True)
    log = work / "logs" / f"{name}.{len(runs.setdefault(name, []))}.log"
    text, rss, seconds = run_child(cmd, log)
    windows = train_windows(text)[1:]  # the first window holds the warm-up
    if len(windows) < 3:
        raise BenchError(f"{name}: {len(windows)} timed windows in {log} (need >= 3); raise --updates")
    run = {
        key: statistics.median(w[key] for w in windows)
        for key in ("tokens_per_s", "sentences_per_s", "tokens_per_update")
    }
    run.update(peak_rss_mib=rss, windows=len(windows), seconds=round(seconds, 1))
    run.update(compile_stats(text), thread_changes=len(THREADS_CHANGED.findall(text)))
    runs[name].append(run)
    print(f"  {name:<28} {run['tokens_per_s']:9.1f} tok/s {run['sentences_per_s']:8.2f} sent/s "
          f"{rss:7.0f} MiB  ({len(windows)} windows, {seconds:.0f} s)", flush=True)


def measure_generation(name, cmd, work, runs, env=None):
    log = work / "logs" / f"{name}.{len(runs.setdefault(name, []))}.log"
    text, rss, seconds = run_child(cmd, log, env=env)
    m = GENERATED.search(text)
    if not m:
        raise BenchError(f"{name}: no 'Translated ... sentences/s' line in {log}")
    n, tokens, secs = int(m.group(1).replace(",", "")), int(m.group(2).replace(",", "")), float(m.group(3))
    if tokens != n * (GEN_LEN + 1):
        raise BenchError(f"{name}: {tokens} tokens for {n} sentences; the forced length {GEN_LEN} did not hold")
    runs[name].append({"sentences_per_s": n / secs, "sentences": n, "peak_rss_mib": rss})
    print(f"  {name:<28} {n / secs:9.2f} sent/s  ({n} sentences, {secs:.1f} s)", flush=True)


PRECISION_FLAGS = {"fp32": [], "fp16": ["--fp16"], "bf16": ["--bf16"]}


def device_flags(device: str, precision: str):
    """fairseq's options for the device and number format of every command of the run."""
    return (["--cpu"] if device == "cpu" else []) + PRECISION_FLAGS[precision]


def with_fairseqs_adam(cmd):
    """A peer's command with fairseq's own Adam where ours has the recipes' optimizer (the plugin's)."""
    if "--optimizer" not in cmd:  # fairseq-generate
        return cmd
    i = cmd.index("--optimizer")
    return [*cmd[: i + 1], "adam", *cmd[i + 2 :]]


def at_precision(cmd, ours: str, peer: str):
    """A peer's command in the peer's number format (``--peer-precision``) instead of ours'."""
    rest = [arg for arg in cmd[1:] if arg not in PRECISION_FLAGS[ours]]
    return cmd if ours == peer else [cmd[0], *PRECISION_FLAGS[peer], *rest]


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
    print(f"size {size_name}: {size.dim} dims x {size.layers} layers, FFN {size.ffn}, {size.vocab} words "
          f"(work dir {work})", flush=True)
    paths = prepare_data(work, size.vocab)

    user_dir = str(ROOT / "xlm_fairseq")
    train = [tool("fairseq-train")]
    common = [*TRAIN_COMMON, *flags]
    # only the plugin takes back the --tpu that fairseq's parser derives from --bf16
    peer_plugin = ["--user-dir", user_dir] if args.peer_precision == "bf16" else []
    pt = ["--tokens-per-sample", str(size.block), "--batch-size", str(size.blocks), *common,
          *size.dropout(size.lm_dropout), "--no-save"]
    ours_lm = [*train, str(paths["ours"]), "--user-dir", user_dir, "--task", "cross_lingual_lm", "--langs", "de,en",
               "--clm-steps", "", *size.ours(), *pt]
    pretrain = {
        # windows of about the same tokens: an update of ours trains 2 (MLM) or 3 (+TLM) objective batches
        "ours_mlm": ours_lm + ["--mlm-steps", "en,de", *steps(3)],
        "ours_mlm_tlm": ours_lm + ["--mlm-steps", "en,de,de-en", *steps(2)],
        **({"ours_mlm_compiled": ours_lm + ["--mlm-steps", "en,de", *steps(3), "--compile"]} if args.compile else {}),
        "peer_masked_lm": [*train, str(paths["masked_lm"]), *peer_plugin, "--task", "masked_lm",
                           "--criterion", "masked_lm", "--arch", "roberta_base", *size.stack("encoder"),
                           "--max-positions", "512", "--sample-break-mode", "none", *pt, *steps(6)],
    }
    noise = ["--word-shuffle", "3", "--word-dropout", "0.1", "--word-blank", "0.1"]
    translation = [*common, *size.dropout(size.mt_dropout), "--max-tokens", str(size.unmt_max_tokens)]
    un = [*translation, *steps(3)]
    ckpt = work / "checkpoints"
    unmt = {
        "ours_unmt": [*train, str(paths["ours"]), "--user-dir", user_dir, "--task", "translation_lm",
                      "--langs", "de,en", "--ae-steps", "en,de", "--bt-steps", "en-de-en,de-en-de", *noise,
                      *size.ours(), "--max-sentence-len", "100", *un, "--save-dir", str(ckpt / "ours"),
                      "--no-epoch-checkpoints"],
        "peer_online_backtranslation": [
            *train, str(paths["online_backtranslation"]), *peer_plugin, "--task", "online_backtranslation",
            "--mono-langs", "de,en",
            "--valid-lang-pairs", "de-en", "--max-word-shuffle-distance", "3", "--word-dropout-prob", "0.1",
            "--word-blanking-prob", "0.1", "--criterion", "cross_entropy", *size.peer_seq2seq(),
            "--max-source-positions", "512", "--max-target-positions", "512", *un, "--no-save"],
    }
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
    run_child(as_peer([*train, str(paths["translation"]), *peer_plugin, "--task", "translation", "-s", "de", "-t",
                       "en", *size.peer_seq2seq(), *translation, "--max-update", "2",
                       "--save-dir", str(ckpt / "peer"), "--no-epoch-checkpoints"]),
              work / "logs" / "peer_translation_train.log")
    gen = [tool("fairseq-generate"), *flags, "--batch-size", str(GEN_BATCH),
           "--max-len-a", "0", "--max-len-b", str(GEN_LEN), "--min-len", str(GEN_LEN),
           "--gen-subset", gen_subset, "--quiet"]
    # fairseq's own checkpoints pickle argparse.Namespace, which torch >= 2.6 refuses by default; the
    # plugin allowlists it for ours (its checkpoint reader), the peer runs without the plugin
    peer_env = dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
    generate = {}
    for beam in (5, 1):
        generate[f"ours_generate_beam{beam}"] = [
            *gen, str(paths["ours"]), "--user-dir", user_dir, "--task", "translation_lm", "-s", "de", "-t", "en",
            "--path", str(ckpt / "ours" / "checkpoint_last.pt"), "--beam", str(beam)]
        generate[f"peer_generate_beam{beam}"] = as_peer([
            *gen, str(paths["translation"]), "--task", "translation", "-s", "de", "-t", "en",
            "--path", str(ckpt / "peer" / "checkpoint_last.pt"), "--beam", str(beam)])
    print(f"fairseq-generate (sentences/s, every hypothesis {GEN_LEN} tokens)", flush=True)
    for _ in range(gen_repeats):
        for name, cmd in generate.items():
            measure_generation(name, cmd, work, runs, env=None if name.startswith("ours") else peer_env)

    figures = {name: {key: statistics.median(r[key] for r in rs)
                      for key in rs[0] if isinstance(rs[0][key], (int, float))}
               for name, rs in runs.items()}

    def ratio(ours, peer, key):
        return figures[ours][key] / figures[peer][key]

    def translation_flops(name):  # per second, at the run's mean target length (tokens / sentences)
        f = figures[name]
        length = f["tokens_per_s"] / f["sentences_per_s"]
        return translation_flops_per_target_token(size, length) * f["tokens_per_s"]

    compiled = {
        "pretrain_compiled_ratio": ratio("ours_mlm_compiled", "peer_masked_lm", "tokens_per_s"),
        "unmt_compiled_ratio": ratio("ours_unmt_compiled", "peer_online_backtranslation", "sentences_per_s"),
    } if args.compile else {}
    return {
        **compiled,
        "pretrain_ratio": ratio("ours_mlm", "peer_masked_lm", "tokens_per_s"),
        "pretrain_tlm_ratio": ratio("ours_mlm_tlm", "peer_masked_lm", "tokens_per_s"),
        "unmt_ratio": ratio("ours_unmt", "peer_online_backtranslation", "sentences_per_s"),
        "generate_beam5_ratio": ratio("ours_generate_beam5", "peer_generate_beam5", "sentences_per_s"),
        "generate_beam1_ratio": ratio("ours_generate_beam1", "peer_generate_beam1", "sentences_per_s"),
        "peak_rss_ratio": max(ratio("ours_mlm", "peer_masked_lm", "peak_rss_mib"),
                              ratio("ours_unmt", "peer_online_backtranslation", "peak_rss_mib")),
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
    p.add_argument("--sizes", default=",".join(SIZES),
                   help=f"model sizes to measure, comma-separated, of: {', '.join(SIZES)} (default: all)")
    p.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "bench", help="data, checkpoints and logs")
    p.add_argument("--out", type=Path, default=None, help="default: bench/results/latest.json; on a GPU gpu-PREC.json")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--precision", choices=list(PRECISION_FLAGS), default="fp32", help="--fp16 / --bf16 on both sides")
    p.add_argument("--peer-precision", choices=list(PRECISION_FLAGS), default=None,
                   help="the peers' number format if not --precision (ours in bf16 against the peers' fastest: fp32)")
    p.add_argument("--compile", choices=["auto", "on", "off"], default="auto",
                   help="also run ours with --compile (MLM, UNMT); auto: on a GPU, where it pays (bench/README)")
    p.add_argument("--beside-busy", type=int, default=0, metavar="N",
                   help="measure beside N processes that keep a core busy each, as another job on the machine would")
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
