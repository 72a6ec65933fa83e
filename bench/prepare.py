"""Preprocessing at scale: ``preprocess.prepare`` against fairseq's tool chain on one corpus, in one run.

The corpus is the shipped text (``recipes/data/en-de-docs``: mono and train sides, English and
German) repeated, each copy shuffled with its own seed, to ``--lines`` lines, half per language:
for cost, not for training. Both sides start from the same vocabulary (a sentencepiece model and
``dict.txt`` that ``prepare`` learns once from the unrepeated text) and do the same work:

    ours:  xlm-fairseq-prepare DEST --mono train:en=... --mono train:de=... --spm-model --dict --workers W
    peer:  sacremoses -j W normalize -p -c tokenize   (Moses normalisation + tokenisation, as ours)
           | sentencepiece encode (num_threads=W; spm_encode's work: no CLI ships with the pip package)
           | fairseq-preprocess --only-source --srcdict --workers W

For each worker count: lines/s (input lines over wall-clock seconds) and the peak resident memory of
the whole process tree (PSS: shared pages counted once; sampled every 0.5 s).

    python bench/prepare.py --lines 10000000 --workers 2     # -> bench/results/prepare.json
"""

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.children import tool  # noqa: E402
from bench.report import finish, versions  # noqa: E402

SOURCE = ROOT / "recipes" / "data" / "en-de-docs"
LANGS = ("de", "en")


def shipped_lines(lang):
    lines = []
    for name in (f"mono.{lang}", f"train.en-de.{lang}"):
        with open(SOURCE / name, encoding="utf-8") as f:
            lines += [line for line in f.read().splitlines() if line.strip()]
    return lines


def build_corpus(work: Path, lines: int):
    """``work/corpus.{de,en}``, ``lines // 2`` each (kept between runs of the same size)."""
    paths = {}
    for lang in LANGS:
        path = work / f"corpus.{lines}.{lang}"
        paths[lang] = path
        if path.exists():
            continue
        base = shipped_lines(lang)
        todo, copy = lines // 2, 0
        with open(str(path) + ".part", "w", encoding="utf-8") as out:
            while todo > 0:
                block = base[:]
                random.Random(f"{lang}:{copy}").shuffle(block)
                block = block[:todo]
                out.write("\n".join(block) + "\n")
                todo, copy = todo - len(block), copy + 1
        os.replace(str(path) + ".part", path)
    return paths


def tree_pss(root_pid: int) -> int:
    """Proportional resident bytes (PSS) of ``root_pid`` and all its descendants: pages a forked
    worker shares with its parent count once, not once per process as RSS would."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    tree, frontier = {root_pid}, [root_pid]
    while frontier:
        pid = frontier.pop()
        for child, ppid in parents.items():
            if ppid == pid and child not in tree:
                tree.add(child)
                frontier.append(child)
    total = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("Pss:")) * 1024
        except (OSError, StopIteration, ValueError):
            pass
    return total


def measured(cmd, log: Path, stdin=None, stdout=None, env=None):
    """Run ``cmd``; (seconds, peak PSS of its process tree in MiB). A failure stops the benchmark with its log."""
    with open(log, "ab") as err:
        start = time.perf_counter()
        proc = subprocess.Popen([str(c) for c in cmd], stdin=stdin, stdout=stdout or err, stderr=err, env=env, cwd=ROOT)
        peak = [0]

        def sample():
            while proc.poll() is None:
                peak[0] = max(peak[0], tree_pss(proc.pid))
                time.sleep(0.5)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        rc = proc.wait()
        seconds = time.perf_counter() - start
        sampler.join()
    if rc != 0:
        sys.exit(f"bench: error: {cmd[0]} exited {rc}; see {log}")
    return seconds, peak[0] / 2**20


SPM_ENCODE = """
import sys, sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file=sys.argv[1]); threads = int(sys.argv[2])
out = sys.stdout
def flush(batch):
    for pieces in sp.encode(batch, out_type=str, num_threads=threads):
        out.write(" ".join(pieces) + "\\n")
batch = []
for line in sys.stdin:
    batch.append(line.rstrip("\\n"))
    if len(batch) == 20000:
        flush(batch); batch = []
