"""Serving benchmark: a translator through CTranslate2 (float32 and int8) against fairseq-generate.

    python bench/serving.py [--sizes recipes,256] [--repeats 3] [--work-dir DIR] [--out bench/results/serving.json]

Per size (``sizes.py``), on the shipped en-de sample: our ``translation_lm`` model of that size (a few
supervised updates: speed does not depend on what it learned, since every hypothesis is forced to
``GEN_LEN`` words on both sides, as in ``run.py``), exported with ``xlm-fairseq-export --ctranslate2``
(float32) and with ``--quantization int8``. Then de->en on the 500 sentences of the test split, at
beam 5 and beam 1: ``fairseq-generate`` (ours, ``--batch-size 64``) and CTranslate2 as the translation
hub runs it (``ctranslate2_child.py``, with the hub's CTranslate2 environment: AVX-512 where the CPU
has it), each in its own process. Sentences/s exclude model loading on
both sides (fairseq-generate's own timer; the child times ``translate_batch``); peak RSS is the
process's (CTranslate2's as the child reads it; fairseq-generate's ``ru_maxrss``, which is exact as
long as it exceeds this process's own size, ~340 MiB). The engines alternate, ``--repeats`` times;
figures are medians. Ratios are to fairseq-generate of the same run.
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

# a script's siblings: its directory is the first on sys.path
from children import BenchError, run_child, tool
from logs import GENERATED
from report import finish, versions
from sizes import SIZES
from workload import GEN_BATCH, GEN_LEN, TRAIN_COMMON, prepare_data

ROOT = Path(__file__).resolve().parents[1]
ENGINES = ("fairseq", "ctranslate2_float32", "ctranslate2_int8")


sys.path.insert(0, str(ROOT))
from xlm_fairseq.inference.ctranslate2_models import batch_sentences, ctranslate2_environment  # noqa: E402


def read_test_pieces(data_bin: Path, out: Path) -> int:
    """The test split's de sentences as pieces (what fairseq-generate reads, without ``</s>``)."""
    from fairseq.data import Dictionary, data_utils

    dictionary = Dictionary.load(str(data_bin / "dict.txt"))
    dataset = data_utils.load_indexed_dataset(str(data_bin / "test.de-en.de"), dictionary)
    pieces = [[dictionary[i] for i in dataset[k][:-1]] for k in range(len(dataset))]
    out.write_text(json.dumps(pieces))
    return len(pieces)


