"""Bilingual lexicon induction (MUSE's word translation retrieval): does a pretrained XLM align the
words of two languages, before any translation training?

    xlm-fairseq-lexicon [probe] MODEL --dict de-en.txt [--data DATA] [--json OUT]
    xlm-fairseq-lexicon induce --mono de=TEXT --mono en=TEXT --out DIR   (preprocess/lexicon.py: a lexicon
                                                                         from monolingual text alone)

``--dict`` is a MUSE dictionary (``src tgt`` a line; a word with several translations on several
lines). For each source word, every target-language word is ranked by cosine similarity (``nn``) and
by MUSE's cross-domain similarity local scaling (``csls``, k = 10); precision@1 / @5 count the source
words with a listed translation among the first 1 / 5. Word vectors come from two places:
``embeddings``, the input embedding rows of the word's subwords, averaged; ``contextual``, the
last-layer states of the word read alone (``</s> pieces </s>``, its language id), averaged over its
subwords. The mean cosine of the listed pairs (what XLM's paper reports) is printed beside the mean
cosine of random pairs of the same words, its chance level.

On a small corpus most dictionary words are rare, and a word seen a few times cannot be aligned
yet; so the same retrieval is also scored among the ``--frequent`` most frequent words of each
language (default 1,000: the source words and the candidates), where alignment shows first.

The words of each language are the ``--max-words`` most frequent alphabetic words of the data-bin's
training text in that language (monolingual and parallel files; default: the data-bin the model
was trained on), in their most frequent casing; dictionaries are lowercase, matched case-blind.
Without training text the model's whole-word vocabulary pieces serve both languages. A source
word's own spelling is never a candidate: in a joint vocabulary an identical string has identical
subwords, and MUSE's dictionaries leave identical pairs out for the same reason.

MODEL is a pretrained LM: a training checkpoint, a converter or export directory. ``--random-init``
scores the same architecture and vocabulary with fresh weights, the level that shared subwords alone
give."""

import glob
import json
import logging
import os
import sys
from collections import Counter
from typing import Dict, List, Sequence, Tuple

import torch

from preprocess.errors import ArgumentParser, UserError, run_command
from preprocess.files import atomic_write
from preprocess.lexicon import is_word, read_dictionary, retrieval_precision

FREQUENT_WORDS = 1000
VECTOR_KINDS = ("embeddings", "contextual")


def training_words(hub, data: str, lang: str, max_words: int) -> List[str]:
    """The ``max_words`` most frequent alphabetic words of the data-bin's training text in ``lang``,
    each in its most frequent casing; [] if the data-bin has no training text in ``lang``."""
    from fairseq.data import data_utils

    prefixes = [p[: -len(".idx")] for p in sorted(glob.glob(os.path.join(data, f"train*.{lang}.idx")))]
    counts: Counter = Counter()
    dictionary = hub.dictionary
    specials = {dictionary.eos(), dictionary.pad(), dictionary.bos(), dictionary.unk()}
    for prefix in prefixes:
        dataset = data_utils.load_indexed_dataset(prefix, dictionary)
        if dataset is None:
            continue
        for i in range(len(dataset)):
            pieces = [dictionary[t] for t in dataset[i].tolist() if t not in specials]
            counts.update(w for w in hub.tokenizer.join(pieces).split() if is_word(w))
    casing: Dict[str, Tuple[int, str]] = {}
    totals: Counter = Counter()
    for word, n in counts.items():
        key = word.lower()
        totals[key] += n
        if key not in casing or n > casing[key][0]:
            casing[key] = (n, word)
    return [casing[key][1] for key, _ in totals.most_common(max_words)]


def vocabulary_words(hub) -> List[str]:
    """Whole-word pieces of the vocabulary (``▁word`` for sentencepiece; fastBPE's word ends)."""
    words = []
    for piece in hub.dictionary.symbols[hub.dictionary.nspecial :]:
        if hub.tokenizer.kind == "sentencepiece":
            if piece.startswith("\u2581") and is_word(piece[1:]):
                words.append(piece[1:])
        elif not piece.endswith("@@") and is_word(piece):
            words.append(piece)
    return words


