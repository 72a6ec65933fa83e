"""The vocabulary of a data-bin: a joint sentencepiece BPE model trained on the tokenised train
text (or a given one), XLM's fastBPE codes, and ``dict.txt`` with XLM's special symbols first."""

import io
import os
import random
import re
from typing import Dict, Iterable, Iterator, List, Sequence, Tuple

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
    log(
        f"[2/3] training sentencepiece BPE, vocab {vocab_size}, at most "
        f"{args.spm_sentences_per_lang:,} sentences per language"
    )
    sentences = _spm_sample(streams, line_counts, tok_paths, args.langs, args.spm_sentences_per_lang)
    return train_spm_bpe(
        sentences, vocab_size, args.character_coverage, not getattr(args, "vocab_size_soft", False), args.workers
    )


def train_spm_bpe(
    sentences: Iterable[str],
    vocab_size: int,
    character_coverage: float = 0.9999,
    hard_vocab_limit: bool = False,
    threads: int = 1,
) -> bytes:
    """A sentencepiece BPE model learnt on tokenised ``sentences`` (ids: <unk> 0, <s> 1, </s> 2, no pad), its
    bytes independent of ``threads``; a data-bin's joint vocabulary, or a new language's pieces
    (:func:`extend_spm_model`)."""
    import sentencepiece as spm

    model = io.BytesIO()
    spm.set_random_generator_seed(SPM_SEED)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=(line for line in sentences if line),
            model_writer=model,
            model_type="bpe",
            vocab_size=vocab_size,
            character_coverage=character_coverage,
            num_threads=threads,
            hard_vocab_limit=hard_vocab_limit,
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


def _proto(model: bytes):
    from sentencepiece import sentencepiece_model_pb2

    m = sentencepiece_model_pb2.ModelProto()
    m.ParseFromString(model)
    return m


def _reachable(pieces: Sequence[str], known: set) -> List[str]:
    """The pieces BPE can still make: one character, or two pieces it can make (a piece whose parts were
    dropped would never be produced)."""
    kept, made = [], set(known)
    for piece in sorted(pieces, key=len):
        if len(piece) == 1 or any(piece[:i] in made and piece[i:] in made for i in range(1, len(piece))):
            made.add(piece)
            kept.append(piece)
    order = {p: i for i, p in enumerate(pieces)}
    return sorted(kept, key=order.get)


def extend_spm_model(old: bytes, new: bytes, keep: Sequence[str] = ()) -> Tuple[bytes, List[str], List[str]]:
    """``old`` with the pieces of ``new`` it lacks appended after its own (BPE merges by score: the old
    merges all come first, so a word made of old pieces alone segments as before). A new piece that
    would change how a line of ``keep`` (tokenised text of the old languages) segments is left out, as is
    one that can no longer be made. Returns (model bytes, pieces added in order, pieces left out)."""
    import sentencepiece as spm

    base, learnt = _proto(old), _proto(new)
    normal = base.pieces[0].__class__.NORMAL
    have = {p.piece for p in base.pieces}
    candidates = [p.piece for p in learnt.pieces if p.type == normal and p.piece not in have]
    candidates = [p for p in candidates if not any(ch.isspace() for ch in p)]
    lowest = min((p.score for p in base.pieces if p.type == normal), default=0.0)
    added, dropped = list(candidates), []

    def build(pieces):
        m = _proto(old)
        for i, piece in enumerate(pieces):
            entry = m.pieces.add()
            entry.piece, entry.score, entry.type = piece, lowest - 1 - i, normal
        return m.SerializeToString()

    while True:
        added = _reachable(added, have)
        model = build(added)
        sp = spm.SentencePieceProcessor(model_proto=model)
        new_pieces = set(added)
        # a new character only replaces an <unk>: kept
        fired = {p for line in keep for p in sp.encode_as_pieces(line) if p in new_pieces and len(p) > 1}
        if not fired:
            break
        dropped += [p for p in added if p in fired]
        added = [p for p in added if p not in fired]
    dropped += [p for p in candidates if p not in added and p not in dropped]
    return model, added, dropped
