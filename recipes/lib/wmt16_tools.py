"""Small data steps of the WMT16 recipes (recipes/wmt16_en_de.sh, recipes/wmt16_en_ro.sh).

Each subcommand reads its inputs, writes its output atomically (``OUT.tmp-<pid>`` renamed into
place), prints one line on success, and on a user error prints one line ``wmt16_tools: error: ...``
on stderr and exits with status 2. Run ``python recipes/lib/wmt16_tools.py SUBCOMMAND --help``.

verify          SHA-256 of downloads against recipes/checksums.sha256 (and the work dir's
                checksums.lock for entries published there as UNVERIFIED)
head-gz         the first N lines of one or more gzip files, as valid UTF-8
sgm2txt         the segments of a WMT SGML file (optionally inside a tarball), one a line
extract-para    the two sides of a parallel corpus inside .tgz/.zip archives, concatenated
vocab-to-dict   an XLM vocabulary file (``word count``) -> a fairseq dict.txt as XLM numbers it
same-dict       check that two dict.txt list the same symbols in the same order
hyps            H- lines of fairseq-generate -> tokenised and detokenised hypothesis files
tokenize-ref    a raw reference -> Moses-tokenised as preprocess/ does (for tokenised BLEU)
strip-diacritics  Romanian reference without diacritics
summary         the BLEU table of an evaluation directory
"""

import argparse
import gzip
import hashlib
import json
import os
import re
import sys
import tarfile
import zipfile
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

PROG = "wmt16_tools"
SPECIAL_SYMBOLS = [f"<special{i}>" for i in range(10)]
XLM_HEAD = ("<s>", "</s>", "<pad>", "<unk>")
UNVERIFIED = "UNVERIFIED"


class ToolError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


class AtomicWriter:
    """Text (or bytes) written to ``path.tmp-<pid>`` and renamed to ``path`` only on success."""

    def __init__(self, path: str, binary: bool = False):
        self.path = path
        self.tmp = f"{path}.tmp-{os.getpid()}"
        self.binary = binary

    def __enter__(self):
        parent = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(parent, exist_ok=True)
        if self.binary:
            self.f = open(self.tmp, "wb")
        else:
            self.f = open(self.tmp, "w", encoding="utf-8", newline="\n")
        return self.f

    def __exit__(self, exc_type, exc, tb):
        self.f.close()
        if exc_type is None:
            os.replace(self.tmp, self.path)
        else:
            try:
                os.unlink(self.tmp)
            except OSError:
                pass
        return False


def _need_file(path: str, what: str) -> None:
    if not os.path.isfile(path):
        raise ToolError(f"{what} not found: {path}")


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def read_digest_file(path: str) -> Dict[str, str]:
    """``DIGEST  NAME`` per line (sha256sum format; ``#`` comments) -> {NAME: DIGEST}."""
    table: Dict[str, str] = {}
    if not os.path.exists(path):
        return table
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 2:
                raise ToolError(f"{path} line {lineno}: expected 'DIGEST  FILENAME', got {line!r}")
            digest, name = parts
            name = name.lstrip("*")
            if digest != UNVERIFIED and not re.fullmatch(r"[0-9a-f]{64}", digest):
                raise ToolError(f"{path} line {lineno}: {digest!r} is neither a SHA-256 (64 hex digits) nor {UNVERIFIED}")
            if name in table and table[name] != digest:
                raise ToolError(f"{path} line {lineno}: {name} is listed twice with different digests")
            table[name] = digest
    return table


# ---------------------------------------------------------------------------------------------
# verify
# ---------------------------------------------------------------------------------------------


def verify(path: str, name: str, checksums: str, lock: str, accept_new: bool) -> str:
    """Check ``path`` (known as ``name``) and return a one-line verdict; raise ToolError to refuse."""
    _need_file(path, "file to verify")
    published = read_digest_file(checksums)
    if name not in published:
        raise ToolError(f"{name}: no entry in {checksums}; add 'DIGEST  {name}' (or '{UNVERIFIED}  {name}') first")
    actual = sha256_of(path)
    expected = published[name]
    if expected != UNVERIFIED:
        if actual != expected:
            raise ToolError(f"{name}: SHA-256 {actual} differs from {expected} in {checksums}; refusing {path}")
        return f"{name}: sha256 OK (published digest in {os.path.basename(checksums)})"
    locked = read_digest_file(lock)
    if name in locked:
        if actual != locked[name]:
            raise ToolError(f"{name}: SHA-256 {actual} differs from {locked[name]} recorded in {lock} by an earlier "
                            f"run; the file changed: refusing {path}")
        return f"{name}: sha256 OK (recorded in {lock}; no published digest)"
    if not accept_new:
        raise ToolError(f"{name}: no published SHA-256 ({UNVERIFIED} in {checksums}); its digest is {actual}. "
                        f"Check it yourself, then re-run with --accept-new-checksums to record it in {lock}")
    os.makedirs(os.path.dirname(os.path.abspath(lock)), exist_ok=True)
    with open(lock, "a", encoding="utf-8") as f:
        f.write(f"{actual}  {name}\n")
    return f"{name}: sha256 {actual} recorded in {lock} (--accept-new-checksums; nothing published to check against)"