@torch.no_grad()
def word_vectors(hub, words: Sequence[str], lang: str, batch_size: int = 512) -> Dict[str, torch.Tensor]:
    """{kind: len(words) x dim}: the mean input embedding of each word's subwords, and the mean of
    its last-layer states when read alone."""
    eos = hub.dictionary.eos()
    ids = [[hub.dictionary.index(p) for p in hub.tokenizer.split(w)] or [hub.dictionary.unk()] for w in words]
    table = hub.model.lm.embeddings.weight.float().cpu()
    embeddings = torch.stack([table[i].mean(0) for i in ids]) if ids else torch.empty(0, table.size(1))
    contextual = torch.empty_like(embeddings)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    pad = hub.dictionary.pad()
    for start in range(0, len(order), batch_size):
        index = order[start : start + batch_size]
        width = max(len(ids[i]) for i in index) + 2
        batch = torch.full((len(index), width), pad, dtype=torch.long)
        inside = torch.zeros(len(index), width, dtype=torch.bool)
        for row, i in enumerate(index):
            n = len(ids[i])
            batch[row, : n + 2] = torch.tensor([eos, *ids[i], eos])
            inside[row, 1 : n + 1] = True
        features = hub.extract_features(batch, lang).float().cpu()
        weights = inside.unsqueeze(-1).float()
        contextual[index] = (features * weights).sum(1) / weights.sum(1)
    return {"embeddings": embeddings, "contextual": contextual}


def pair_cosines(src_vecs, tgt_vecs, seed: int = 0) -> Tuple[float, float]:
    """(mean cosine of the listed pairs, row i of each; mean cosine of random pairs of the same words)."""
    cos = torch.nn.functional.cosine_similarity
    listed = cos(src_vecs, tgt_vecs, dim=-1).mean().item()
    perm = torch.randperm(len(tgt_vecs), generator=torch.Generator().manual_seed(seed))
    return round(listed, 4), round(cos(src_vecs, tgt_vecs[perm], dim=-1).mean().item(), 4)


def evaluate(
    hub, dictionary: Dict[str, List[str]], src_lang: str, tgt_lang: str, data: str, max_words: int, frequent: int = 0
) -> dict:
    """The probe's numbers for one model: {kind: {nn_p@1, ..., cos_pairs, cos_random}, counts...}, and
    with ``frequent`` the same retrieval among that many most frequent words of each language
    (``result["frequent"]``)."""
    for lang in (src_lang, tgt_lang):
        hub._check_lang(lang)
    src_all = training_words(hub, data, src_lang, max_words) if data else []
    tgt_all = training_words(hub, data, tgt_lang, max_words) if data else []
    source = "training text" if src_all and tgt_all else "vocabulary"
    if source == "vocabulary":
        src_all = tgt_all = vocabulary_words(hub)
    src_casing = {w.lower(): w for w in src_all}
    tgt_casing = {w.lower(): w for w in tgt_all}
    queries = [w for w, answers in dictionary.items() if w in src_casing and any(a in tgt_casing for a in answers)]
    if not queries:
        raise UserError(f"no word of the dictionary has a listed translation among the {len(tgt_all)} {tgt_lang} words")
    pairs = [(src, tgt) for src, answers in dictionary.items() for tgt in answers]
    src_words = [src_casing[w] for w in queries]
    result = {
        "directions": f"{src_lang}-{tgt_lang}",
        "words_from": source,
        "source_words": len(dictionary),
        "evaluated_source_words": len(queries),
        "target_candidates": len(tgt_all),
        "pairs": len(pairs),
    }
    vectors = {
        "src": word_vectors(hub, src_words, src_lang),
        "src_all": word_vectors(hub, src_all, src_lang),
        "tgt": word_vectors(hub, tgt_all, tgt_lang),
        "pair_src": word_vectors(hub, [src_casing.get(s, s) for s, _ in pairs], src_lang),
        "pair_tgt": word_vectors(hub, [tgt_casing.get(t, t) for _, t in pairs], tgt_lang),
    }
    for kind in VECTOR_KINDS:
        scores = retrieval_precision(
            vectors["src"][kind],
            src_words,
            vectors["src_all"][kind],
            vectors["tgt"][kind],
            tgt_all,
            [dictionary[w] for w in queries],
        )
        listed, chance = pair_cosines(vectors["pair_src"][kind], vectors["pair_tgt"][kind])
        result[kind] = {**scores, "cos_pairs": listed, "cos_random": chance}
    if frequent and source == "training text":  # (vocabulary pieces have no frequency order)
        result["frequent"] = frequent_band(vectors, src_all, tgt_all, queries, dictionary, frequent)
    return result


