"""Raw text -> fairseq data-bin for XLM pretraining and fine-tuning.

::

    xlm-fairseq-prepare DEST --langs en,de \\
        --mono train:en=raw/mono.en --mono train:de=raw/mono.de \\
        --para train:en-de=raw/train.en-de --para valid:en-de=raw/valid --para test:en-de=raw/test

``--mono SPLIT:LANG=FILE`` names one monolingual file; ``--para SPLIT:SRC-TGT=PREFIX`` names the
line-aligned pair ``PREFIX.SRC`` / ``PREFIX.TGT``. Both are repeatable. Every language of
``--langs`` needs some ``train`` data (monolingual or parallel).

Pipeline, per input file: Moses punctuation normalisation (sacremoses ``MosesPunctNormalizer``,
with its unicode-punctuation pre-pass, as XLM's ``tokenize.sh``), non-printing characters (unicode
categories C*, and any whitespace) -> space, Romanian WMT16 normalisation (cedilla ş/ţ ->
comma-below ș/ț; with ``--ro-remove-diacritics`` also ș ț ă â î -> s t a a i), Moses tokenisation
(``escape=False``). One joint sentencepiece BPE model is trained on the tokenised *train* text of
all languages (at most ``--spm-sentences-per-lang`` sentences sampled per language, with a fixed
seed), everything is encoded into pieces, and the pieces are binarised with fairseq (mmap
datasets, each sentence stored as ``pieces... </s>``). ``--spm-model`` + ``--dict`` reuse an
existing vocabulary instead.

``--bpe-codes CODES --dict DICT`` replaces sentencepiece by XLM's subwords, for data that a released
XLM model (converted with ``xlm-fairseq-convert``) is to read: after the same Moses
normalisation and tokenisation (and, with ``--lowercase-and-remove-accent``, XLM's lowercasing and
accent stripping), every word is split with the fastBPE codes (``a b [count]`` per line, the
applier of ``preprocess.subwords.XLMBPESubwords``) into pieces spelt as XLM spells them (``th@@ e``),
and the pieces are looked up in DICT (pieces it lacks become ``<unk>``). DEST then holds
``dict.txt`` and ``bpe.codes`` instead of ``spm.model``/``spm.vocab``.

Either way ``text_pipeline.json`` records the pipeline (``preprocess/pipeline.py``): training copies
it into every checkpoint, and the hub, ``fairseq-generate``/``fairseq-interactive`` and validation
BLEU tokenise with it.

Output: ``dict.txt`` (XLM's ``<special0>``..``<special9>`` first, ``<special1>`` the mask), ``spm.model``
and ``spm.vocab`` (or ``bpe.codes``), ``text_pipeline.json``, ``{split}.{lang}.{bin,idx}``,
``{split}.{a}-{b}.{lang}.{bin,idx}`` with ``a < b``, ``summary.{json,txt}`` and ``manifest.json``
(what DEST was made from: a re-run with the same inputs and options does nothing). The file names are
``preprocess/layout.py``'s; every file is described in ``preprocess/README.md``.

DEST is built in a sibling ``DEST.partial-*`` and renamed into place only when complete
(with ``--force``, the old DEST is replaced only then), so a failed run never leaves a
half-written DEST nor damages an existing one.

Bad input (unparsable option, unknown language, missing/empty file, invalid UTF-8, parallel files
of different lengths, ...) gives one line ``prepare: error: ...`` on stderr and exit status 2,
before anything is written.
"""

import argparse
import os
import sys
from typing import Dict, Optional, Sequence

from preprocess.binarize import Log
from preprocess.build import build
from preprocess.errors import ArgumentParser, UserError, run_command
from preprocess.files import clean_leftovers, staged_dir
from preprocess.inputs import check_input_file, parse_streams, scan_file
from preprocess.langs import parse_langs
from preprocess.manifest import first_difference, outputs_intact, read_manifest, signature
from preprocess.segment import parse_segmenters, segmenter
from preprocess.vocab import (
    load_bpe_codes,
    load_dictionary,
    load_spm_model,
)

DEFAULT_VOCAB_SIZE = 8000
DEFAULT_SPM_SENTENCES_PER_LANG = 300_000
DEFAULT_CHARACTER_COVERAGE = 0.9999


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return number


