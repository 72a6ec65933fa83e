"""Small data steps of the WMT16 recipes (recipes/wmt16_en_de.sh, recipes/wmt16_en_ro.sh).

Each subcommand reads its inputs, writes its output atomically (a temporary sibling renamed into
place), prints one line on success, and on a user error prints one line ``wmt16_tools: error: ...``
on stderr and exits with status 2. Run ``python -m recipes.wmt16.tools SUBCOMMAND --help`` (the
repository on PYTHONPATH, as the recipes set it).

verify          SHA-256 of downloads against recipes/checksums.sha256 (and the work dir's
                checksums.lock for entries published there as UNVERIFIED)
head-gz         the first N lines of one or more gzip files, as valid UTF-8
testset         one side of a sacrebleu test set (-t SET -l PAIR --echo ref), from its cache
extract-para    the two sides of a parallel corpus inside .tgz/.zip archives, concatenated
vocab-to-dict   an XLM vocabulary file (``word count``) -> a fairseq dict.txt as XLM numbers it
same-dict       check that two dict.txt list the same symbols in the same order
hyps            H- lines of fairseq-generate -> tokenised and detokenised hypothesis files
tokenize-ref    a raw reference -> Moses-tokenised as preprocess/ does (for tokenised BLEU)
strip-diacritics  Romanian reference without diacritics
summary         the BLEU table of an evaluation directory
"""

import argparse
import sys

from preprocess.errors import ArgumentParser, UserError, run_command
from recipes.wmt16.data import (
    cmd_extract_para,
    cmd_head_gz,
    cmd_same_dict,
    cmd_testset,
    cmd_verify,
    cmd_vocab_to_dict,
)
from recipes.wmt16.evaluation import cmd_hyps, cmd_strip_diacritics, cmd_summary, cmd_tokenize_ref

PROG = "wmt16_tools"


def _positive(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return n


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(name=PROG, prog=PROG, description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("verify", help="check SHA-256 digests of downloaded files")
    s.add_argument("files", nargs="+", metavar="FILE")
    s.add_argument("--name", help="the download's file name (default: the basename of FILE)")
    s.add_argument("--checksums", required=True, help="published digests (recipes/checksums.sha256)")
    s.add_argument("--lock", required=True, help="digests recorded by earlier runs (WORK/checksums.lock)")
    s.add_argument(
        "--accept-new-checksums",
        action="store_true",
        help="record the digest of a file listed as UNVERIFIED instead of refusing it",
    )
    s.set_defaults(fn=cmd_verify)

    s = sub.add_parser("head-gz", help="first N lines of gzip files, in order")
    s.add_argument("files", nargs="+", metavar="GZ")
    s.add_argument("--lines", type=_positive, required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(fn=cmd_head_gz)

    s = sub.add_parser("testset", help="the reference side of a sacrebleu test set")
    s.add_argument("set", metavar="SET", help="sacrebleu's name, e.g. wmt16, wmt16/dev")
    s.add_argument("langpair", metavar="LANGPAIR", help="e.g. en-de: the de side")
    s.add_argument("out", metavar="OUT")
    s.add_argument("--offline", action="store_true", help="never download (--data-dir: local copies only)")
    s.set_defaults(fn=cmd_testset)

    s = sub.add_parser("extract-para", help="both sides of a parallel corpus from archives")
    s.add_argument("archives", nargs="+", metavar="ARCHIVE")
    s.add_argument("--langs", required=True, help="e.g. en-ro")
    s.add_argument("--out-prefix", required=True, help="writes PREFIX.L1 and PREFIX.L2")
    s.set_defaults(fn=cmd_extract_para)

    s = sub.add_parser("vocab-to-dict", help="XLM vocabulary -> fairseq dict.txt with <special0..9>")
    s.add_argument("vocab", metavar="VOCAB")
    s.add_argument("out", metavar="OUT")
    s.set_defaults(fn=cmd_vocab_to_dict)

    s = sub.add_parser("same-dict", help="two dict.txt with the same symbols in the same order")
    s.add_argument("a", metavar="DICT_A")
    s.add_argument("b", metavar="DICT_B")
    s.set_defaults(fn=cmd_same_dict)

    s = sub.add_parser("hyps", help="fairseq-generate output -> hypothesis files")
    s.add_argument("gen", metavar="GENERATE_OUTPUT")
    s.add_argument("--lang", required=True)
    s.add_argument("--out-tok", required=True)
    s.add_argument("--out-detok", required=True)
    s.add_argument(
        "--expect-lines-of", metavar="REF", help="refuse unless every line of REF (the test set) has a hypothesis"
    )
    s.add_argument(
        "--data", metavar="DATA_BIN", help="join pieces with its text pipeline; take D- lines as detokenised"
    )
    s.set_defaults(fn=cmd_hyps)

    s = sub.add_parser("tokenize-ref", help="reference -> Moses-tokenised as preprocess/ does")
    s.add_argument("ref", metavar="REF")
    s.add_argument("out", metavar="OUT")
    s.add_argument("--lang", required=True)
    s.add_argument("--ro-remove-diacritics", action="store_true")
    s.add_argument("--data", metavar="DATA_BIN", help="tokenise with its text pipeline (settings included)")
    s.set_defaults(fn=cmd_tokenize_ref)

    s = sub.add_parser("strip-diacritics", help="Romanian text without diacritics")
    s.add_argument("ref", metavar="REF")
    s.add_argument("out", metavar="OUT")
    s.set_defaults(fn=cmd_strip_diacritics)

    s = sub.add_parser("summary", help="BLEU table of an evaluation directory")
    s.add_argument("eval_dir", metavar="EVAL_DIR")
    s.add_argument("directions", nargs="+", metavar="SRC-TGT")
    s.add_argument("--paper", help="JSON {direction: BLEU reported in the paper}")
    s.set_defaults(fn=cmd_summary)
    return p


def main(argv=None) -> int:
    return run_command(PROG, _run, argv)


def _run(argv) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.fn(args)
    except UnicodeDecodeError as e:
        raise UserError(f"invalid UTF-8 ({e.reason} at byte {e.start})") from None
    return 0


if __name__ == "__main__":
    sys.exit(main())