def frequent_band(vectors, src_all, tgt_all, queries, dictionary, n: int) -> dict:
    """Retrieval restricted to the ``n`` most frequent words of each language (``src_all`` and
    ``tgt_all`` are in frequency order): the queries among the first and the candidates the second."""
    src_top = {w.lower() for w in src_all[:n]}
    tgt_top = {w.lower() for w in tgt_all[:n]}
    rows = [i for i, w in enumerate(queries) if w in src_top and any(a in tgt_top for a in dictionary[w])]
    band = {"words": n, "evaluated_source_words": len(rows), "target_candidates": min(n, len(tgt_all))}
    for kind in VECTOR_KINDS:
        if rows:
            band[kind] = retrieval_precision(
                vectors["src"][kind][rows],
                [queries[i] for i in rows],
                vectors["src_all"][kind][:n],
                vectors["tgt"][kind][:n],
                tgt_all[:n],
                [dictionary[queries[i]] for i in rows],
            )
    return band


def report(result: dict, model: str) -> str:
    src, tgt = result["directions"].split("-")
    lines = [
        f"lexicon induction {src}->{tgt} ({model}): {result['evaluated_source_words']} of "
        f"{result['source_words']} source words have a listed translation among {result['target_candidates']} "
        f"{tgt} words (from the {result['words_from']})",
        f"{'vectors':<11} {'NN P@1':>7} {'NN P@5':>7} {'CSLS P@1':>9} {'CSLS P@5':>9} "
        f"{'cos pairs':>10} {'cos random':>11}",
    ]

    def precisions(kind, r):
        return f"{kind:<11} {r['nn_p@1']:>7.2f} {r['nn_p@5']:>7.2f} {r['csls_p@1']:>9.2f} {r['csls_p@5']:>9.2f}"

    for kind in VECTOR_KINDS:
        r = result[kind]
        lines.append(f"{precisions(kind, r)} {r['cos_pairs']:>10.4f} {r['cos_random']:>11.4f}")
    band = result.get("frequent")
    if band:
        lines.append(
            f"among the {band['words']} most frequent words of each language: {band['evaluated_source_words']} "
            f"source words with a listed translation among {band['target_candidates']} {tgt} words"
        )
        lines += [precisions(kind, band[kind]) for kind in VECTOR_KINDS if kind in band]
    return "\n".join(lines)


def load_model(model: str, checkpoint_file: str, data: str, random_init: bool = False):
    """The LM hub of MODEL; ``data``: the data-bin (default: the one a training checkpoint names)."""
    from preprocess.layout import MODEL_FILE
    from xlm_fairseq.inference.hub import XLMHubInterface
    from xlm_fairseq.models.xlm import XLMModel

    hub = XLMModel.from_pretrained(model, checkpoint_file or MODEL_FILE, data or ".")
    if not isinstance(hub, XLMHubInterface):
        raise UserError(f"{model}: not a pretrained LM; the probe reads an LM (cross_lingual_lm) or a converted model")
    if random_init:
        torch.manual_seed(1)
        fresh = hub.task.build_model(hub.cfg.model)
        hub.model.load_state_dict(fresh.state_dict())
        hub.model.eval()
    return hub


