"""Validation BLEU of ``translation_lm``, summed over batches and workers and derived at the end
(fairseq's way): ``bleu_{pair}`` (sacrebleu on detokenised text, with the target language's tokeniser:
``zh``, ``ja-mecab``, 13a otherwise, :mod:`preprocess.segment`) and ``bleu_tok_{pair}`` (unsmoothed, on
Moses-tokenised or segmented text: what XLM's multi-bleu.perl reports, the paper's scale), and their means over
the validated directions, ``bleu_mean`` and ``bleu_tok_mean``: one figure for
``--best-checkpoint-metric`` when a model translates several ways (XLM picks one direction's)."""

import logging
from typing import Dict, List

from fairseq import metrics, utils

from preprocess.segment import bleu_tokenize, corpus_bleu
from preprocess.text import detokenize
from xlm_fairseq.objectives.keys import ObjectiveKey

logger = logging.getLogger(__name__)

BLEU_STATS = ["bleu_sys_len", "bleu_ref_len"] + [f"bleu_{c}_{i}" for c in ("counts", "totals") for i in range(4)]
BLEU_SCORES = {"bleu": "", "bleu_tok": "tok_"}  # metric -> prefix of its statistics


def batch_bleu_stats(key: str, hypos, targets, dictionary, pipeline, print_samples=False) -> Dict[str, int]:
    """BLEU statistics of fairseq-generated ``hypos`` against the ``targets`` (padded token rows) of
    objective ``key`` (its last language the target's): subwords joined by the data-bin's text
    pipeline (fastBPE's ``@@`` without one), then Moses-detokenised for sacreBLEU."""
    tgt = ObjectiveKey.parse(key).target

    def tokenized(tokens, unk):
        pieces = dictionary.string(tokens.int().cpu(), unk_string=unk).split()
        return pipeline.join(pieces) if pipeline is not None else " ".join(pieces).replace("@@ ", "")

    hyps_tok = [tokenized(h[0]["tokens"], "UNKNOWNTOKENINHYP") for h in hypos]
    refs_tok = [tokenized(utils.strip_pad(t, dictionary.pad()), "UNKNOWNTOKENINREF") for t in targets]
    hyps, refs = [detokenize(h, tgt) for h in hyps_tok], [detokenize(r, tgt) for r in refs_tok]
    if print_samples:
        logger.info(f"{key} hypothesis: {hyps[0]}")
        logger.info(f"{key} reference:  {refs[0]}")
    return bleu_stats(key, hyps, refs, hyps_tok, refs_tok)


def bleu_stats(key: str, hyps: List[str], refs: List[str], hyps_tok: List[str], refs_tok: List[str]) -> Dict[str, int]:
    """The sufficient statistics of both BLEUs for one batch of objective ``key``."""
    import sacrebleu

    stats = {}
    tgt = ObjectiveKey.parse(key).target
    if bleu_tokenize(tgt) == "none":  # a script without spaces that sacreBLEU cannot cut: the segmenter's words
        detokenized = sacrebleu.corpus_bleu(hyps_tok, [refs_tok], tokenize="none")
    else:
        detokenized = corpus_bleu(hyps, refs, tgt)
    for prefix, bleu in (
        ("", detokenized),
        ("tok_", sacrebleu.corpus_bleu(hyps_tok, [refs_tok], tokenize="none")),
    ):
        stats[f"{key}:{prefix}bleu_sys_len"] = bleu.sys_len
        stats[f"{key}:{prefix}bleu_ref_len"] = bleu.ref_len
        for i in range(4):
            stats[f"{key}:{prefix}bleu_counts_{i}"] = bleu.counts[i]
            stats[f"{key}:{prefix}bleu_totals_{i}"] = bleu.totals[i]
    return stats


def corpus_bleu_from_meters(meters, direction: str, prefix: str = "") -> float:
    from sacrebleu.metrics import BLEU

    def total(name):
        return meters[f"_{direction}_{prefix}{name}"].sum

    totals = [total(f"bleu_totals_{i}") for i in range(4)]
    if max(totals) == 0:
        return 0.0
    return round(
        BLEU.compute_bleu(
            correct=[total(f"bleu_counts_{i}") for i in range(4)],
            total=totals,
            sys_len=int(total("bleu_sys_len")),
            ref_len=int(total("bleu_ref_len")),
            smooth_method="none" if prefix == "tok_" else "exp",
        ).score,
        2,
    )


def reduce_bleu(logging_outputs) -> None:
    """Sum each direction's statistics and derive its two BLEUs, and their means over the directions."""
    keys = sorted({k.split(":")[0] for log in logging_outputs for k in log if k.endswith(":bleu_sys_len")})
    directions = tuple(ObjectiveKey.parse(key).direction for key in keys)
    for key, direction in zip(keys, directions):

        def total(name, key=key):
            return sum(log.get(f"{key}:{name}", 0) for log in logging_outputs)

        for metric, prefix in BLEU_SCORES.items():
            for name in BLEU_STATS:
                metrics.log_scalar(f"_{direction}_{prefix}{name}", total(prefix + name), weight=1)
            metrics.log_derived(
                f"{metric}_{direction}", lambda m, d=direction, p=prefix: corpus_bleu_from_meters(m, d, p)
            )
    if not directions:
        return

    def mean_bleu(meters, prefix):
        return round(sum(corpus_bleu_from_meters(meters, d, prefix) for d in directions) / len(directions), 2)

    for metric, prefix in BLEU_SCORES.items():
        metrics.log_derived(f"{metric}_mean", lambda m, p=prefix: mean_bleu(m, p))