def measure_size(size_name, size, args):
    work = args.work_dir.resolve() / size_name
    (work / "logs").mkdir(parents=True, exist_ok=True)
    print(f"size {size_name}: {size.dim} dims x {size.layers} layers, {size.vocab} words (work dir {work})", flush=True)
    data = prepare_data(work, size.vocab)["ours"]
    ckpt = work / "checkpoints" / "serving"
    train = [
        tool("fairseq-train"),
        str(data),
        "--user-dir",
        str(ROOT / "xlm_fairseq"),
        "--task",
        "translation_lm",
        "--langs",
        "de,en",
        "--mt-steps",
        "de-en",
        *size.ours(),
        *TRAIN_COMMON,
        "--cpu",
        "--max-tokens",
        str(size.unmt_max_tokens),
        "--max-update",
        "2",
        "--save-dir",
        str(ckpt),
        "--no-epoch-checkpoints",
    ]
    run_child(train, work / "logs" / "serving_train.log")
    models = {}
    for engine, quantization in (("ctranslate2_float32", []), ("ctranslate2_int8", ["--quantization", "int8"])):
        models[engine] = work / "export" / engine
        export = [
            tool("xlm-fairseq-export"),
            str(ckpt / "checkpoint_last.pt"),
            str(models[engine]),
            "--force",
            "--ctranslate2",
            "--directions",
            "de-en",
            *quantization,
        ]
        run_child(export, work / "logs" / f"export_{engine}.log")
    pieces = work / "test.de.pieces.json"
    n = read_test_pieces(data, pieces)

    def command(engine, beam):
        if engine == "fairseq":
            return [
                tool("fairseq-generate"),
                str(data),
                "--user-dir",
                str(ROOT / "xlm_fairseq"),
                "--cpu",
                "--task",
                "translation_lm",
                "-s",
                "de",
                "-t",
                "en",
                "--path",
                str(ckpt / "checkpoint_last.pt"),
                "--gen-subset",
                "test",
                "--batch-size",
                str(GEN_BATCH),
                "--beam",
                str(beam),
                "--quiet",
                "--max-len-a",
                "0",
                "--max-len-b",
                str(GEN_LEN),
                "--min-len",
                str(GEN_LEN),
            ]
        child = Path(__file__).with_name("ctranslate2_child.py")
        batch = batch_sentences(beam)  # as the hub batches
        return [
            sys.executable,
            str(child),
            str(models[engine]),
            "de-en",
            str(pieces),
            str(beam),
            str(GEN_LEN),
            str(batch),
        ]

    runs, cpu_isa = {}, None
    print(f"de->en, {n} sentences, every hypothesis {GEN_LEN} words (sentences/s, peak RSS)", flush=True)
    for _ in range(args.repeats):
        for beam in (5, 1):
            for engine in ENGINES:
                name = f"{engine}_beam{beam}"
                log = work / "logs" / f"serving_{name}.{len(runs.get(name, []))}.log"
                env = dict(os.environ, OMP_NUM_THREADS="2")
                if engine != "fairseq":
                    env.update(ctranslate2_environment())  # as the hub sets it
                text, rss, _ = run_child(command(engine, beam), log, env=env)
                if engine == "fairseq":
                    m = GENERATED.search(text)
                    if not m or int(m.group(2).replace(",", "")) != n * (GEN_LEN + 1):
                        raise BenchError(f"{name}: no sentences/s line, or the forced length did not hold ({log})")
                    speed = float(m.group(4))
                else:
                    result = json.loads(text.strip().splitlines()[-1])
                    if result["words"] != n * GEN_LEN:
                        raise BenchError(f"{name}: {result['words']} words for {n} sentences; the forced length failed")
                    speed, rss = result["sentences_per_s"], result["peak_rss_mib"]
                    cpu_isa = result["cpu_isa"]
                runs.setdefault(name, []).append({"sentences_per_s": speed, "peak_rss_mib": rss})
                print(f"  {name:<26} {speed:9.1f} sent/s  {rss:7.0f} MiB", flush=True)
    figures = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()}
    for beam in (5, 1):
        base = figures[f"fairseq_beam{beam}"]
        for engine in ENGINES[1:]:
            f = figures[f"{engine}_beam{beam}"]
            f["speed_ratio"] = f["sentences_per_s"] / base["sentences_per_s"]
            f["rss_ratio"] = f["peak_rss_mib"] / base["peak_rss_mib"]
    return {"figures": figures, "runs": runs, "sentences": n, "generate_len": GEN_LEN, "ctranslate2_cpu_isa": cpu_isa}


def table(figures) -> str:
    rows = [
        "| engine | beam | sentences/s | x fairseq-generate | peak RSS MiB | x fairseq-generate |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for beam in (5, 1):
        for engine in ENGINES:
            f = figures[f"{engine}_beam{beam}"]
            speed, rss = f.get("speed_ratio", 1.0), f.get("rss_ratio", 1.0)
            rows.append(
                f"| {engine} | {beam} | {f['sentences_per_s']:.1f} | {speed:.2f} | {f['peak_rss_mib']:.0f} | "
                f"{rss:.2f} |"
            )
    return "\n".join(rows)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="recipes", help=f"comma-separated, of: {', '.join(SIZES)} (default: recipes)")
    p.add_argument("--repeats", type=int, default=3, help="runs per engine and beam (default 3)")
    p.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "bench")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "serving.json")
    args = p.parse_args(argv)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    if not sizes or any(s not in SIZES for s in sizes):
        p.error(f"--sizes: choose from {', '.join(SIZES)}")
    if args.repeats < 1:
        p.error("--repeats must be >= 1")
    started = time.time()
    result = {
        "sizes": {name: measure_size(name, SIZES[name], args) for name in sizes},
        "versions": versions("cpu"),
        "cores": os.cpu_count(),
    }
    finish(args.out, result, started, {name: table(size["figures"]) for name, size in result["sizes"].items()})


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        sys.exit(f"bench: error: {e}")
