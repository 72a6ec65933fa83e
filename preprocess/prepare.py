"""Raw text -> fairseq data-bin for XLM pretraining and fine-tuning.

Run from the repository root::

    python -m preprocess.prepare DEST --langs en,de \\
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
XLM model (converted with ``python -m xlm_fairseq.convert``) is to read: after the same Moses
normalisation and tokenisation (and, with ``--lowercase-and-remove-accent``, XLM's lowercasing and
accent stripping), every word is split with the fastBPE codes (``a b [count]`` per line, the
applier of ``xlm_fairseq.hub.XLMBPETokenizer``) into pieces spelt as XLM spells them (``th@@ e``),
and the pieces are looked up in DICT (pieces it lacks become ``<unk>``). DEST then holds
``dict.txt``, ``bpe.codes`` and ``xlm_tokenizer.json`` instead of ``spm.model``/``spm.vocab``.

Output layout of DEST
---------------------
``dict.txt``
    fairseq ``Dictionary`` file, ``token count`` per line. First XLM's ten special symbols
    ``<special0>`` ... ``<special9>`` (count 0; ``<special1>`` is the mask token), then every
    sentencepiece piece in sentencepiece id order (its ``<unk>``, ``<s>``, ``</s>`` left out: fairseq
    adds ``<s> <pad> </s> <unk>`` itself as indices 0-3) with its count in the train data (0 for
    pieces that never occur). ``len(Dictionary.load(dict.txt)) == 4 + 10 + spm_size - 3``.
``spm.model``, ``spm.vocab``
    the sentencepiece model (and ``piece<TAB>score`` per line) used to encode.
``{split}.{lang}.bin`` / ``.idx``
    monolingual data of ``--mono SPLIT:LANG=FILE``.
``{split}.{src}-{tgt}.{src}.bin/.idx``, ``{split}.{src}-{tgt}.{tgt}.bin/.idx``
    parallel data of ``--para SPLIT:SRC-TGT=PREFIX`` (fairseq's translation naming), with
    ``src < tgt`` alphabetically: ``--para train:de-en=P`` is stored as ``train.en-de.{en,de}``.
``summary.json``, ``summary.txt``
    per dataset: sentences, tokens (pieces, ``</s>`` not counted), ``<unk>`` count and rate, and
    empty lines; also printed at the end.
``manifest.json``
    the inputs (absolute paths, sizes, mtimes) and the options that shape the output, plus the
    output files and their sizes. Re-running with identical inputs and options prints
    "up to date" and exits 0 without doing anything; a DEST made from anything else (or a
    non-empty DEST without a manifest) is refused unless ``--force``.

DEST is built in a sibling ``DEST.partial-<pid>`` and renamed into place only when complete
(with ``--force``, the old DEST is replaced only then), so a failed run never leaves a
half-written DEST nor damages an existing one.

Bad input (unparsable option, unknown language, missing/empty file, invalid UTF-8, parallel files
of different lengths, ...) gives one line ``prepare: error: ...`` on stderr and exit status 2,
before anything is written.
"""

import argparse
import codecs
import functools
import io
import json
import multiprocessing
import os
import random
import re
import shutil
import sys
import time
import unicodedata
from dataclasses import dataclass
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

FORMAT_VERSION = 1
SPECIAL_SYMBOLS = tuple(f"<special{i}>" for i in range(10))
MASK_SYMBOL = SPECIAL_SYMBOLS[1]
FAIRSEQ_SYMBOLS = ("<s>", "<pad>", "</s>", "<unk>")
BPE_CODES_FILE = "bpe.codes"  # names xlm_fairseq.hub looks for
XLM_TOKENIZER_FILE = "xlm_tokenizer.json"

DEFAULT_VOCAB_SIZE = 8000
DEFAULT_SPM_SENTENCES_PER_LANG = 300_000
DEFAULT_CHARACTER_COVERAGE = 0.9999
SPM_SEED = 1234
CHUNK_LINES = 2000
PROGRESS_EVERY = 100_000

_NAME_RE = r"[A-Za-z][A-Za-z0-9_]*"
_MONO_RE = re.compile(rf"({_NAME_RE}):({_NAME_RE})=(.+)", re.S)
_PARA_RE = re.compile(rf"({_NAME_RE}):({_NAME_RE})-({_NAME_RE})=(.+)", re.S)


class PrepareError(Exception):
    """A user error: reported as one ``prepare: error:`` line, exit status 2."""


# ---------------------------------------------------------------------------------------------
# text normalisation (importable; no fairseq / torch needed)
# ---------------------------------------------------------------------------------------------

_RO_CEDILLA_TO_COMMA = str.maketrans("şŞţŢ", "șȘțȚ")
_RO_DIACRITICS = str.maketrans("șȘțȚăĂâÂîÎ", "sStTaAaAiI")


def _base_lang(lang: str) -> str:
    return lang.split("_")[0].lower()


