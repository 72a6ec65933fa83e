"""The data steps of the WMT16 recipes' tools (``recipes/wmt16/tools.py``, the command line):
checksums of downloads, gzip heads, sacrebleu's test sets, parallel corpora inside archives, XLM
vocabularies. Each ``cmd_*`` takes the parsed arguments, writes its output whole or not at all
(:func:`preprocess.files.atomic_write`), prints one line on success and raises
:class:`preprocess.errors.UserError` on a user error."""

import copy
import gzip
import os
import re
import shutil
import tarfile
import zipfile
from typing import Dict, Iterable, Iterator, List, Tuple

from preprocess.errors import UserError
from preprocess.files import atomic_write, file_digest, file_sha256, staged_dir
from preprocess.layout import SPECIAL_SYMBOLS, XLM_SYMBOLS

UNVERIFIED = "UNVERIFIED"


def need_file(path: str, what: str) -> None:
    if not os.path.isfile(path):
        raise UserError(f"{what} not found: {path}")


# ---------------------------------------------------------------------------------------------
# verify: SHA-256 against recipes/checksums.sha256 and WORK/checksums.lock
# ---------------------------------------------------------------------------------------------


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
                raise UserError(f"{path} line {lineno}: expected 'DIGEST  FILENAME', got {line!r}")
            digest, name = parts
            name = name.lstrip("*")
            if digest != UNVERIFIED and not re.fullmatch(r"[0-9a-f]{64}", digest):
                raise UserError(
                    f"{path} line {lineno}: {digest!r} is neither a SHA-256 (64 hex digits) nor {UNVERIFIED}"
                )
            if name in table and table[name] != digest:
                raise UserError(f"{path} line {lineno}: {name} is listed twice with different digests")
            table[name] = digest
    return table


def verify(path: str, name: str, checksums: str, lock: str, accept_new: bool) -> str:
    """Check ``path`` (known as ``name``) and return a one-line verdict; raise UserError to refuse."""
    need_file(path, "file to verify")
    published = read_digest_file(checksums)
    if name not in published:
        raise UserError(f"{name}: no entry in {checksums}; add 'DIGEST  {name}' (or '{UNVERIFIED}  {name}') first")
    actual = file_sha256(path)
    expected = published[name]
    if expected != UNVERIFIED:
        if actual != expected:
            raise UserError(f"{name}: SHA-256 {actual} differs from {expected} in {checksums}; refusing {path}")
        return f"{name}: sha256 OK (published digest in {os.path.basename(checksums)})"
    locked = read_digest_file(lock)
    if name in locked:
        if actual != locked[name]:
            raise UserError(
                f"{name}: SHA-256 {actual} differs from {locked[name]} recorded in {lock} by an earlier "
                f"run; the file changed: refusing {path}"
            )
        return f"{name}: sha256 OK (recorded in {lock}; no published digest)"
    if not accept_new:
        raise UserError(
            f"{name}: no published SHA-256 ({UNVERIFIED} in {checksums}); its digest is {actual}. "
            f"Check it yourself, then re-run with --accept-new-checksums to record it in {lock}"
        )
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
        need_file(path, "gzip file")
    written = replaced = 0
    with atomic_write(args.out, binary=True) as out:
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
                raise UserError(f"cannot read {path} as gzip: {e}")
    note = f", {replaced} lines with invalid UTF-8 repaired (U+FFFD)" if replaced else ""
    short = f" (only {written} available, fewer than the {args.lines} asked for)" if written < args.lines else ""
    print(f"{args.out}: {written} lines{short}{note}")


# ---------------------------------------------------------------------------------------------
# WMT SGML dev/test sets
# ---------------------------------------------------------------------------------------------


