"""Tokenise every input with a pool of workers (a plain loop with one) into DEST/tmp, then encode
and binarise it, byte ranges of the file in parallel, into fairseq's mmap datasets (each sentence
``pieces... </s>``). Memory stays flat with the corpus: lines stream through both stages, and the
index is written block by block. Statistics come from what was written."""

import array
import multiprocessing
import os
import shutil
import struct
import sys
from typing import Dict, List, Optional, Tuple

import numpy as np

from preprocess.errors import UserError
from preprocess.inputs import chunks, read_lines
from preprocess.text import tokenize
from preprocess.vocab import load_bpe_codes

PROGRESS_EVERY = 100_000


class Log:
    def __init__(self, quiet: bool):
        self.quiet = quiet

    def __call__(self, message: str) -> None:
        if not self.quiet:
            sys.stderr.write(f"prepare: {message}\n")
            sys.stderr.flush()


def _tokenize_task(task: Tuple[str, bool, bool, Optional[str], List[str]]) -> List[str]:
    lang, ro_remove, lowercase, segmenter, lines = task
    return [tokenize(line, lang, ro_remove, lowercase, segmenter) for line in lines]


def tokenize_all(streams, line_counts, tmp, args, log) -> Dict[str, str]:
    """Every input normalised and Moses-tokenised or segmented (the word level of the text pipeline,
    :func:`preprocess.text.tokenize`) into ``tmp/<dataset>.tok``, in input order."""
    tok_paths = {}
    pool = multiprocessing.Pool(args.workers) if args.workers > 1 else None
    imap = pool.imap if pool is not None else map
    try:
        for n, s in enumerate(streams, 1):
            total = line_counts[s.out]
            log(f"[1/3] normalising + tokenising {s.out} ({total:,} lines, {s.lang}) [{n}/{len(streams)}]")
            tok_path = os.path.join(tmp, f"{s.out}.tok")
            tasks = (
                (
                    s.lang,
                    args.ro_remove_diacritics,
                    args.lowercase_and_remove_accent,
                    args.segmenters.get(s.lang),
                    chunk,
                )
                for chunk in chunks(read_lines(s.path, args.utf8_errors))
            )
            done = 0
            with open(tok_path, "w", encoding="utf-8", newline="\n") as out:
                for result in imap(_tokenize_task, tasks):
                    out.write("".join(line + "\n" for line in result))
                    if (done + len(result)) // PROGRESS_EVERY > done // PROGRESS_EVERY:
                        log(f"  {s.out}: {done + len(result):,} / {total:,} lines")
                    done += len(result)
            tok_paths[s.out] = tok_path
        if pool is not None:
            pool.close()
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()
    return tok_paths


class _PiecesBinarizer:
    """One tokenised line -> dictionary ids followed by ``</s>``, for :func:`binarize_file`'s
    workers: :meth:`encoder` (line -> int array, ``</s>`` included) is built in each worker. Only
    picklable settings are kept; fairseq itself is imported once the work starts, so that bad input
    is refused fast."""

    def __init__(self, eos: int):
        self.eos = eos


class SentencePieceBinarizer(_PiecesBinarizer):
    def __init__(self, model_proto: bytes, dictionary):
        import sentencepiece as spm

        super().__init__(dictionary.eos())
        sp = spm.SentencePieceProcessor(model_proto=model_proto)
        # sentencepiece id -> dictionary id; control and unknown pieces -> <unk>
        self.table = [
            dictionary.unk() if sp.is_control(i) or sp.is_unknown(i) else dictionary.index(sp.id_to_piece(i))
            for i in range(sp.get_piece_size())
        ]
        self.model_proto = model_proto

    def encoder(self):
        import sentencepiece as spm

        encode = spm.SentencePieceProcessor(model_proto=self.model_proto).encode
        # one gather per line: the table's extra last entry is </s>
        table = np.asarray(self.table + [self.eos], dtype=np.int32)
        end = [len(self.table)]
        return lambda line: table[encode(line, out_type=int) + end]


class XLMBPEBinarizer(_PiecesBinarizer):
    def __init__(self, codes_path: str, dictionary):
        super().__init__(dictionary.eos())
        self.codes_path = os.path.abspath(codes_path)
        self.indices, self.unk = dict(dictionary.indices), dictionary.unk()

    def encoder(self):
        bpe, indices, unk = load_bpe_codes(self.codes_path), self.indices, self.unk

        def encode(line):
            ids = [indices.get(piece, unk) for word in line.split() for piece in bpe.bpe(word)]
            return np.asarray(ids + [self.eos], dtype=np.int32)

        return encode


COUNT_BLOCK_IDS = 1 << 22


def _blocks(path: str, dtype, count: int):
    """A binary file of ``dtype`` values, ``count`` at a time."""
    with open(path, "rb") as f:
        while True:
            block = np.fromfile(f, dtype=dtype, count=count)
            if not block.size:
                return
            yield block


