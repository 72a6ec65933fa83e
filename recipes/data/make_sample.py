#!/usr/bin/env python3
"""Rebuild the small sample corpus shipped in recipes/data/ from the project's shared corpora.

    python recipes/data/make_sample.py [SHARED_DATA_DIR] [--out recipes/data]

SHARED_DATA_DIR defaults to ../shared/data next to the repository (the directory with
en-de/docs.natural.{en,de} and en-ro/docs.natural.{en,ro}; see its README.md). The output is fully
determined by the input files (fixed seed, no clock, no environment).

How the sample is drawn (both pairs use only docs.natural: full sentences from translated manuals):
  * the aligned file is cut into blocks of consecutive lines (a block mostly stays inside one
    document), and the blocks are shuffled with a fixed seed;
  * test and valid blocks are set aside first, then train (parallel, for TLM) and monolingual blocks
    are filled; each file takes its lines from its own blocks, so mono.en and mono.de come from
    different parts of the corpus and are not translations of each other (a German line is also
    dropped if any of its translations anywhere in the corpus is in mono.en);
  * lines longer than MAX_WORDS words (either side) are skipped, duplicates inside a file too;
  * no sentence (either side) of any valid/test file appears in any train or mono file of the
    sample (en-de and en-ro together), and valid and test of a pair are disjoint.
"""

import argparse
import os
import random
import sys

SEED = 20240521
MAX_WORDS = 60

EN_DE = {
    "pair": "en-de",
    "block": 100,
    "test": 500,
    "valid": 300,
    "train": 4000,
    "mono": {"en": 6000, "de": 6000},
}
EN_RO = {
    "pair": "en-ro",
    "block": 40,
    "test": 300,
    "valid": 200,
    "train": 2000,
    "mono": {"ro": 3000},
}
XCLS_TRAIN = 3000  # rows of xcls/train.en.tsv (of 7,971); the validation files are shipped whole
RESERVE = 1.5  # raw lines set aside per valid/test line, for what the dedup removes


def read_lines(path):
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.rstrip("\r\n").strip() for line in f]


def usable(*sides):
    return all(s and len(s.split()) <= MAX_WORDS and "\t" not in s for s in sides)


class Sampler:
    def __init__(self, data_dir, cfg):
        self.cfg = cfg
        src, tgt = cfg["pair"].split("-")
        self.src, self.tgt = src, tgt
        base = os.path.join(data_dir, cfg["pair"], "docs.natural")
        a, b = read_lines(f"{base}.{src}"), read_lines(f"{base}.{tgt}")
        if len(a) != len(b):
            sys.exit(f"make_sample: {base}.{src} and {base}.{tgt} differ in length")
        self.lines = {src: a, tgt: b}
        # every translation a sentence has anywhere in the corpus (sentences recur across documents)
        self.translations = {src: {}, tgt: {}}
        for x, y in zip(a, b):
            self.translations[src].setdefault(x, set()).add(y)
            self.translations[tgt].setdefault(y, set()).add(x)
        n, size = len(a), cfg["block"]
        blocks = [range(i, min(i + size, n)) for i in range(0, n, size)]
        random.Random(f"{SEED}:{cfg['pair']}").shuffle(blocks)
        self.blocks = blocks

    def pair(self, i):
        return self.lines[self.src][i], self.lines[self.tgt][i]

    def take_blocks(self, want_lines):
        """Pop blocks off the shuffled list until they hold ``want_lines`` usable pairs."""
        taken, have = [], 0
        while have < want_lines:
            if not self.blocks:
                sys.exit(f"make_sample: {self.cfg['pair']}: corpus too small for the sample")
            block = self.blocks.pop(0)
            taken.append(block)
            have += sum(1 for i in block if usable(*self.pair(i)))
        return sorted(taken, key=lambda r: r.start)  # file order inside a role


def fill(blocks, quota, accept):
    """Indices from ``blocks`` (in order) accepted by ``accept(i)``, at most ``quota``."""
    out = []
    for block in blocks:
        for i in block:
            if len(out) == quota:
                return out
            if accept(i):
                out.append(i)
    return out


def collect(sampler, quota, accept):
    """Fill ``quota`` lines from fresh blocks, taking more blocks while dedup leaves it short."""
    chosen = []
    while len(chosen) < quota and sampler.blocks:
        blocks = sampler.take_blocks(min(quota - len(chosen), 500))
        chosen += fill(blocks, quota - len(chosen), accept)
    return chosen


