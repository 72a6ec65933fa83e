"""The vocabulary of a data-bin: a joint sentencepiece BPE model trained on the tokenised train
text (or a given one), XLM's fastBPE codes, and ``dict.txt`` with XLM's special symbols first."""

import io
import os
import random
import re
from typing import Dict, Iterator, List, Sequence

from preprocess.errors import UserError
from preprocess.inputs import read_lines
from preprocess.layout import FAIRSEQ_SYMBOLS, MASK_SYMBOL, SPECIAL_SYMBOLS
from preprocess.subwords import XLMBPE, read_bpe_codes

SPM_SEED = 1234


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
            for line in read_lines(tok_paths[s.out]):
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


def train_spm(streams, line_counts, tok_paths, args, vocab_size, log) -> bytes:
    import sentencepiece as spm

    log(
        f"[2/3] training sentencepiece BPE, vocab {vocab_size}, at most "
        f"{args.spm_sentences_per_lang:,} sentences per language"
    )
    model = io.BytesIO()
    spm.set_random_generator_seed(SPM_SEED)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=_spm_sample(streams, line_counts, tok_paths, args.langs, args.spm_sentences_per_lang),
            model_writer=model,
            model_type="bpe",
            vocab_size=vocab_size,
            character_coverage=args.character_coverage,
            num_threads=args.workers,
            hard_vocab_limit=not getattr(args, "vocab_size_soft", False),
            unk_id=0,
            bos_id=1,
            eos_id=2,
            pad_id=-1,
            minloglevel=2,
        )
    except RuntimeError as e:
        message = " ".join(str(e).split())
        m = re.search(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)", message)
        if m:
            raise UserError(
                f"--vocab-size {m.group(1)} is too large for this train data: "
                f"sentencepiece can make at most {m.group(2)} pieces from it"
            )
        raise UserError(f"sentencepiece training failed: {message}")
    return _canonical_model(model.getvalue())


def write_spm_vocab(sp, path: str) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for i in range(sp.get_piece_size()):
            f.write(f"{sp.id_to_piece(i)}\t{sp.get_score(i):g}\n")


def dict_pieces(sp, log) -> List[str]:
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


def write_dict(path: str, pieces: Sequence[str], counts: Dict[str, int]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for sym in SPECIAL_SYMBOLS:
            f.write(f"{sym} 0\n")
        for piece in pieces:
            f.write(f"{piece} {counts.get(piece, 0)}\n")


def load_spm_model(path: str):
    import sentencepiece as spm

    path = os.path.abspath(path)
    with open(path, "rb") as f:
        model_proto = f.read()
    try:
        return model_proto, spm.SentencePieceProcessor(model_proto=model_proto)
    except Exception as e:
        raise UserError(f"cannot load sentencepiece model {path} (--spm-model): {' '.join(str(e).split())}")


def load_dictionary(path: str, what: str):
    from fairseq.data import Dictionary

    try:
        d = Dictionary.load(path)
    except Exception as e:  # fairseq raises plain Exception/ValueError/RuntimeError
        raise UserError(f"cannot read {what} {path}: {' '.join(str(e).split())}")
    missing = [s for s in SPECIAL_SYMBOLS if s not in d.indices]
    if missing:
        raise UserError(
            f"{what} {path} lacks XLM's special symbols ({missing[0]} and "
            f"{len(missing) - 1} more); the LM task needs {MASK_SYMBOL} as mask token"
        )
    return d


def load_bpe_codes(path: str) -> XLMBPE:
    """XLM/fastBPE codes (``a b [count]`` per line, checked) -> their applier."""
    return XLMBPE(read_bpe_codes(os.path.abspath(path), "--bpe-codes"))