def cmd_verify(args) -> None:
    for path in args.files:
        print(verify(path, args.name or os.path.basename(path), args.checksums, args.lock, args.accept_new_checksums))


# ---------------------------------------------------------------------------------------------
# monolingual data
# ---------------------------------------------------------------------------------------------


def cmd_head_gz(args) -> None:
    for path in args.files:
        _need_file(path, "gzip file")
    written = replaced = 0
    with AtomicWriter(args.out, binary=True) as out:
        for path in args.files:
            if written >= args.lines:
                break
            try:
                with gzip.open(path, "rb") as f:
                    for raw in f:
                        if written >= args.lines:
                            break
                        raw = raw.rstrip(b"\r\n")
                        try:
                            text = raw.decode("utf-8")
                        except UnicodeDecodeError:
                            text = raw.decode("utf-8", "replace")
                            replaced += 1
                        out.write(text.encode("utf-8") + b"\n")
                        written += 1
            except (OSError, EOFError) as e:
                raise ToolError(f"cannot read {path} as gzip: {e}")
    note = f", {replaced} lines with invalid UTF-8 repaired (U+FFFD)" if replaced else ""
    short = f" (only {written} available, fewer than the {args.lines} asked for)" if written < args.lines else ""
    print(f"{args.out}: {written} lines{short}{note}")


# ---------------------------------------------------------------------------------------------
# WMT SGML dev/test sets
# ---------------------------------------------------------------------------------------------

_SEG_RE = re.compile(r"<seg[^>]*>(.*?)</seg>", re.I | re.S)


def sgm_segments(text: str) -> List[str]:
    """The text of every ``<seg ...>...</seg>`` in document order, whitespace-trimmed, entities
    left as they are (as Moses' input-from-sgm.perl and sacrebleu read WMT sets)."""
    return [" ".join(seg.split()) for seg in _SEG_RE.findall(text)]


def _read_member(archive: str, member: str) -> bytes:
    _need_file(archive, "archive")
    try:
        with tarfile.open(archive, "r:*") as tar:
            try:
                f = tar.extractfile(member)
            except KeyError:
                f = None
            if f is None:
                names = [n for n in tar.getnames() if n.endswith(".sgm")]
                hint = f" (it has {len(names)} .sgm files, e.g. {names[0]})" if names else ""
                raise ToolError(f"{archive} has no member {member}{hint}")
            return f.read()
    except tarfile.TarError as e:
        raise ToolError(f"cannot read {archive} as a tarball: {e}")


def cmd_sgm2txt(args) -> None:
    if args.tar:
        data = _read_member(args.tar, args.sgm)
        where = f"{args.tar}:{args.sgm}"
    else:
        _need_file(args.sgm, "SGML file")
        with open(args.sgm, "rb") as f:
            data = f.read()
        where = args.sgm
    segments = sgm_segments(data.decode("utf-8"))
    if not segments:
        raise ToolError(f"{where}: no <seg> elements")
    with AtomicWriter(args.out) as out:
        for seg in segments:
            out.write(seg + "\n")
    print(f"{args.out}: {len(segments)} segments from {where}")


# ---------------------------------------------------------------------------------------------
# parallel training data (Europarl v8, SETimes2)
# ---------------------------------------------------------------------------------------------


def _archive_members(archive: str) -> List[str]:
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            return z.namelist()
    with tarfile.open(archive, "r:*") as tar:
        return [m.name for m in tar.getmembers() if m.isfile()]


def _archive_lines(archive: str, member: str) -> Iterator[bytes]:
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z, z.open(member) as f:
            yield from f
        return
    with tarfile.open(archive, "r:*") as tar:
        f = tar.extractfile(member)
        yield from f


