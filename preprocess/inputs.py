"""The inputs of ``prepare``: ``--mono``/``--para`` specs, and each file read once to check it
(exists, UTF-8, some text, parallel sides of equal length) before anything is written."""

import codecs
import os
import re
from dataclasses import dataclass
from typing import Dict, Iterable, Iterator, List, Optional, Sequence

from preprocess.errors import UserError
from preprocess.langs import LANG_PATTERN
from preprocess.layout import mono_dataset, pair_dataset

CHUNK_LINES = 2000
_MONO_RE = re.compile(rf"({LANG_PATTERN}):({LANG_PATTERN})=(.+)", re.S)
_PARA_RE = re.compile(rf"({LANG_PATTERN}):({LANG_PATTERN})-({LANG_PATTERN})=(.+)", re.S)


@dataclass(frozen=True)
class Stream:
    """One input file -> one binarised dataset DEST/<out>.{bin,idx}."""

    option: str  # "--mono" or "--para"
    spec: str  # the option's value as given
    split: str
    lang: str
    path: str  # absolute path of the input file
    out: str  # dataset name in DEST, e.g. "train.en" or "train.en-de.en"
    pair: Optional[str] = None  # "en-de" for parallel data (sorted)

    @property
    def where(self) -> str:
        return f"{self.option} {self.spec}"


def parse_streams(mono: Sequence[str], para: Sequence[str], langs: Sequence[str]) -> List[Stream]:
    streams: List[Stream] = []
    for value in mono:
        m = _MONO_RE.fullmatch(value)
        if not m:
            raise UserError(f"--mono {value!r}: expected SPLIT:LANG=FILE, e.g. train:en=raw/mono.en")
        split, lang, path = m.groups()
        streams.append(Stream("--mono", value, split, lang, os.path.abspath(path), mono_dataset(split, lang)))
    for value in para:
        m = _PARA_RE.fullmatch(value)
        if not m:
            raise UserError(f"--para {value!r}: expected SPLIT:SRC-TGT=PREFIX, e.g. train:en-de=raw/train.en-de")
        split, src, tgt, prefix = m.groups()
        if src == tgt:
            raise UserError(f"--para {value!r}: source and target language are both {src!r}")
        a, b = sorted((src, tgt))
        for lang in (src, tgt):
            streams.append(
                Stream(
                    "--para",
                    value,
                    split,
                    lang,
                    os.path.abspath(f"{prefix}.{lang}"),
                    pair_dataset(split, a, b, lang),
                    f"{a}-{b}",
                )
            )
    for s in streams:
        if s.lang not in langs:
            raise UserError(f"{s.where}: language {s.lang!r} is not in --langs {','.join(langs)}")
    seen: Dict[str, Stream] = {}
    for s in streams:
        if s.out in seen and seen[s.out].spec != s.spec:
            raise UserError(f"{s.where} and {seen[s.out].where} both give {s.out}")
        if s.out in seen:
            raise UserError(f"{s.where} is given twice")
        seen[s.out] = s
    for lang in langs:
        if not any(s.split == "train" and s.lang == lang for s in streams):
            raise UserError(
                f"language {lang!r} of --langs has no train data (add --mono train:{lang}=FILE or "
                f"--para train:{lang}-XX=PREFIX)"
            )
    return streams


def check_input_file(path: str, where: str) -> None:
    if not os.path.exists(path):
        raise UserError(f"input file not found: {path} ({where})")
    if not os.path.isfile(path):
        raise UserError(f"input is not a regular file: {path} ({where})")
    if os.path.getsize(path) == 0:
        raise UserError(f"input file is empty: {path} ({where})")


def file_info(path: str) -> dict:
    st = os.stat(path)
    return {"path": path, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def scan_file(path: str, utf8_errors: str, where: str) -> int:
    """Count lines (a last line without newline counts); check UTF-8 (strict) and that the file
    has some text. Raises UserError naming the file (and line)."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    lines = 0
    has_text = False
    last = b"\n"
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 20)
            if not block:
                break
            lines += block.count(b"\n")
            last = block[-1:]
            if not has_text and block.strip():
                has_text = True
            if utf8_errors == "strict":
                try:
                    decoder.decode(block)
                except UnicodeDecodeError:
                    _locate_utf8_error(path, where)
        if utf8_errors == "strict":
            try:
                decoder.decode(b"", final=True)
            except UnicodeDecodeError:
                _locate_utf8_error(path, where)
    if last != b"\n":
        lines += 1
    if not has_text:
        raise UserError(f"input file is empty (only blank lines): {path} ({where})")
    return lines


def decode_utf8_line(raw: bytes, name: str, lineno: int, hint: str = "") -> str:
    """One line of ``name`` decoded as strict UTF-8; else a UserError naming file, line and byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        bad = raw[e.start : e.start + 1].hex()
        raise UserError(
            f"invalid UTF-8 in {name} line {lineno} (byte 0x{bad} at byte {e.start + 1} of the line){hint}"
        ) from None


def _locate_utf8_error(path: str, where: str) -> None:
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            decode_utf8_line(raw, path, lineno, f" ({where}); fix the file or pass --utf8-errors replace")
    raise UserError(f"invalid UTF-8 in {path} ({where}); fix the file or pass --utf8-errors replace")


def read_lines(path: str, errors: str = "strict") -> Iterator[str]:
    with open(path, "rb") as f:
        for raw in f:
            if raw.endswith(b"\n"):
                raw = raw[:-1]
                if raw.endswith(b"\r"):
                    raw = raw[:-1]
            yield raw.decode("utf-8", errors)


def chunks(lines: Iterable[str], size: int = CHUNK_LINES) -> Iterator[List[str]]:
    chunk: List[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