def count_ids(path: str, dtype, n: int) -> np.ndarray:
    """How often each of the ``n`` dictionary ids occurs in a ``.bin`` file, read in blocks: a
    bincount over the whole mmap made every page of it resident, memory that grew with the corpus."""
    counts = np.zeros(n, dtype=np.int64)
    for ids in _blocks(path, dtype, COUNT_BLOCK_IDS):
        counts += np.bincount(ids, minlength=n)[:n]
    return counts


SIZES_BLOCK = 1 << 20  # sentences a worker holds before writing their sizes out


def _binarize_chunk(task) -> None:
    """One worker: the lines of ``path`` between two byte offsets -> ``part.bin`` (ids) and
    ``part.sizes`` (int32 lengths), written as they come: memory does not grow with the chunk."""
    from fairseq.file_chunker_utils import Chunker

    binarizer, path, start, end, part, dtype = task
    encode = binarizer.encoder()
    sizes = array.array("i")
    with Chunker(path, start, end) as lines, open(part + ".bin", "wb") as data, open(part + ".sizes", "wb") as out:
        for line in lines:
            ids = encode(line.rstrip("\n"))
            data.write(ids.astype(dtype, copy=False).tobytes())
            sizes.append(len(ids))
            if len(sizes) >= SIZES_BLOCK:
                sizes.tofile(out)
                del sizes[:]
        sizes.tofile(out)


def _size_blocks(parts: List[str]):
    for part in parts:
        yield from _blocks(part + ".sizes", np.int32, SIZES_BLOCK)


def write_dataset(parts: List[str], prefix: str, dtype) -> Tuple[int, int, int]:
    """The workers' parts, in order -> ``prefix.{bin,idx}`` in fairseq's mmap format (what its
    ``MMapIndexedDatasetBuilder`` writes, byte for byte), the index written block by block: fairseq's
    builder holds every sentence's size and offset as Python objects (~80 bytes a sentence, 0.4 GB at
    5 million). Returns (sentences, pieces with </s>, sentences of </s> alone)."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset, _dtype_header_code

    with open(prefix + ".bin", "wb") as out:
        for part in parts:
            with open(part + ".bin", "rb") as f:
                shutil.copyfileobj(f, out, 1 << 22)
    sentences = sum(os.path.getsize(part + ".sizes") for part in parts) // 4
    tokens = empty = 0
    itemsize = np.dtype(dtype).itemsize
    with open(prefix + ".idx", "wb") as idx:
        idx.write(MMapIndexedDataset.Index._HDR_MAGIC)
        idx.write(struct.pack("<Q", 1))
        idx.write(struct.pack("<B", _dtype_header_code(dtype)))
        idx.write(struct.pack("<Q", sentences))
        for sizes in _size_blocks(parts):
            idx.write(sizes.tobytes())
            tokens += int(sizes.sum(dtype=np.int64))
            empty += int((sizes == 1).sum())
        address = 0
        for sizes in _size_blocks(parts):
            ends = address + np.cumsum(sizes, dtype=np.int64) * itemsize
            idx.write((ends - sizes.astype(np.int64) * itemsize).tobytes())
            address = int(ends[-1])
    for part in parts:
        os.unlink(part + ".bin")
        os.unlink(part + ".sizes")
    return sentences, tokens, empty


def binarize_file(path: str, prefix: str, binarizer, dtype, workers: int) -> Tuple[int, int, int]:
    """One tokenised file -> ``prefix.{bin,idx}``, ``workers`` byte ranges of it encoded in parallel."""
    from fairseq.file_chunker_utils import find_offsets

    offsets = find_offsets(path, workers)
    tasks = [
        (binarizer, path, start, end, f"{prefix}.part{i}", dtype)
        for i, (start, end) in enumerate(zip(offsets, offsets[1:]))
    ]
    if workers > 1:
        with multiprocessing.Pool(workers) as pool:
            pool.map(_binarize_chunk, tasks, chunksize=1)
    else:
        _binarize_chunk(tasks[0])
    return write_dataset([task[4] for task in tasks], prefix, dtype)


def binarize_all(streams, line_counts, tok_paths, dest, binarizer, dictionary, args, log):
    """Each tokenised input -> ``dest/<dataset>.{bin,idx}``; returns (statistics per dataset, piece
    counts over the train datasets)."""
    from fairseq.data.indexed_dataset import best_fitting_int_dtype

    dtype = best_fitting_int_dtype(len(dictionary))  # fairseq's choice for the vocabulary's size
    counts = np.zeros(len(dictionary), dtype=np.int64)
    stats = {}
    for n, s in enumerate(streams, 1):
        log(f"[3/3] encoding + binarising {s.out} [{n}/{len(streams)}]")
        prefix = os.path.join(dest, s.out)
        sentences, with_eos, empty = binarize_file(tok_paths[s.out], prefix, binarizer, dtype, args.workers)
        found = count_ids(prefix + ".bin", dtype, len(dictionary))
        tokens, unk = with_eos - sentences, int(found[dictionary.unk()])
        if sentences != line_counts[s.out]:  # the file changed while we were reading it
            raise UserError(f"{s.path} changed while being prepared ({line_counts[s.out]} lines, then {sentences})")
        if s.split == "train":
            counts += found
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