def normalize_romanian(text: str) -> str:
    """WMT16 Romanian normalisation: cedilla ş Ş ţ Ţ -> comma-below ș Ș ț Ț (after NFC, so that
    decomposed letters are caught too)."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFC", text).translate(_RO_CEDILLA_TO_COMMA)


def remove_romanian_diacritics(text: str) -> str:
    """WMT16's optional Romanian diacritics removal: ș ț ă â î (either case, cedilla forms too)
    -> s t a a i."""
    return normalize_romanian(text).translate(_RO_DIACRITICS)


def remove_non_printing(text: str) -> str:
    """Replace every character of unicode category C* (control, format, surrogate, private use,
    unassigned; this includes tab, CR and the BOM) and every other whitespace character by a
    plain space."""
    if text.isprintable():  # fast path: no C* / Z* character except ' '
        return text
    return "".join(" " if ch.isspace() or unicodedata.category(ch)[0] == "C" else ch for ch in text)


@functools.lru_cache(maxsize=None)
def _moses(lang: str):
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    base = _base_lang(lang)
    return MosesPunctNormalizer(lang=base, pre_replace_unicode_punct=True), MosesTokenizer(lang=base)


@functools.lru_cache(maxsize=None)
def _moses_detokenizer(lang: str):
    from sacremoses import MosesDetokenizer

    return MosesDetokenizer(lang=_base_lang(lang))


def normalize_line(line: str, lang: str, ro_remove_diacritics: bool = False) -> str:
    """Normalise and Moses-tokenise one line of language ``lang`` (no trailing newline)."""
    punct, tokenizer = _moses(lang)
    line = remove_non_printing(punct.normalize(line))
    if _base_lang(lang) == "ro":
        line = remove_romanian_diacritics(line) if ro_remove_diacritics else normalize_romanian(line)
    line = " ".join(line.split())
    if not line:
        return ""
    return tokenizer.tokenize(line, escape=False, return_str=True)


def normalize_and_tokenize(
    lines: Union[str, Iterable[str]], lang: str, ro_remove_diacritics: bool = False
) -> Union[str, List[str]]:
    """The text pipeline of ``prepare``: Moses punctuation normalisation, non-printing characters
    removed, Romanian normalisation (lang ``ro``), Moses tokenisation without escaping.

    Takes one string (returns a string) or an iterable of lines (returns a list)."""
    if isinstance(lines, str):
        return normalize_line(lines, lang, ro_remove_diacritics)
    return [normalize_line(line, lang, ro_remove_diacritics) for line in lines]


def detokenize(text: Union[str, Sequence[str]], lang: str) -> str:
    """Undo Moses tokenisation (sacremoses ``MosesDetokenizer``): ``"Hello , world !"`` ->
    ``"Hello, world!"``. Takes a tokenised string or a list of tokens."""
    tokens = text.split() if isinstance(text, str) else list(text)
    return _moses_detokenizer(lang).detokenize(tokens)


# ---------------------------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------------------------


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message):  # one line, like every other error of this tool
        sys.stderr.write(f"prepare: error: {message} (see --help)\n")
        sys.exit(2)


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
    p = _ArgumentParser(
        prog="python -m preprocess.prepare",
        description="Normalise, tokenise, learn a joint sentencepiece BPE vocabulary (or apply given "
        "XLM/fastBPE codes, --bpe-codes) and binarise monolingual and parallel text into a fairseq "
        "data-bin for xlm-fairseq.",
        epilog="Output: DEST/dict.txt (with <special0>..<special9> first), DEST/spm.model, "
        "DEST/spm.vocab, DEST/{split}.{lang}.{bin,idx}, DEST/{split}.{src}-{tgt}.{lang}.{bin,idx} "
        "(src < tgt), DEST/summary.{json,txt}, DEST/manifest.json. See preprocess/README.md.",
    )
    p.add_argument("dest", metavar="DEST", help="output directory (the data-bin)")
    p.add_argument("--langs", required=True, metavar="L1,L2,...",
                   help="comma-separated languages, e.g. en,de; each needs train data")
    p.add_argument("--mono", action="append", default=[], metavar="SPLIT:LANG=FILE",
                   help="monolingual text file, one sentence per line, e.g. train:en=raw/mono.en "
                   "(repeatable); stored as DEST/SPLIT.LANG")
    p.add_argument("--para", action="append", default=[], metavar="SPLIT:SRC-TGT=PREFIX",
                   help="line-aligned parallel files PREFIX.SRC and PREFIX.TGT, e.g. "
                   "train:en-de=raw/train.en-de (repeatable); stored as DEST/SPLIT.A-B.{A,B} with "
                   "A < B alphabetically")
    p.add_argument("--vocab-size", type=_positive_int, default=None, metavar="N",
                   help=f"sentencepiece vocabulary size (default {DEFAULT_VOCAB_SIZE}); ignored with "
                   "--spm-model, refused with --bpe-codes")
    p.add_argument("--spm-model", metavar="FILE",
                   help="use this existing sentencepiece model instead of training one (needs --dict)")
    p.add_argument("--dict", metavar="FILE",
                   help="use this existing fairseq dict.txt (needs --spm-model or --bpe-codes; must "
                   "contain <special0>..<special9>); copied to DEST/dict.txt as is")
    p.add_argument("--bpe-codes", metavar="FILE",
                   help="encode with these XLM/fastBPE codes ('a b [count]' per line) instead of "
                   "sentencepiece: pieces in XLM's spelling ('th@@ e'); needs --dict (e.g. a converted "
                   "XLM model's dict.txt); excludes --spm-model and --vocab-size")
    p.add_argument("--lowercase-and-remove-accent", action="store_true",
                   help="with --bpe-codes: lowercase and strip accents after tokenisation, as XLM does "
                   "for its XNLI-15 models (off by default: XLM's MT models are cased)")
    p.add_argument("--spm-sentences-per-lang", type=_positive_int,
                   default=DEFAULT_SPM_SENTENCES_PER_LANG, metavar="N",
                   help="train sentencepiece on at most N sentences per language, sampled with a "
                   "fixed seed from that language's train text (mono and parallel), so that a big "
                   f"language does not swamp a small one (default {DEFAULT_SPM_SENTENCES_PER_LANG})")
    p.add_argument("--character-coverage", type=_coverage, default=DEFAULT_CHARACTER_COVERAGE,
                   metavar="F", help="sentencepiece character_coverage "
                   f"(default {DEFAULT_CHARACTER_COVERAGE}; rarer characters become <unk>)")
    p.add_argument("--ro-remove-diacritics", action="store_true",
                   help="Romanian: also map ș ț ă â î to s t a a i (WMT16 practice); cedilla -> "
                   "comma-below normalisation is always applied")
    p.add_argument("--utf8-errors", choices=("strict", "replace"), default="strict",
                   help="strict (default): invalid UTF-8 is an error naming file and line; "
                   "replace: bad bytes become U+FFFD")
    p.add_argument("--workers", type=_positive_int, default=_default_workers(), metavar="N",
                   help="processes for tokenisation and encoding (default: number of CPUs)")
    p.add_argument("--force", action="store_true",
                   help="rebuild even if DEST is up to date, and replace a DEST made from other "
                   "inputs (only once the new one is complete)")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    return p


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


def _parse_langs(value: str) -> List[str]:
    langs = [x.strip() for x in value.split(",")]
    if not value.strip() or any(not x for x in langs):
        raise PrepareError(f"--langs {value!r}: expected comma-separated languages, e.g. en,de")
    for lang in langs:
        if not re.fullmatch(_NAME_RE, lang):
            raise PrepareError(f"--langs {value!r}: {lang!r} is not a language code (letters, digits, _)")
    dup = sorted({x for x in langs if langs.count(x) > 1})
    if dup:
        raise PrepareError(f"--langs {value!r}: {dup[0]!r} is listed twice")
    return langs


def parse_streams(mono: Sequence[str], para: Sequence[str], langs: Sequence[str]) -> List[Stream]:
    streams: List[Stream] = []
    for value in mono:
        m = _MONO_RE.fullmatch(value)
        if not m:
            raise PrepareError(f"--mono {value!r}: expected SPLIT:LANG=FILE, e.g. train:en=raw/mono.en")
        split, lang, path = m.groups()
        streams.append(Stream("--mono", value, split, lang, os.path.abspath(path), f"{split}.{lang}"))
    for value in para:
        m = _PARA_RE.fullmatch(value)
        if not m:
            raise PrepareError(
                f"--para {value!r}: expected SPLIT:SRC-TGT=PREFIX, e.g. train:en-de=raw/train.en-de"
            )
        split, src, tgt, prefix = m.groups()
        if src == tgt:
            raise PrepareError(f"--para {value!r}: source and target language are both {src!r}")
        a, b = sorted((src, tgt))
        for lang in (src, tgt):
            streams.append(Stream("--para", value, split, lang, os.path.abspath(f"{prefix}.{lang}"),
                                  f"{split}.{a}-{b}.{lang}", f"{a}-{b}"))
    for s in streams:
        if s.lang not in langs:
            raise PrepareError(f"{s.where}: language {s.lang!r} is not in --langs {','.join(langs)}")
    seen: Dict[str, Stream] = {}
    for s in streams:
        if s.out in seen and seen[s.out].spec != s.spec:
            raise PrepareError(f"{s.where} and {seen[s.out].where} both give {s.out}")
        if s.out in seen:
            raise PrepareError(f"{s.where} is given twice")
        seen[s.out] = s
    for lang in langs:
        if not any(s.split == "train" and s.lang == lang for s in streams):
            raise PrepareError(
                f"language {lang!r} of --langs has no train data (add --mono train:{lang}=FILE or "
                f"--para train:{lang}-XX=PREFIX)"
            )
    return streams


def _check_input_file(path: str, where: str) -> None:
    if not os.path.exists(path):
        raise PrepareError(f"input file not found: {path} ({where})")
    if not os.path.isfile(path):
        raise PrepareError(f"input is not a regular file: {path} ({where})")
    if os.path.getsize(path) == 0:
        raise PrepareError(f"input file is empty: {path} ({where})")


def _file_info(path: str) -> dict:
    st = os.stat(path)
    return {"path": path, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


# ---------------------------------------------------------------------------------------------
# reading input
# ---------------------------------------------------------------------------------------------


def scan_file(path: str, utf8_errors: str, where: str) -> int:
    """Count lines (a last line without newline counts); check UTF-8 (strict) and that the file
    has some text. Raises PrepareError naming the file (and line)."""
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
        raise PrepareError(f"input file is empty (only blank lines): {path} ({where})")
    return lines


def _locate_utf8_error(path: str, where: str) -> None:
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as e:
                bad = raw[e.start:e.start + 1].hex()
                raise PrepareError(
                    f"invalid UTF-8 in {path} line {lineno} (byte 0x{bad} at byte {e.start + 1} of "
                    f"the line) ({where}); fix the file or pass --utf8-errors replace"
                )
    raise PrepareError(f"invalid UTF-8 in {path} ({where}); fix the file or pass --utf8-errors replace")


def _read_lines(path: str, errors: str = "strict") -> Iterator[str]:
    with open(path, "rb") as f:
        for raw in f:
            if raw.endswith(b"\n"):
                raw = raw[:-1]
                if raw.endswith(b"\r"):
                    raw = raw[:-1]
            yield raw.decode("utf-8", errors)


def _chunks(lines: Iterable[str], size: int = CHUNK_LINES) -> Iterator[List[str]]:
    chunk: List[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


# ---------------------------------------------------------------------------------------------
# worker pool (plain map when --workers 1)
# ---------------------------------------------------------------------------------------------


class _Pool:
    def __init__(self, workers: int, initializer=None, initargs=()):
        self.workers = workers
        self.initializer = initializer
        self.initargs = initargs
        self.pool = None

    def __enter__(self):
        if self.workers > 1:
            self.pool = multiprocessing.Pool(self.workers, self.initializer, self.initargs)
        elif self.initializer is not None:
            self.initializer(*self.initargs)
        return self

    def imap(self, fn, tasks):
        if self.pool is None:
            return map(fn, tasks)
        return self.pool.imap(fn, tasks)

    def __exit__(self, exc_type, exc, tb):
        if self.pool is not None:
            if exc_type is None:
                self.pool.close()
            else:
                self.pool.terminate()
            self.pool.join()
        return False


def _tokenize_task(task: Tuple[str, bool, List[str]]) -> List[str]:
    lang, ro_remove, lines = task
    return [normalize_line(line, lang, ro_remove) for line in lines]


_ENCODER = {}


def _init_encoder(model_proto: bytes, table, eos: int) -> None:
    import sentencepiece as spm

    _ENCODER["sp"] = spm.SentencePieceProcessor(model_proto=model_proto)
    _ENCODER["table"] = table
    _ENCODER["eos"] = eos


def _load_bpe(path: str):
    """XLM/fastBPE codes -> the BPE applier of ``xlm_fairseq.hub`` (``XLMBPETokenizer``), after
    checking that every line reads ``a b [count]``."""
    path = os.path.abspath(path)
    merges = 0
    try:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                parts = line.split()
                if not parts or (lineno == 1 and line.startswith("#version")):
                    continue
                if len(parts) not in (2, 3) or (len(parts) == 3 and not parts[2].isdigit()):
                    raise PrepareError(f"--bpe-codes {path} line {lineno}: expected 'a b [count]' "
                                       f"(fastBPE codes), got {line.strip()[:60]!r}")
                merges += 1
    except UnicodeDecodeError as e:
        raise PrepareError(f"--bpe-codes {path}: invalid UTF-8 ({e.reason} at byte {e.start})")
    if not merges:
        raise PrepareError(f"--bpe-codes {path}: no merges in it ('a b [count]' per line)")
    bpe_class, _ = _xlm_bpe_tools()
    return bpe_class(path, lowercase=False)


def _xlm_bpe_tools():
    """(XLMBPETokenizer, lowercase_and_remove_accent) from xlm_fairseq.hub, imported without the
    plugin's INFO lines (this tool's --quiet means quiet)."""
    import logging

    plugin_logger = logging.getLogger("xlm_fairseq")
    level = plugin_logger.level
    plugin_logger.setLevel(logging.WARNING)
    try:
        from xlm_fairseq.hub import XLMBPETokenizer, lowercase_and_remove_accent
    finally:
        plugin_logger.setLevel(level)
    return XLMBPETokenizer, lowercase_and_remove_accent


def _init_bpe_encoder(codes_path: str, lowercase: bool, indices: Dict[str, int], unk: int, eos: int) -> None:
    _ENCODER["bpe"] = _load_bpe(codes_path)
    _ENCODER["lowercase"] = _xlm_bpe_tools()[1] if lowercase else None
    _ENCODER["indices"] = indices
    _ENCODER["unk"] = unk
    _ENCODER["eos"] = eos


def _encode_bpe_task(lines: List[str]):
    """Tokenised lines -> XLM BPE pieces (``th@@ e``) -> (flat dictionary ids with </s> after each
    sentence, sentence lengths including </s>); pieces not in the dictionary become <unk>."""
    import numpy as np

    bpe, lower = _ENCODER["bpe"], _ENCODER["lowercase"]
    indices, unk, eos = _ENCODER["indices"], _ENCODER["unk"], _ENCODER["eos"]
    ids: List[int] = []
    lengths: List[int] = []
    for line in lines:
        words = line.split()
        if lower is not None:
            words = [w for w in map(lower, words) if w]
        start = len(ids)
        for word in words:
            ids.extend(indices.get(piece, unk) for piece in bpe.bpe(word))
        ids.append(eos)
        lengths.append(len(ids) - start)
    return np.asarray(ids, dtype=np.int32), np.asarray(lengths, dtype=np.int64)


def _spm_encoder(model_proto: bytes, dictionary):
    """(initializer, its arguments, task) of the sentencepiece encoder for _binarize_all."""
    import numpy as np
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_proto=model_proto)
    table = np.full(sp.get_piece_size(), dictionary.unk(), dtype=np.int64)
    for i in range(sp.get_piece_size()):
        if not (sp.is_control(i) or sp.is_unknown(i)):
            table[i] = dictionary.index(sp.id_to_piece(i))
    return _init_encoder, (model_proto, table, dictionary.eos()), _encode_task


def _encode_task(lines: List[str]):
    """Tokenised lines -> (flat dictionary ids with </s> after each sentence, sentence lengths
    including </s>)."""
    import numpy as np

    pieces = _ENCODER["sp"].encode(lines, out_type=int)
    lengths = np.fromiter((len(x) for x in pieces), dtype=np.int64, count=len(pieces))
    total = int(lengths.sum())
    spm_ids = np.fromiter((i for x in pieces for i in x), dtype=np.int64, count=total)
    ids = np.insert(_ENCODER["table"][spm_ids], np.cumsum(lengths), _ENCODER["eos"])
    return ids.astype(np.int32), lengths + 1


# ---------------------------------------------------------------------------------------------
# the build
# ---------------------------------------------------------------------------------------------


class _Log:
    def __init__(self, quiet: bool):
        self.quiet = quiet

    def __call__(self, message: str) -> None:
        if not self.quiet:
            sys.stderr.write(f"prepare: {message}\n")
            sys.stderr.flush()


def _progress(log: _Log, what: str, done: int, total: int, last: int) -> int:
    if done // PROGRESS_EVERY > last // PROGRESS_EVERY:
        log(f"  {what}: {done:,} / {total:,} lines")
    return done


def _tokenize_all(streams, line_counts, tmp, args, log) -> Dict[str, str]:
    tok_paths = {}
    with _Pool(args.workers) as pool:
        for n, s in enumerate(streams, 1):
            total = line_counts[s.out]
            log(f"[1/3] normalising + tokenising {s.out} ({total:,} lines, {s.lang}) [{n}/{len(streams)}]")
            tok_path = os.path.join(tmp, f"{s.out}.tok")
            tasks = ((s.lang, args.ro_remove_diacritics, chunk)
                     for chunk in _chunks(_read_lines(s.path, args.utf8_errors)))
            done = 0
            with open(tok_path, "w", encoding="utf-8", newline="\n") as out:
                for result in pool.imap(_tokenize_task, tasks):
                    out.write("".join(line + "\n" for line in result))
                    done = _progress(log, s.out, done + len(result), total, done)
            tok_paths[s.out] = tok_path
    return tok_paths


def _spm_sample(streams, line_counts, tok_paths, langs, cap) -> Iterator[str]:
    """At most ``cap`` non-empty tokenised train sentences per language, drawn with a fixed seed."""
    for lang in langs:
        files = [s for s in streams if s.split == "train" and s.lang == lang]
        total = sum(line_counts[s.out] for s in files)
        keep = None
        if total > cap:
            keep = set(random.Random(f"{SPM_SEED}:{lang}").sample(range(total), cap))
        index = 0
        for s in files:
            for line in _read_lines(tok_paths[s.out]):
                if (keep is None or index in keep) and line:
                    yield line
                index += 1


def _canonical_model(proto: bytes) -> bytes:
    """Drop the thread count that sentencepiece records in the model, so that the model bytes do
    not depend on --workers (the pieces never do)."""
    try:
        from sentencepiece import sentencepiece_model_pb2

        m = sentencepiece_model_pb2.ModelProto()
        m.ParseFromString(proto)
        m.trainer_spec.ClearField("num_threads")
        return m.SerializeToString()
    except Exception:  # protobuf missing or different: keep the model as trained
        return proto


def _train_spm(streams, line_counts, tok_paths, args, vocab_size, log) -> bytes:
    import sentencepiece as spm

    log(f"[2/3] training sentencepiece BPE, vocab {vocab_size}, at most "
        f"{args.spm_sentences_per_lang:,} sentences per language")
    model = io.BytesIO()
    spm.set_random_generator_seed(SPM_SEED)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=_spm_sample(streams, line_counts, tok_paths, args.langs,
                                          args.spm_sentences_per_lang),
            model_writer=model,
            model_type="bpe",
            vocab_size=vocab_size,
            character_coverage=args.character_coverage,
            num_threads=args.workers,
            unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
            minloglevel=2,
        )
    except RuntimeError as e:
        message = " ".join(str(e).split())
        m = re.search(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)", message)
        if m:
            raise PrepareError(f"--vocab-size {m.group(1)} is too large for this train data: "
                               f"sentencepiece can make at most {m.group(2)} pieces from it")
        raise PrepareError(f"sentencepiece training failed: {message}")
    return _canonical_model(model.getvalue())


def _write_spm_vocab(sp, path: str) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for i in range(sp.get_piece_size()):
            f.write(f"{sp.id_to_piece(i)}\t{sp.get_score(i):g}\n")


def _dict_pieces(sp, log) -> List[str]:
    reserved = set(FAIRSEQ_SYMBOLS) | set(SPECIAL_SYMBOLS)
    pieces = []
    for i in range(sp.get_piece_size()):
        if sp.is_control(i) or sp.is_unknown(i):
            continue
        piece = sp.id_to_piece(i)
        if piece in reserved or any(ch.isspace() for ch in piece):
            log(f"warning: sentencepiece piece {piece!r} cannot go into dict.txt; it encodes as <unk>")
            continue
        pieces.append(piece)
    return pieces


def _write_dict(path: str, pieces: Sequence[str], counts: Dict[str, int]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for sym in SPECIAL_SYMBOLS:
            f.write(f"{sym} 0\n")
        for piece in pieces:
            f.write(f"{piece} {counts.get(piece, 0)}\n")


def _load_spm_model(path: str):
    import sentencepiece as spm

    path = os.path.abspath(path)
    with open(path, "rb") as f:
        model_proto = f.read()
    try:
        return model_proto, spm.SentencePieceProcessor(model_proto=model_proto)
    except Exception as e:
        raise PrepareError(f"cannot load sentencepiece model {path} (--spm-model): {' '.join(str(e).split())}")


def _load_dictionary(path: str, what: str):
    from fairseq.data import Dictionary

    try:
        d = Dictionary.load(path)
    except Exception as e:  # fairseq raises plain Exception/ValueError/RuntimeError
        raise PrepareError(f"cannot read {what} {path}: {' '.join(str(e).split())}")
    missing = [s for s in SPECIAL_SYMBOLS if s not in d.indices]
    if missing:
        raise PrepareError(f"{what} {path} lacks XLM's special symbols ({missing[0]} and "
                           f"{len(missing) - 1} more); the LM task needs {MASK_SYMBOL} as mask token")
    return d


def _binarize_all(streams, line_counts, tok_paths, dest, encoder, dictionary, args, log):
    """``encoder``: (worker initializer, its arguments, task mapping a chunk of tokenised lines to
    (flat ids with </s>, lengths))."""
    import numpy as np
    import torch
    from fairseq.data import indexed_dataset

    initializer, initargs, encode_task = encoder
    counts = np.zeros(len(dictionary), dtype=np.int64)
    stats = {}
    with _Pool(args.workers, initializer, initargs) as pool:
        for n, s in enumerate(streams, 1):
            total = line_counts[s.out]
            log(f"[3/3] encoding + binarising {s.out} [{n}/{len(streams)}]")
            prefix = os.path.join(dest, s.out)
            builder = indexed_dataset.make_builder(prefix + ".bin", impl="mmap", vocab_size=len(dictionary))
            sentences = tokens = unk = empty = 0
            for ids, lengths in pool.imap(encode_task, _chunks(_read_lines(tok_paths[s.out]))):
                ids64 = torch.from_numpy(ids.astype(np.int64))
                start = 0
                for length in lengths.tolist():
                    builder.add_item(ids64[start:start + length])
                    start += length
                sentences_before = sentences
                sentences += len(lengths)
                tokens += int(lengths.sum()) - len(lengths)
                unk += int((ids == dictionary.unk()).sum())
                empty += int((lengths == 1).sum())
                if s.split == "train":
                    counts += np.bincount(ids, minlength=len(dictionary))[: len(dictionary)]
                _progress(log, s.out, sentences, total, sentences_before)
            builder.finalize(prefix + ".idx")
            if sentences != total:  # the file changed while we were reading it
                raise PrepareError(f"{s.path} changed while being prepared ({total} lines, then {sentences})")
            stats[s.out] = {
                "input": s.path,
                "lang": s.lang,
                "split": s.split,
                "pair": s.pair,
                "sentences": sentences,
                "tokens": tokens,
                "unk": unk,
                "unk_rate": (unk / tokens) if tokens else 0.0,
                "empty_lines": empty,
            }
    return stats, counts


def _summary_text(stats: Dict[str, dict], vocab: dict) -> str:
    width = max([len("dataset")] + [len(k) for k in stats])
    if "bpe_codes" in vocab:
        subwords = f"XLM BPE codes: {vocab['bpe_codes']} merges"
    else:
        subwords = f"sentencepiece vocab {vocab['spm_vocab_size']}"
    lines = [
        f"dictionary: {vocab['dict_symbols']} symbols in dict.txt ({vocab['dict_size']} with fairseq's "
        f"<s> <pad> </s> <unk>), {subwords}",
        f"{'dataset':<{width}}  {'sentences':>10}  {'tokens':>12}  {'<unk>':>8}  {'unk rate':>9}  {'empty':>6}",
    ]
    for name in sorted(stats):
        st = stats[name]
        lines.append(f"{name:<{width}}  {st['sentences']:>10,}  {st['tokens']:>12,}  {st['unk']:>8,}  "
                     f"{100 * st['unk_rate']:>8.3f}%  {st['empty_lines']:>6,}")
    return "\n".join(lines) + "\n"


def _signature(args, streams: List[Stream]) -> dict:
    options = {
        "langs": list(args.langs),
        "ro_remove_diacritics": bool(args.ro_remove_diacritics),
        "utf8_errors": args.utf8_errors,
    }
    if args.bpe_codes:
        options["bpe_codes"] = _file_info(os.path.abspath(args.bpe_codes))
        options["dict"] = _file_info(os.path.abspath(args.dict))
        options["lowercase_and_remove_accent"] = bool(args.lowercase_and_remove_accent)
    elif args.spm_model:
        options["spm_model"] = _file_info(os.path.abspath(args.spm_model))
        options["dict"] = _file_info(os.path.abspath(args.dict))
    else:
        options["sentencepiece"] = {
            "model_type": "bpe",
            "vocab_size": args.vocab_size,
            "character_coverage": args.character_coverage,
            "sentences_per_lang": args.spm_sentences_per_lang,
            "seed": SPM_SEED,
        }
    inputs = []
    for s in sorted(streams, key=lambda s: s.out):
        entry = {"dataset": s.out, "option": s.option, "spec": s.spec, "split": s.split, "lang": s.lang}
        entry.update(_file_info(s.path))
        inputs.append(entry)
    return {"format": FORMAT_VERSION, "options": options, "inputs": inputs}


def _first_difference(old: dict, new: dict) -> str:
    if old.get("format") != new.get("format"):
        return f"manifest format {old.get('format')} -> {new.get('format')}"
    old_opts, new_opts = old.get("options", {}), new.get("options", {})
    for key in sorted(set(old_opts) | set(new_opts)):
        if old_opts.get(key) != new_opts.get(key):
            return f"option {key}: {json.dumps(old_opts.get(key))} -> {json.dumps(new_opts.get(key))}"
    old_in = {x.get("dataset"): x for x in old.get("inputs", [])}
    new_in = {x["dataset"]: x for x in new["inputs"]}
    for name in sorted(set(old_in) | set(new_in)):
        a, b = old_in.get(name), new_in.get(name)
        if a is None:
            return f"new input {name} ({b['path']})"
        if b is None:
            return f"input {name} ({a.get('path')}) no longer given"
        if a.get("path") != b["path"]:
            return f"input {name}: {a.get('path')} -> {b['path']}"
        if a != b:
            return f"input {name}: {b['path']} changed (size/mtime)"
    return "unknown"


def _read_manifest(dest: str) -> Optional[dict]:
    try:
        with open(os.path.join(dest, "manifest.json"), encoding="utf-8") as f:
            manifest = json.load(f)
        return manifest if isinstance(manifest, dict) else None
    except (OSError, ValueError):
        return None


def _outputs_intact(dest: str, manifest: dict) -> bool:
    outputs = manifest.get("outputs")
    if not isinstance(outputs, dict) or not outputs:
        return False
    for name, size in outputs.items():
        path = os.path.join(dest, name)
        if not os.path.isfile(path) or os.path.getsize(path) != size:
            return False
    return True


def _versions() -> dict:
    versions = {"python": sys.version.split()[0]}
    for module in ("sacremoses", "sentencepiece", "fairseq", "torch", "numpy"):
        try:
            versions[module] = getattr(__import__(module), "__version__", "?")
        except Exception:
            versions[module] = None
    return versions


def build(args, streams: List[Stream], line_counts: Dict[str, int], dest: str, signature: dict, log) -> dict:
    """Build the complete data-bin into the (new, empty) directory ``dest``."""
    started = time.time()
    tmp = os.path.join(dest, "tmp")
    os.makedirs(tmp)
    tok_paths = _tokenize_all(streams, line_counts, tmp, args, log)

    import sentencepiece as spm

    pieces = None
    if args.bpe_codes:
        log(f"[2/3] using the given XLM BPE codes {args.bpe_codes} + {args.dict}")
        bpe = _load_bpe(args.bpe_codes)
        dictionary = _load_dictionary(os.path.abspath(args.dict), "--dict")
        shutil.copyfile(args.dict, os.path.join(dest, "dict.txt"))
        shutil.copyfile(args.bpe_codes, os.path.join(dest, BPE_CODES_FILE))
        with open(os.path.join(dest, XLM_TOKENIZER_FILE), "w", encoding="utf-8") as f:
            json.dump({"type": "xlm_bpe", "lowercase_and_remove_accent": bool(args.lowercase_and_remove_accent),
                       "langs": list(args.langs), "bpe_codes": BPE_CODES_FILE}, f, indent=2)
            f.write("\n")
        encoder = (_init_bpe_encoder, (os.path.abspath(args.bpe_codes), bool(args.lowercase_and_remove_accent),
                                       dict(dictionary.indices), dictionary.unk(), dictionary.eos()), _encode_bpe_task)
        subwords = {"bpe_codes": len(bpe.ranks)}
    else:
        if args.spm_model:
            log(f"[2/3] using the given vocabulary {args.spm_model} + {args.dict}")
            model_proto, sp = _load_spm_model(args.spm_model)
            dictionary = _load_dictionary(os.path.abspath(args.dict), "--dict")
            shutil.copyfile(args.dict, os.path.join(dest, "dict.txt"))
        else:
            model_proto = _train_spm(streams, line_counts, tok_paths, args, args.vocab_size, log)
            sp = spm.SentencePieceProcessor(model_proto=model_proto)
            pieces = _dict_pieces(sp, log)
            _write_dict(os.path.join(dest, "dict.txt"), pieces, {})
            dictionary = _load_dictionary(os.path.join(dest, "dict.txt"), "generated dictionary")
        with open(os.path.join(dest, "spm.model"), "wb") as f:
            f.write(model_proto)
        _write_spm_vocab(sp, os.path.join(dest, "spm.vocab"))
        encoder = _spm_encoder(model_proto, dictionary)
        subwords = {"spm_vocab_size": sp.get_piece_size()}

    stats, counts = _binarize_all(streams, line_counts, tok_paths, dest, encoder, dictionary, args, log)
    if pieces is not None:  # the real counts of the train data
        _write_dict(os.path.join(dest, "dict.txt"), pieces,
                    {p: int(counts[dictionary.index(p)]) for p in pieces})
    shutil.rmtree(tmp)

    n_symbols = sum(1 for _ in open(os.path.join(dest, "dict.txt"), encoding="utf-8"))
    vocab = dict(subwords, dict_symbols=n_symbols, dict_size=len(dictionary))
    summary = {"vocab": vocab, "datasets": stats}
    with open(os.path.join(dest, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, ensure_ascii=False)
        f.write("\n")
    text = _summary_text(stats, vocab)
    with open(os.path.join(dest, "summary.txt"), "w", encoding="utf-8") as f:
        f.write(text)

    manifest = dict(signature)
    manifest["outputs"] = {name: os.path.getsize(os.path.join(dest, name)) for name in sorted(os.listdir(dest))}
    manifest["created"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    manifest["seconds"] = round(time.time() - started, 1)
    manifest["workers"] = args.workers
    manifest["versions"] = _versions()
    with open(os.path.join(dest, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, ensure_ascii=False)
        f.write("\n")
    return {"summary_text": text}


def run(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    log = _Log(args.quiet)

    # -- cheap checks: options and files ------------------------------------------------------
    args.langs = _parse_langs(args.langs)
    if args.bpe_codes:
        if args.spm_model:
            raise PrepareError("--bpe-codes and --spm-model exclude each other (XLM BPE or sentencepiece)")
        if args.vocab_size is not None:
            raise PrepareError("--bpe-codes takes the vocabulary from --dict; --vocab-size does not apply")
        if not args.dict:
            raise PrepareError("--bpe-codes needs --dict (the dictionary the codes' pieces are looked up in)")
        _check_input_file(os.path.abspath(args.bpe_codes), "--bpe-codes")
        _check_input_file(os.path.abspath(args.dict), "--dict")
    elif args.lowercase_and_remove_accent:
        raise PrepareError("--lowercase-and-remove-accent applies only with --bpe-codes")
    elif bool(args.spm_model) != bool(args.dict):
        raise PrepareError("--spm-model and --dict go together (give both, or neither to train a new vocabulary)")
    if args.spm_model:
        _check_input_file(os.path.abspath(args.spm_model), "--spm-model")
        _check_input_file(os.path.abspath(args.dict), "--dict")
        args.vocab_size = None
    elif args.vocab_size is None:
        args.vocab_size = DEFAULT_VOCAB_SIZE
    streams = parse_streams(args.mono, args.para, args.langs)
    for s in streams:
        _check_input_file(s.path, s.where)

    dest = os.path.abspath(args.dest)
    if os.path.dirname(dest) == dest:
        raise PrepareError(f"DEST {args.dest!r} cannot be a filesystem root")
    for s in streams:
        if os.path.commonpath([s.path, dest]) == dest:
            raise PrepareError(f"input {s.path} lies inside DEST {dest} ({s.where})")
    signature = _signature(args, streams)

    # -- is DEST already there? -----------------------------------------------------------------
    if os.path.lexists(dest):
        if not os.path.isdir(dest) or os.path.islink(dest):
            raise PrepareError(f"DEST {dest} exists and is not a directory")
        manifest = _read_manifest(dest)
        if manifest is not None and all(manifest.get(k) == v for k, v in signature.items()):
            if _outputs_intact(dest, manifest) and not args.force:
                if not args.quiet:
                    print(f"prepare: {dest} is up to date (same inputs and options); nothing to do")
                return 0
            if not _outputs_intact(dest, manifest):
                log(f"{dest} has the same inputs but its files are incomplete or changed: rebuilding")
        elif os.listdir(dest) and not args.force:
            if manifest is None:
                raise PrepareError(f"DEST {dest} exists, is not empty and has no manifest.json of "
                                   "this tool; use --force to replace it")
            raise PrepareError(f"DEST {dest} was prepared from different inputs or options "
                               f"({_first_difference(manifest, signature)}); use --force to replace it")

    # -- read every input once: UTF-8, blank files, parallel line counts -------------------------
    line_counts: Dict[str, int] = {}
    for s in streams:
        line_counts[s.out] = scan_file(s.path, args.utf8_errors, s.where)
    for s in streams:
        if s.pair is None:
            continue
        other = next(t for t in streams if t.spec == s.spec and t.option == s.option and t is not s)
        if line_counts[s.out] != line_counts[other.out]:
            raise PrepareError(
                f"parallel files differ in length: {s.path} has {line_counts[s.out]} lines, "
                f"{other.path} has {line_counts[other.out]} lines ({s.where})"
            )

    if args.spm_model:  # check the given vocabulary before any work
        _load_spm_model(args.spm_model)
        _load_dictionary(os.path.abspath(args.dict), "--dict")
    if args.bpe_codes:
        _load_bpe(args.bpe_codes)
        _load_dictionary(os.path.abspath(args.dict), "--dict")

    # -- build into DEST.partial-<pid>, then move into place ---------------------------------------
    parent = os.path.dirname(dest)
    os.makedirs(parent, exist_ok=True)
    partial = f"{dest}.partial-{os.getpid()}"
    if os.path.lexists(partial):
        shutil.rmtree(partial)
    os.makedirs(partial)
    log(f"building {dest} in {partial} ({len(streams)} input files, {sum(line_counts.values()):,} lines, "
        f"{args.workers} workers)")
    try:
        result = build(args, streams, line_counts, partial, signature, log)
        if os.path.lexists(dest):
            old = f"{dest}.old-{os.getpid()}"
            os.rename(dest, old)
            os.rename(partial, dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(partial, dest)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    if not args.quiet:
        sys.stdout.write(result["summary_text"])
        print(f"prepare: wrote {dest}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        return run(argv)
    except PrepareError as e:
        sys.stdout.flush()
        sys.stderr.write(f"prepare: error: {e}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("prepare: interrupted\n")
        return 130


if __name__ == "__main__":
    # Run the copy imported under the package name, so that worker functions pickle as
    # ``preprocess.prepare.*`` whatever the multiprocessing start method.
    try:
        from preprocess.prepare import main as _main
    except ImportError:  # run as a plain script
        _main = main
    sys.exit(_main())