def cmd_extract_para(args) -> None:
    a, b = args.langs.split("-")
    pair_names = (f"{a}-{b}", f"{b}-{a}")
    counts = {a: 0, b: 0}
    with AtomicWriter(f"{args.out_prefix}.{a}", binary=True) as out_a, AtomicWriter(f"{args.out_prefix}.{b}", binary=True) as out_b:
        for archive in args.archives:
            _need_file(archive, "archive")
            try:
                members = _archive_members(archive)
            except (tarfile.TarError, zipfile.BadZipFile, OSError) as e:
                raise ToolError(f"cannot read {archive}: {e}")
            found = {}
            for lang in (a, b):
                hits = [m for m in members if any(os.path.basename(m).endswith(f".{p}.{lang}") for p in pair_names)]
                if len(hits) != 1:
                    raise ToolError(f"{archive}: expected one member named *.{a}-{b}.{lang} or *.{b}-{a}.{lang}, "
                                    f"found {len(hits)}: {hits[:4]}")
                found[lang] = hits[0]
            n = {}
            for lang, out in ((a, out_a), (b, out_b)):
                n[lang] = 0
                for raw in _archive_lines(archive, found[lang]):
                    out.write(raw.rstrip(b"\r\n").decode("utf-8", "replace").encode("utf-8") + b"\n")
                    n[lang] += 1
            if n[a] != n[b]:
                raise ToolError(f"{archive}: {found[a]} has {n[a]} lines but {found[b]} has {n[b]}")
            print(f"{archive}: {n[a]} sentence pairs ({found[a]}, {found[b]})")
            for lang in (a, b):
                counts[lang] += n[lang]
    print(f"{args.out_prefix}.{{{a},{b}}}: {counts[a]} sentence pairs")


# ---------------------------------------------------------------------------------------------
# XLM vocabulary -> fairseq dict.txt
# ---------------------------------------------------------------------------------------------


def xlm_vocab_words(lines: Iterable[str]) -> List[Tuple[str, int]]:
    """The words of an XLM vocabulary file in the order XLM numbers them after its 14 reserved
    entries: lines that are not ``word count`` (two fields, count all digits), lines containing
    U+2028, repeated words and the reserved words themselves are skipped."""
    seen = set(XLM_HEAD) | set(SPECIAL_SYMBOLS)
    words = []
    for line in lines:
        if "\u2028" in line:
            continue
        parts = line.rstrip().split()
        if len(parts) != 2 or not parts[1].isdigit() or parts[0] in seen:
            continue
        seen.add(parts[0])
        words.append((parts[0], int(parts[1])))
    return words


def cmd_vocab_to_dict(args) -> None:
    _need_file(args.vocab, "XLM vocabulary")
    with open(args.vocab, encoding="utf-8") as f:
        words = xlm_vocab_words(f)
    if not words:
        raise ToolError(f"{args.vocab}: no 'word count' lines")
    with AtomicWriter(args.out) as out:
        for sym in SPECIAL_SYMBOLS:
            out.write(f"{sym} 0\n")
        for word, count in words:
            out.write(f"{word} {count}\n")
    print(f"{args.out}: {len(SPECIAL_SYMBOLS)} special symbols + {len(words)} words of {args.vocab}")


def dict_symbols(path: str) -> List[str]:
    _need_file(path, "dict.txt")
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").rsplit(" ", 1)[0] for line in f if line.strip()]


def cmd_same_dict(args) -> None:
    a, b = dict_symbols(args.a), dict_symbols(args.b)
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            raise ToolError(f"{args.a} and {args.b} differ at entry {i + 1}: {x!r} vs {y!r}")
    if len(a) != len(b):
        raise ToolError(f"{args.a} has {len(a)} symbols, {args.b} has {len(b)}")
    print(f"{args.a} and {args.b}: the same {len(a)} symbols")


# ---------------------------------------------------------------------------------------------
# evaluation
# ---------------------------------------------------------------------------------------------


def _preprocess():
    try:
        import preprocess.prepare as prepare
    except ImportError as e:
        raise ToolError(f"cannot import preprocess.prepare ({e}); run from the repository root or set PYTHONPATH")
    return prepare


def cmd_hyps(args) -> None:
    _need_file(args.gen, "fairseq-generate output")
    hyps: Dict[int, str] = {}
    with open(args.gen, encoding="utf-8") as f:
        for line in f:
            if line.startswith("H-"):
                head, _, rest = line.rstrip("\n").partition("\t")
                _, _, text = rest.partition("\t")
                hyps[int(head[2:])] = text
    n = max(hyps) + 1 if hyps else 0
    if args.expect_lines_of:
        _need_file(args.expect_lines_of, "reference")
        with open(args.expect_lines_of, "rb") as f:
            expected = sum(1 for _ in f)
        missing = [i for i in range(expected) if i not in hyps]
        if missing or n > expected:
            raise ToolError(f"{args.gen}: {len(hyps)} hypotheses for the {expected} sentences of "
                            f"{args.expect_lines_of} ({len(missing)} missing, first id {missing[0] if missing else '-'}); "
                            "was a sentence skipped as too long?")
        n = expected
    prepare = _preprocess()
    with AtomicWriter(args.out_tok) as tok, AtomicWriter(args.out_detok) as detok:
        for i in range(n):
            text = hyps.get(i, "")
            tok.write(text + "\n")
            detok.write(prepare.detokenize(text, args.lang) + "\n")
    print(f"{args.out_detok}: {n} hypotheses ({args.lang}, detokenised); {args.out_tok}: as generated (tokenised)")