def _coverage(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {value!r}")
    if not 0.0 < number <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {value!r}")
    return number


def _default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        name="prepare",
        prog="xlm-fairseq-prepare",
        description="Normalise, tokenise, learn a joint sentencepiece BPE vocabulary (or apply given "
        "XLM/fastBPE codes, --bpe-codes) and binarise monolingual and parallel text into a fairseq "
        "data-bin for xlm-fairseq.",
        epilog="Output: DEST/dict.txt (with <special0>..<special9> first), DEST/spm.model, "
        "DEST/spm.vocab, DEST/{split}.{lang}.{bin,idx}, DEST/{split}.{src}-{tgt}.{lang}.{bin,idx} "
        "(src < tgt), DEST/summary.{json,txt}, DEST/manifest.json. See preprocess/README.md.",
        examples=[
            "xlm-fairseq-prepare data-bin --langs en,de --mono train:en=raw/mono.en --mono train:de=raw/mono.de "
            "--para train:en-de=raw/train.en-de --para valid:en-de=raw/valid",
        ],
    )
    p.add_argument("dest", metavar="DEST", help="output directory (the data-bin)")
    p.add_argument(
        "--langs",
        required=True,
        metavar="L1,L2,...",
        help="comma-separated languages, e.g. en,de; each needs train data",
    )
    p.add_argument(
        "--mono",
        action="append",
        default=[],
        metavar="SPLIT:LANG=FILE",
        help="monolingual text file, one sentence per line, e.g. train:en=raw/mono.en "
        "(repeatable); stored as DEST/SPLIT.LANG",
    )
    p.add_argument(
        "--para",
        action="append",
        default=[],
        metavar="SPLIT:SRC-TGT=PREFIX",
        help="line-aligned parallel files PREFIX.SRC and PREFIX.TGT, e.g. "
        "train:en-de=raw/train.en-de (repeatable); stored as DEST/SPLIT.A-B.{A,B} with "
        "A < B alphabetically",
    )
    p.add_argument(
        "--vocab-size",
        type=_positive_int,
        default=None,
        metavar="N",
        help=f"sentencepiece vocabulary size (default {DEFAULT_VOCAB_SIZE}); ignored with "
        "--spm-model, refused with --bpe-codes",
    )
    p.add_argument(
        "--vocab-size-soft",
        action="store_true",
        help="--vocab-size is an upper bound: fewer pieces where the train text cannot make that many "
        "(default: an error then)",
    )
    p.add_argument(
        "--spm-model",
        metavar="FILE",
        help="use this existing sentencepiece model instead of training one (needs --dict)",
    )
    p.add_argument(
        "--dict",
        metavar="FILE",
        help="use this existing fairseq dict.txt (needs --spm-model or --bpe-codes; must "
        "contain <special0>..<special9>); copied to DEST/dict.txt as is",
    )
    p.add_argument(
        "--bpe-codes",
        metavar="FILE",
        help="encode with these XLM/fastBPE codes ('a b [count]' per line) instead of "
        "sentencepiece: pieces in XLM's spelling ('th@@ e'); needs --dict (e.g. a converted "
        "XLM model's dict.txt); excludes --spm-model and --vocab-size",
    )
    p.add_argument(
        "--lowercase-and-remove-accent",
        action="store_true",
        help="with --bpe-codes: lowercase and strip accents after tokenisation, as XLM does "
        "for its XNLI-15 models (off by default: XLM's MT models are cased)",
    )
    p.add_argument(
        "--spm-sentences-per-lang",
        type=_positive_int,
        default=DEFAULT_SPM_SENTENCES_PER_LANG,
        metavar="N",
        help="train sentencepiece on at most N sentences per language, sampled with a "
        "fixed seed from that language's train text (mono and parallel), so that a big "
        f"language does not swamp a small one (default {DEFAULT_SPM_SENTENCES_PER_LANG})",
    )
    p.add_argument(
        "--character-coverage",
        type=_coverage,
        default=DEFAULT_CHARACTER_COVERAGE,
        metavar="F",
        help=f"sentencepiece character_coverage (default {DEFAULT_CHARACTER_COVERAGE}; rarer characters become <unk>)",
    )
    p.add_argument(
        "--ro-remove-diacritics",
        action="store_true",
        help="Romanian: also map ș ț ă â î to s t a a i (WMT16 practice); cedilla -> "
        "comma-below normalisation is always applied",
    )
    p.add_argument(
        "--segment",
        action="append",
        default=[],
        metavar="LANG=NAME",
        help="cut LANG's words with segmenter NAME instead of Moses' tokeniser (jieba, mecab, pythainlp; none: "
        "Moses). Default: zh jieba, ja mecab, th pythainlp (scripts without spaces, as XLM segments them), "
        "recorded in text_pipeline.json; needs the package (pip install 'xlm-fairseq[zh]', [ja], [th])",
    )
    p.add_argument(
        "--utf8-errors",
        choices=("strict", "replace"),
        default="strict",
        help="strict (default): invalid UTF-8 is an error naming file and line; replace: bad bytes become U+FFFD",
    )
    p.add_argument(
        "--workers",
        type=_positive_int,
        default=_default_workers(),
        metavar="N",
        help="processes for tokenisation and encoding (default: number of CPUs)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="rebuild even if DEST is up to date, and replace a DEST made from other "
        "inputs (only once the new one is complete)",
    )
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    return p


