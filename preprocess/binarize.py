"""Tokenise every input with a pool of workers (a plain loop with one) into DEST/tmp, then encode
and binarise it with fairseq's ``FileBinarizer``: mmap datasets, each sentence ``pieces... </s>``.
Statistics are read back from what was written."""

import multiprocessing
import os
import sys
from typing import Dict, List, Tuple

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


def _tokenize_task(task: Tuple[str, bool, bool, List[str]]) -> List[str]:
    lang, ro_remove, lowercase, lines = task
    return [tokenize(line, lang, ro_remove, lowercase) for line in lines]


def tokenize_all(streams, line_counts, tmp, args, log) -> Dict[str, str]:
    """Every input normalised and Moses-tokenised (the word level of the text pipeline,
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
                (s.lang, args.ro_remove_diacritics, args.lowercase_and_remove_accent, chunk)
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
    """What fairseq's ``FileBinarizer`` asks of a ``Binarizer`` (``binarize_line``; fairseq itself is
    imported only once the work starts, so that bad input is refused fast): one tokenised line ->
    dictionary ids followed by ``</s>``. The encoder (line -> int32 array, ``</s>`` included) is built
    in each worker, on first use."""

    def __init__(self, eos: int):
        self.eos = eos
        self._encode = None

    def binarize_line(self, line: str, summary):
        import torch

        if self._encode is None:
            self._encode = self.encoder()
        ids = self._encode(line.rstrip("\n"))
        summary.num_seq += 1
        summary.num_tok += len(ids)
        return torch.from_numpy(ids)

    def __getstate__(self):
        return {**self.__dict__, "_encode": None}


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


def count_ids(path: str, dtype, n: int) -> np.ndarray:
    """How often each of the ``n`` dictionary ids occurs in a ``.bin`` file, read in blocks: a
    bincount over the whole mmap made every page of it resident, memory that grew with the corpus."""
    counts = np.zeros(n, dtype=np.int64)
    with open(path, "rb") as f:
        while True:
            ids = np.fromfile(f, dtype=dtype, count=COUNT_BLOCK_IDS)
            if not ids.size:
                return counts
            counts += np.bincount(ids, minlength=n)[:n]


def binarize_all(streams, line_counts, tok_paths, dest, binarizer, dictionary, args, log):
    """Each tokenised input -> ``dest/<dataset>.{bin,idx}``; returns (statistics per dataset, piece
    counts over the train datasets)."""
    from fairseq.binarizer import FileBinarizer
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    counts = np.zeros(len(dictionary), dtype=np.int64)
    stats = {}
    for n, s in enumerate(streams, 1):
        log(f"[3/3] encoding + binarising {s.out} [{n}/{len(streams)}]")
        prefix = os.path.join(dest, s.out)
        FileBinarizer.multiprocess_dataset(tok_paths[s.out], "mmap", binarizer, prefix, len(dictionary), args.workers)
        written = MMapIndexedDataset(prefix)
        sizes = np.asarray(written.sizes, dtype=np.int64)
        dtype = written._index.dtype
        del written  # the mmap, before anything renames DEST
        found = count_ids(prefix + ".bin", dtype, len(dictionary))
        sentences, tokens, unk = len(sizes), int(sizes.sum()) - len(sizes), int(found[dictionary.unk()])
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
            "empty_lines": int((sizes == 1).sum()),
        }
    return stats, counts