flush(batch)
"""


def run_ours(corpus, vocab: Path, dest: Path, workers: int, log: Path):
    cmd = [
        tool("xlm-fairseq-prepare"),
        dest,
        "--langs",
        ",".join(LANGS),
        "--workers",
        workers,
        "--spm-model",
        vocab / "spm.model",
        "--dict",
        vocab / "dict.txt",
        "--force",
        "--quiet",
        *[a for lang in LANGS for a in ("--mono", f"train:{lang}={corpus[lang]}")],
    ]
    return measured(cmd, log)


def run_peer(corpus, vocab: Path, dest: Path, workers: int, log: Path):
    """The chain's stages one after another (files between them), as fairseq's example scripts run
    them; the peak is the largest stage's."""
    bin_dir = Path(sys.executable).parent
    seconds, peak = 0.0, 0.0
    dest.mkdir(parents=True, exist_ok=True)
    for lang in LANGS:
        tok, pieces = dest / f"tok.{lang}", dest / f"pieces.{lang}"
        stages = [
            (
                [bin_dir / "sacremoses", "-q", "-l", lang, "-j", workers, "normalize", "-p", "-c", "tokenize"],
                corpus[lang],
                tok,
            ),
            ([sys.executable, "-c", SPM_ENCODE, vocab / "spm.model", workers], tok, pieces),
        ]
        for cmd, src, out in stages:
            with open(src, "rb") as fin, open(out, "wb") as fout:
                s, p = measured(cmd, log, stdin=fin, stdout=fout)
            seconds, peak = seconds + s, max(peak, p)
        s, p = measured(
            [
                bin_dir / "fairseq-preprocess",
                "--only-source",
                "--srcdict",
                vocab / "dict.txt",
                "--trainpref",
                pieces,
                "--destdir",
                dest / f"bin.{lang}",
                "--workers",
                workers,
                "--dataset-impl",
                "mmap",
            ],
            log,
        )
        seconds, peak = seconds + s, max(peak, p)
        tok.unlink()
        pieces.unlink()
    return seconds, peak


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lines", type=int, default=10_000_000, help="corpus lines, half per language")
    p.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    p.add_argument("--systems", default="ours,peer", help="ours, peer or both")
    p.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "bench-prepare")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "prepare.json")
    args = p.parse_args(argv)
    try:
        workers = [int(w) for w in args.workers.split(",") if w]
    except ValueError:
        p.error(f"--workers {args.workers}: comma-separated numbers")
    systems = [s for s in args.systems.split(",") if s]
    if not workers or min(workers) < 1 or any(s not in ("ours", "peer") for s in systems) or args.lines < 1000:
        p.error("--workers >= 1, --systems of ours,peer, --lines >= 1000")
    work = args.work_dir.resolve()
    (work / "logs").mkdir(parents=True, exist_ok=True)
    started, facts = time.time(), versions()

    vocab = work / "vocab"
    if not (vocab / "dict.txt").exists():  # the shared vocabulary, learnt from the unrepeated text
        for lang in LANGS:
            (work / f"shipped.{lang}").write_text("\n".join(shipped_lines(lang)) + "\n", encoding="utf-8")
        measured(
            [
                tool("xlm-fairseq-prepare"),
                vocab,
                "--langs",
                ",".join(LANGS),
                "--vocab-size",
                "8000",
                "--quiet",
                *[a for lang in LANGS for a in ("--mono", f"train:{lang}={work / f'shipped.{lang}'}")],
            ],
            work / "logs" / "vocab.log",
        )
    print(f"building the corpus: {args.lines:,} lines", flush=True)
    corpus = build_corpus(work, args.lines)
    runs = {}
    for w in workers:
        for system in systems:
            dest = work / f"{system}.{w}"
            log = work / "logs" / f"{system}.{args.lines}.{w}.log"
            seconds, peak = (run_ours if system == "ours" else run_peer)(corpus, vocab, dest, w, log)
            runs[f"{system}_{w}"] = {
                "system": system,
                "workers": w,
                "seconds": round(seconds, 1),
                "lines_per_s": args.lines / seconds,
                "peak_pss_mib": round(peak),
                "commit": facts["commit"],
                "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
            }
            print(
                f"  {system:<5} {w} workers: {args.lines / seconds:9.0f} lines/s  {peak:7.0f} MiB  ({seconds:.0f} s)",
                flush=True,
            )
            subprocess.run(["rm", "-rf", str(dest)])
    # one file for every corpus size; a run replaces the earlier run of its system and worker count
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}
    by_lines = previous.get("by_lines", {})
    runs = {**by_lines.get(str(args.lines), {}).get("runs", {}), **runs}
    by_lines[str(args.lines)] = {"lines": args.lines, "runs": runs}
    rows = [
        "| workers | ours lines/s | peer lines/s | ours/peer | ours peak memory (PSS) | peer peak memory (PSS) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for w in sorted({r["workers"] for r in runs.values()}):
        a, b = runs.get(f"ours_{w}"), runs.get(f"peer_{w}")
        if a and b:
            ratio = a["lines_per_s"] / b["lines_per_s"]
            rows.append(
                f"| {w} | {a['lines_per_s']:,.0f} | {b['lines_per_s']:,.0f} | {ratio:.2f} | "
                f"{a['peak_pss_mib']} MiB | {b['peak_pss_mib']} MiB |"
            )
    finish(args.out, {"by_lines": by_lines, "versions": facts}, started, {f"{args.lines:,} lines": "\n".join(rows)})


if __name__ == "__main__":
    main()