def cmd_testset(args) -> None:
    """The reference side of sacrebleu's test set SET for LANGPAIR, as ``sacrebleu -t SET -l LANGPAIR
    --echo ref`` prints it: sacrebleu keeps the sets in $SACREBLEU (default ~/.sacrebleu), downloaded
    once and checked against its MD5 digests. ``--offline``: never download."""
    from sacrebleu.dataset import DATASETS
    from sacrebleu.utils import SACREBLEU_DIR

    dataset = DATASETS.get(args.set)
    if dataset is None:
        raise UserError(f"sacrebleu has no test set {args.set!r}")
    if args.langpair not in dataset.langpairs:
        raise UserError(
            f"sacrebleu's {args.set} has no {args.langpair} (it has {', '.join(sorted(dataset.langpairs))})"
        )
    hint = (
        f"on a machine with internet run `sacrebleu -t {args.set} -l {args.langpair} --echo src > /dev/null` "
        f"and copy its ~/.sacrebleu/{args.set.split('/')[0]} to {SACREBLEU_DIR}"
    )
    refs = cached_test_set(dataset, args.langpair, args.offline, hint)
    with open(refs[0], encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    with atomic_write(args.out) as out:
        out.write("".join(line + "\n" for line in lines))
    print(f"{args.out}: {len(lines)} lines, the reference side of sacrebleu -t {args.set} -l {args.langpair}")


def cached_test_set(dataset, langpair: str, offline: bool, hint: str) -> List[str]:
    """The reference files of ``langpair``, whole. sacrebleu downloads, unpacks and converts in place,
    and a kill in between leaves a cut .tgz or .sgm that it reuses afterwards (it checks MD5 only
    right after a download): the files are built here in a staging directory from archives whose MD5
    is checked, then moved into the cache with a ``.complete`` record; a set without it is rebuilt."""
    fields = dataset.fieldnames(langpair)
    files = [dataset._get_txt_file_path(langpair, field) for field in fields]
    record = files[0] + ".complete"  # written by this tool once every file of the set is in place
    if os.path.isfile(record) and all(os.path.isfile(f) for f in files):
        return dataset.get_reference_files(langpair)
    md5s = dataset.md5 or [None] * len(dataset.data)
    archives = [
        (os.path.join(dataset._rawdir, dataset._get_tarball_filename(url)), md5) for url, md5 in zip(dataset.data, md5s)
    ]
    verified = [md5 is not None and os.path.isfile(path) and file_digest(path, "md5") == md5 for path, md5 in archives]
    if offline and not all(verified):
        if all(os.path.isfile(f) for f in files):  # a copied cache without its archives: as sacrebleu made it
            return dataset.get_reference_files(langpair)
        raise UserError(
            f"sacrebleu test set {dataset.name} {langpair} is not in {os.path.dirname(dataset._outdir)}; {hint}"
        )
    from sacrebleu.utils import extract_tarball

    os.makedirs(dataset._rawdir, exist_ok=True)
    build = os.path.join(dataset._outdir, f".{os.path.basename(files[0])}.build")
    with staged_dir(build) as tmp:
        staged = copy.copy(dataset)
        staged._outdir, staged._rawdir = tmp, os.path.join(tmp, "raw")
        os.makedirs(staged._rawdir)
        for (path, _), ok in zip(archives, verified):
            if ok:  # unpacked anew: the cache's unpacked files may be cut
                shutil.copyfile(path, os.path.join(staged._rawdir, os.path.basename(path)))
                extract_tarball(path, staged._rawdir)
        try:
            staged.process_to_text(langpair)  # downloads (MD5 checked) and unpacks what is missing
        except (Exception, SystemExit) as e:  # sacrebleu exits on a failed download
            raise UserError(f"sacrebleu test set {dataset.name} {langpair}: download failed ({e}); {hint}") from None
        for (path, _), ok in zip(archives, verified):
            if not ok:
                os.replace(os.path.join(staged._rawdir, os.path.basename(path)), path)
        for f in files:
            os.replace(os.path.join(tmp, os.path.basename(f)), f)
        with open(record, "w", encoding="utf-8") as out:
            out.write("".join(f"{md5}  {os.path.basename(path)}\n" for path, md5 in archives))
    shutil.rmtree(build, ignore_errors=True)
    return dataset.get_reference_files(langpair)


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
    with atomic_write(f"{args.out_prefix}.{a}", binary=True) as out_a, atomic_write(
        f"{args.out_prefix}.{b}", binary=True
    ) as out_b:
        for archive in args.archives:
            need_file(archive, "archive")
            try:
                members = _archive_members(archive)
            except (tarfile.TarError, zipfile.BadZipFile, OSError) as e:
                raise UserError(f"cannot read {archive}: {e}")
            found = {}
            for lang in (a, b):
                hits = [m for m in members if any(os.path.basename(m).endswith(f".{p}.{lang}") for p in pair_names)]
                if len(hits) != 1:
                    raise UserError(
                        f"{archive}: expected one member named *.{a}-{b}.{lang} or *.{b}-{a}.{lang}, "
                        f"found {len(hits)}: {hits[:4]}"
                    )
                found[lang] = hits[0]
            n = {}
            for lang, out in ((a, out_a), (b, out_b)):
                n[lang] = 0
                for raw in _archive_lines(archive, found[lang]):
                    out.write(raw.rstrip(b"\r\n").decode("utf-8", "replace").encode("utf-8") + b"\n")
                    n[lang] += 1
            if n[a] != n[b]:
                raise UserError(f"{archive}: {found[a]} has {n[a]} lines but {found[b]} has {n[b]}")
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
    seen = set(XLM_SYMBOLS) | set(SPECIAL_SYMBOLS)
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
    need_file(args.vocab, "XLM vocabulary")
    with open(args.vocab, encoding="utf-8") as f:
        words = xlm_vocab_words(f)
    if not words:
        raise UserError(f"{args.vocab}: no 'word count' lines")
    with atomic_write(args.out) as out:
        for sym in SPECIAL_SYMBOLS:
            out.write(f"{sym} 0\n")
        for word, count in words:
            out.write(f"{word} {count}\n")
    print(f"{args.out}: {len(SPECIAL_SYMBOLS)} special symbols + {len(words)} words of {args.vocab}")


def dict_symbols(path: str) -> List[str]:
    need_file(path, "dict.txt")
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").rsplit(" ", 1)[0] for line in f if line.strip()]


def cmd_same_dict(args) -> None:
    a, b = dict_symbols(args.a), dict_symbols(args.b)
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            raise UserError(f"{args.a} and {args.b} differ at entry {i + 1}: {x!r} vs {y!r}")
    if len(a) != len(b):
        raise UserError(f"{args.a} has {len(a)} symbols, {args.b} has {len(b)}")
    print(f"{args.a} and {args.b}: the same {len(a)} symbols")