def build_pair(sampler, used_by_train, held_out):
    """Returns {filename: lines}. ``used_by_train``: sentences in train/mono files so far (valid and
    test must avoid them); ``held_out``: valid/test sentences so far (train/mono must avoid them).
    Both sets are updated."""
    cfg, src, tgt = sampler.cfg, sampler.src, sampler.tgt
    test_blocks = sampler.take_blocks(int(cfg["test"] * RESERVE))
    valid_blocks = sampler.take_blocks(int(cfg["valid"] * RESERVE))
    files = {}

    # train: parallel, for TLM
    seen = set()

    def accept_train(i):
        p = sampler.pair(i)
        if not usable(*p) or p in seen or p[0] in held_out or p[1] in held_out:
            return False
        seen.add(p)
        return True

    train = collect(sampler, cfg["train"], accept_train)
    files[f"train.{cfg['pair']}.{src}"] = [sampler.pair(i)[0] for i in train]
    files[f"train.{cfg['pair']}.{tgt}"] = [sampler.pair(i)[1] for i in train]

    # monolingual, each language from its own blocks
    mono_text = {}
    for lang, quota in cfg["mono"].items():
        side = 0 if lang == src else 1
        other_lang = tgt if side == 0 else src
        seen_mono = set()

        def accept_mono(i, side=side, other_lang=other_lang, seen_mono=seen_mono):
            p = sampler.pair(i)
            text = p[side]
            if not usable(text) or text in seen_mono or text in held_out:
                return False
            if sampler.translations[lang][text] & mono_text.get(other_lang, set()):
                return False  # one of its translations is already monolingual text
            seen_mono.add(text)
            return True

        chosen = collect(sampler, quota, accept_mono)
        mono_text[lang] = set(sampler.pair(i)[side] for i in chosen)
        files[f"mono.{lang}"] = [sampler.pair(i)[side] for i in chosen]

    for lines in files.values():
        used_by_train.update(lines)

    # test, then valid: avoid everything in train/mono files, and each other
    picked = set()

    def accept_eval(i):
        p = sampler.pair(i)
        if not usable(*p) or any(s in used_by_train or s in picked for s in p):
            return False
        picked.update(p)
        return True

    for split, blocks in (("test", test_blocks), ("valid", valid_blocks)):
        chosen = fill(blocks, cfg[split], accept_eval)
        if len(chosen) < cfg[split]:
            sys.exit(f"make_sample: {cfg['pair']} {split}: only {len(chosen)} of {cfg[split]} lines survive dedup")
        files[f"{split}.{cfg['pair']}.{src}"] = [sampler.pair(i)[0] for i in chosen]
        files[f"{split}.{cfg['pair']}.{tgt}"] = [sampler.pair(i)[1] for i in chosen]
        held_out.update(sampler.pair(i)[0] for i in chosen)
        held_out.update(sampler.pair(i)[1] for i in chosen)
    return files


def check(all_files):
    train_like, eval_like = set(), {}
    for pair, files in all_files.items():
        for name, lines in files.items():
            assert all(line and "\n" not in line and len(line.split()) <= MAX_WORDS for line in lines), name
            if name.startswith(("train.", "mono.")):
                train_like.update(lines)
            else:
                eval_like[(pair, name)] = set(lines)
        for split in ("train", "valid", "test"):
            a, b = (files[n] for n in sorted(files) if n.startswith(f"{split}."))
            assert len(a) == len(b), (pair, split)
    for key, lines in eval_like.items():
        assert not lines & train_like, key
    for pair in all_files:
        valid = set().union(*(v for (p, n), v in eval_like.items() if p == pair and n.startswith("valid.")))
        test = set().union(*(v for (p, n), v in eval_like.items() if p == pair and n.startswith("test.")))
        assert not valid & test, pair


def build_xcls(data_dir, out, n_train):
    """xcls/: ``n_train`` rows of the English training file (a seeded draw, in file order) and both
    validation files whole (line-aligned English and German)."""
    src = os.path.join(data_dir, "xcls")
    files = {}
    for name in ("train.en.tsv", "valid.en.tsv", "valid.de.tsv"):
        lines = read_lines(os.path.join(src, name))
        header, rows = lines[0], [line for line in lines[1:] if line]
        if name.startswith("train."):
            keep = sorted(random.Random(SEED).sample(range(len(rows)), min(n_train, len(rows))))
            rows = [rows[i] for i in keep]
        files[name] = [header] + rows
    os.makedirs(os.path.join(out, "xcls"), exist_ok=True)
    total = 0
    for name, lines in files.items():
        path = os.path.join(out, "xcls", name)
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(line + "\n" for line in lines))
        total += os.path.getsize(path)
        print(f"xcls/{name:<21} {len(lines) - 1:>6} rows  {os.path.getsize(path):>9,} bytes")
    return total


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    p = argparse.ArgumentParser(description="Rebuild recipes/data/ from the shared corpora.")
    p.add_argument(
        "data_dir",
        nargs="?",
        default=os.path.join(repo, "..", "shared", "data"),
        help="shared corpus directory (default: ../shared/data next to the repository)",
    )
    p.add_argument("--out", default=here, help="output directory (default: recipes/data)")
    p.add_argument("--pairs", default="en-de,en-ro", help="pairs to draw (default: en-de,en-ro)")
    for split in ("mono", "train", "valid", "test"):
        p.add_argument(
            f"--{split}", type=int, help=f"lines per {split} file instead of the sample's (a larger draw, same rules)"
        )
    p.add_argument(
        "--xcls-train",
        type=int,
        default=XCLS_TRAIN,
        help=f"training rows of the topic classification sample (default {XCLS_TRAIN}; 0: no xcls/)",
    )
    args = p.parse_args()

    used_by_train, held_out = set(), set()
    all_files = {}
    for cfg in (EN_DE, EN_RO):  # en-de first: en-ro then avoids its valid/test sentences
        if cfg["pair"] not in args.pairs.split(","):
            continue
        cfg = dict(cfg)
        for split in ("train", "valid", "test"):
            cfg[split] = getattr(args, split) or cfg[split]
        if args.mono:
            cfg["mono"] = {lang: args.mono for lang in cfg["mono"]}
        all_files[cfg["pair"]] = build_pair(Sampler(args.data_dir, cfg), used_by_train, held_out)
    # en-de train/mono were drawn before en-ro's valid/test existed: check the global rule
    check(all_files)

    total = 0
    for pair, files in all_files.items():
        os.makedirs(os.path.join(args.out, pair), exist_ok=True)
        for name in sorted(files):
            path = os.path.join(args.out, pair, name)
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.write("".join(line + "\n" for line in files[name]))
            size = os.path.getsize(path)
            total += size
            print(f"{pair}/{name:<20} {len(files[name]):>6} lines {size:>9,} bytes")
    if args.xcls_train:
        total += build_xcls(args.data_dir, args.out, args.xcls_train)
    print(f"total {total:,} bytes")


if __name__ == "__main__":
    main()