def default_data(model: str, checkpoint_file: str) -> str:
    """The data-bin a training checkpoint was trained on, if it is still there; else ''."""
    from preprocess.layout import MODEL_FILE
    from xlm_fairseq.assets import PretrainedCheckpoint

    path = os.path.join(model, checkpoint_file or MODEL_FILE) if os.path.isdir(model) else model
    if not os.path.isfile(path):
        return ""
    data = PretrainedCheckpoint(path).data_bin
    return data if data and os.path.isfile(os.path.join(data, "dict.txt")) else ""


def main(argv=None) -> int:
    """``induce`` (a lexicon from text) or ``probe`` (an LM's alignment; the default, as before subcommands)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["induce"]:
        from preprocess import lexicon

        return lexicon.main(argv[1:])
    if argv[:1] == ["probe"]:
        argv = argv[1:]
    p = ArgumentParser(
        name="lexicon",
        prog="xlm-fairseq-lexicon",
        description=__doc__.split("\n\n")[0] + " (probe, the default subcommand)",
        epilog="xlm-fairseq-lexicon induce --help: a lexicon from two monolingual texts alone",
        examples=["xlm-fairseq-lexicon models/ende --dict de-en.dev.txt --json probe.json"],
    )
    p.add_argument("model", help="a pretrained LM: training checkpoint, converter or export directory")
    p.add_argument("--dict", required=True, help="MUSE dictionary: 'source target' a line")
    p.add_argument("--data", help="data-bin (dictionary, text pipeline, training text; default: the model's own)")
    p.add_argument("--checkpoint-file", default=None, help="the file in a model directory (default: model.pt)")
    p.add_argument("--src", default=None, help="the dictionary's source language (default: from its name, XX-YY)")
    p.add_argument("--tgt", default=None, help="the dictionary's target language (default: from its name)")
    p.add_argument("--max-words", type=int, default=20000, help="candidate words per language (default 20000)")
    p.add_argument(
        "--frequent",
        type=int,
        default=FREQUENT_WORDS,
        help=f"also score among this many most frequent words of each language (default {FREQUENT_WORDS}; 0: not)",
    )
    p.add_argument("--random-init", action="store_true", help="score the same architecture with fresh weights")
    p.add_argument("--json", help="write the result to this JSON file")

    def run(argv):
        args = p.parse_args(argv)
        for name in ("fairseq", "xlm_fairseq"):  # their INFO lines would bury the table
            logging.getLogger(name).setLevel(logging.WARNING)
        if args.frequent < 0:
            raise UserError(f"--frequent: expected a number of words >= 0, got {args.frequent}")
        dictionary = read_dictionary(args.dict)
        src, tgt = args.src, args.tgt
        if src is None or tgt is None:
            stem = os.path.basename(args.dict).split(".")[0]
            if stem.count("-") != 1:
                raise UserError(f"{args.dict}: give --src and --tgt (its name does not read SRC-TGT...)")
            src, tgt = src or stem.split("-")[0], tgt or stem.split("-")[1]
        data = args.data or default_data(args.model, args.checkpoint_file)
        hub = load_model(args.model, args.checkpoint_file, data, args.random_init)
        result = evaluate(hub, dictionary, src, tgt, data, args.max_words, args.frequent)
        result["model"] = args.model + (" (random init)" if args.random_init else "")
        print(report(result, result["model"]))
        if args.json:
            with atomic_write(args.json) as f:
                json.dump(result, f, indent=1)
        return 0

    return run_command("lexicon", run, argv)


if __name__ == "__main__":
    sys.exit(main())