def cmd_tokenize_ref(args) -> None:
    _need_file(args.ref, "reference")
    prepare = _preprocess()
    with open(args.ref, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    with AtomicWriter(args.out) as out:
        for line in prepare.normalize_and_tokenize(lines, args.lang, args.ro_remove_diacritics):
            out.write(line + "\n")
    print(f"{args.out}: {len(lines)} reference lines tokenised as preprocess/ does ({args.lang})")


def cmd_strip_diacritics(args) -> None:
    _need_file(args.ref, "reference")
    prepare = _preprocess()
    with open(args.ref, encoding="utf-8") as f, AtomicWriter(args.out) as out:
        n = 0
        for line in f:
            out.write(prepare.remove_romanian_diacritics(line.rstrip("\n")) + "\n")
            n += 1
    print(f"{args.out}: {n} lines without Romanian diacritics")


def _read_score(path: str) -> Optional[str]:
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        text = f.read().strip()
    m = re.search(r"=\s*([0-9.]+)", text)
    return m.group(1) if m else None


def cmd_summary(args) -> None:
    paper = json.loads(args.paper) if args.paper else {}
    rows = []
    for direction in args.directions:
        d = os.path.join(args.eval_dir, direction)
        rows.append((direction, _read_score(os.path.join(d, "sacrebleu.txt")),
                     _read_score(os.path.join(d, "sacrebleu.nodiacritics.txt")),
                     _read_score(os.path.join(d, "tokenized_bleu.txt")), paper.get(direction)))
    show_nodiac = any(r[2] is not None for r in rows)
    header = ["direction", "sacreBLEU (detok, raw ref)"] + (["sacreBLEU (ref w/o diacritics)"] if show_nodiac else []) \
        + ["tokenised BLEU", "paper (tokenised)"]
    table = [header]
    for direction, sacre, nodiac, tok, ref in rows:
        row = [direction, sacre or "-"] + ([nodiac or "-"] if show_nodiac else []) + [tok or "-", str(ref) if ref else "-"]
        table.append(row)
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]
    text = "\n".join(lines) + "\n"
    with AtomicWriter(os.path.join(args.eval_dir, "summary.txt")) as out:
        out.write(text)
    sys.stdout.write(text)


# ---------------------------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write(f"{PROG}: error: {message}\n")
        sys.exit(2)


def _positive(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return n


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("verify", help="check SHA-256 digests of downloaded files")
    s.add_argument("files", nargs="+", metavar="FILE")
    s.add_argument("--name", help="the download's file name (default: the basename of FILE)")
    s.add_argument("--checksums", required=True, help="published digests (recipes/checksums.sha256)")
    s.add_argument("--lock", required=True, help="digests recorded by earlier runs (WORK/checksums.lock)")
    s.add_argument("--accept-new-checksums", action="store_true",
                   help="record the digest of a file listed as UNVERIFIED instead of refusing it")
    s.set_defaults(fn=cmd_verify)

    s = sub.add_parser("head-gz", help="first N lines of gzip files, in order")
    s.add_argument("files", nargs="+", metavar="GZ")
    s.add_argument("--lines", type=_positive, required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(fn=cmd_head_gz)

    s = sub.add_parser("sgm2txt", help="segments of a WMT SGML file, one a line")
    s.add_argument("sgm", metavar="SGM", help="the .sgm file (with --tar: its member name)")
    s.add_argument("out", metavar="OUT")
    s.add_argument("--tar", metavar="TARBALL", help="read SGM from this tarball")
    s.set_defaults(fn=cmd_sgm2txt)

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
    s.add_argument("--expect-lines-of", metavar="REF",
                   help="refuse unless every line of REF (the test set) has a hypothesis")
    s.set_defaults(fn=cmd_hyps)

    s = sub.add_parser("tokenize-ref", help="reference -> Moses-tokenised as preprocess/ does")
    s.add_argument("ref", metavar="REF")
    s.add_argument("out", metavar="OUT")
    s.add_argument("--lang", required=True)
    s.add_argument("--ro-remove-diacritics", action="store_true")
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
    args = build_parser().parse_args(argv)
    try:
        args.fn(args)
    except ToolError as e:
        sys.stdout.flush()
        sys.stderr.write(f"{PROG}: error: {e}\n")
        return 2
    except UnicodeDecodeError as e:
        sys.stderr.write(f"{PROG}: error: invalid UTF-8 ({e.reason} at byte {e.start})\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