def run(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    log = Log(args.quiet)

    # -- cheap checks: options and files ------------------------------------------------------
    args.langs = parse_langs(args.langs, "--langs")
    if not args.langs:
        raise UserError("--langs '': expected comma-separated languages, e.g. en,de")
    if args.bpe_codes:
        if args.spm_model:
            raise UserError("--bpe-codes and --spm-model exclude each other (XLM BPE or sentencepiece)")
        if args.vocab_size is not None:
            raise UserError("--bpe-codes takes the vocabulary from --dict; --vocab-size does not apply")
        if not args.dict:
            raise UserError("--bpe-codes needs --dict (the dictionary the codes' pieces are looked up in)")
        check_input_file(os.path.abspath(args.bpe_codes), "--bpe-codes")
        check_input_file(os.path.abspath(args.dict), "--dict")
    elif args.lowercase_and_remove_accent:
        raise UserError("--lowercase-and-remove-accent applies only with --bpe-codes")
    elif bool(args.spm_model) != bool(args.dict):
        raise UserError("--spm-model and --dict go together (give both, or neither to train a new vocabulary)")
    if args.spm_model:
        check_input_file(os.path.abspath(args.spm_model), "--spm-model")
        check_input_file(os.path.abspath(args.dict), "--dict")
        args.vocab_size = None
    elif args.vocab_size is None:
        args.vocab_size = DEFAULT_VOCAB_SIZE
    args.segmenters = parse_segmenters(args.segment, args.langs)
    for name in set(args.segmenters.values()):
        segmenter(name)  # installed? (one line naming the package if not)
    streams = parse_streams(args.mono, args.para, args.langs)
    for s in streams:
        check_input_file(s.path, s.where)

    dest = os.path.abspath(args.dest)
    if os.path.dirname(dest) == dest:
        raise UserError(f"DEST {args.dest!r} cannot be a filesystem root")
    for s in streams:
        if os.path.commonpath([s.path, dest]) == dest:
            raise UserError(f"input {s.path} lies inside DEST {dest} ({s.where})")
    wanted = signature(args, streams)

    # -- is DEST already there? (after a killed run: its staging directories cleaned, DEST put back) --
    for line in clean_leftovers(dest):
        print(f"prepare: {line}", file=sys.stderr)
    if os.path.lexists(dest):
        if not os.path.isdir(dest) or os.path.islink(dest):
            raise UserError(f"DEST {dest} exists and is not a directory")
        manifest = read_manifest(dest)
        if manifest is not None and all(manifest.get(k) == v for k, v in wanted.items()):
            if outputs_intact(dest, manifest) and not args.force:
                if not args.quiet:
                    print(f"prepare: {dest} is up to date (same inputs and options); nothing to do")
                return 0
            if not outputs_intact(dest, manifest):
                log(f"{dest} has the same inputs but its files are incomplete or changed: rebuilding")
        elif os.listdir(dest) and not args.force:
            if manifest is None:
                raise UserError(
                    f"DEST {dest} exists, is not empty and has no manifest.json of this tool; use --force to replace it"
                )
            raise UserError(
                f"DEST {dest} was prepared from different inputs or options "
                f"({first_difference(manifest, wanted)}); use --force to replace it"
            )

    # -- read every input once: UTF-8, blank files, parallel line counts -------------------------
    line_counts: Dict[str, int] = {}
    for s in streams:
        line_counts[s.out] = scan_file(s.path, args.utf8_errors, s.where)
    for s in streams:
        if s.pair is None:
            continue
        other = next(t for t in streams if t.spec == s.spec and t.option == s.option and t is not s)
        if line_counts[s.out] != line_counts[other.out]:
            raise UserError(
                f"parallel files differ in length: {s.path} has {line_counts[s.out]} lines, "
                f"{other.path} has {line_counts[other.out]} lines ({s.where})"
            )

    if args.spm_model:  # check the given vocabulary before any work
        load_spm_model(args.spm_model)
        load_dictionary(os.path.abspath(args.dict), "--dict")
    if args.bpe_codes:
        load_bpe_codes(args.bpe_codes)
        load_dictionary(os.path.abspath(args.dict), "--dict")

    # -- build beside DEST, then move into place ----------------------------------------------
    log(f"building {dest} ({len(streams)} input files, {sum(line_counts.values()):,} lines, {args.workers} workers)")
    with staged_dir(dest) as partial:
        result = build(args, streams, line_counts, partial, wanted, log)
    if not args.quiet:
        sys.stdout.write(result["summary_text"])
        print(f"prepare: wrote {dest}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_command("prepare", run, argv)


if __name__ == "__main__":
    sys.exit(main())
