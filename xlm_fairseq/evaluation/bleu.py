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
BLEU_SCORES = {"bleu": "", "bleu_tok": "tok_", "bleu_copy": "copy_"}  # metric -> prefix of its statistics


def batch_bleu_stats(
    key: str, hypos, targets, dictionary, pipeline, print_samples=False, sources=None
) -> Dict[str, int]:
    """BLEU statistics of fairseq-generated ``hypos`` against the ``targets`` (padded token rows) of
    objective ``key`` (its last language the target's): subwords joined by the data-bin's text
    pipeline (fastBPE's ``@@`` without one), then Moses-detokenised for sacreBLEU. ``sources`` (padded
    token rows, a round trip's translations into the middle language): also how much of each target
    they copy (tokenised BLEU of the source against the target, statistics ``copy_*``)."""
    tgt = ObjectiveKey.parse(key).target

    def tokenized(tokens, unk):
        pieces = dictionary.string(utils.strip_pad(tokens, dictionary.pad()).int().cpu(), unk_string=unk).split()
        return pipeline.join(pieces) if pipeline is not None else " ".join(pieces).replace("@@ ", "")

    hyps_tok = [tokenized(h[0]["tokens"], "UNKNOWNTOKENINHYP") for h in hypos]
    refs_tok = [tokenized(t, "UNKNOWNTOKENINREF") for t in targets]
    hyps, refs = [detokenize(h, tgt) for h in hyps_tok], [detokenize(r, tgt) for r in refs_tok]
    if print_samples:
        logger.info(f"{key} hypothesis: {hyps[0]}")
        logger.info(f"{key} reference:  {refs[0]}")
    stats = bleu_stats(key, hyps, refs, hyps_tok, refs_tok)
    if sources is not None:
        middle = [tokenized(s, "UNKNOWNTOKENINSRC") for s in sources]
        stats.update(_sufficient(key, "copy_", sacrebleu_tok(middle, refs_tok)))
    return stats


def sacrebleu_tok(hyps_tok: List[str], refs_tok: List[str]):
    """BLEU on tokenised text as it is (XLM's multi-bleu.perl)."""
    import sacrebleu

    return sacrebleu.corpus_bleu(hyps_tok, [refs_tok], tokenize="none")


def _sufficient(key: str, prefix: str, bleu) -> Dict[str, int]:
    stats = {f"{key}:{prefix}bleu_sys_len": bleu.sys_len, f"{key}:{prefix}bleu_ref_len": bleu.ref_len}
    for i in range(4):
        stats[f"{key}:{prefix}bleu_counts_{i}"] = bleu.counts[i]
        stats[f"{key}:{prefix}bleu_totals_{i}"] = bleu.totals[i]
    return stats


def bleu_stats(key: str, hyps: List[str], refs: List[str], hyps_tok: List[str], refs_tok: List[str]) -> Dict[str, int]:
    """The sufficient statistics of both BLEUs for one batch of objective ``key``."""
    tgt = ObjectiveKey.parse(key).target
    if bleu_tokenize(tgt) == "none":  # a script without spaces that sacreBLEU cannot cut: the segmenter's words
        detokenized = sacrebleu_tok(hyps_tok, refs_tok)
    else:
        detokenized = corpus_bleu(hyps, refs, tgt)
    return {**_sufficient(key, "", detokenized), **_sufficient(key, "tok_", sacrebleu_tok(hyps_tok, refs_tok))}


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
            smooth_method="exp" if prefix == "" else "none",
        ).score,
        2,
    )


def reduce_bleu(logging_outputs) -> None:
    """Sum each direction's statistics and derive its BLEUs, and their means: over the translation
    directions (``bleu_mean``, ``bleu_tok_mean``) and over the round trips (:data:`ROUNDTRIP_METRICS`)."""
    keys = sorted({k.split(":")[0] for log in logging_outputs for k in log if k.endswith(":bleu_sys_len")})
    found = {}  # direction -> the prefixes of its statistics
    for key in keys:
        direction = ObjectiveKey.parse(key).direction

        def total(name, key=key):
            return sum(log.get(f"{key}:{name}", 0) for log in logging_outputs)

        found[direction] = [
            p for p in BLEU_SCORES.values() if any(f"{key}:{p}bleu_sys_len" in log for log in logging_outputs)
        ]
        for metric, prefix in BLEU_SCORES.items():
            if prefix not in found[direction]:
                continue
            for name in BLEU_STATS:
                metrics.log_scalar(f"_{direction}_{prefix}{name}", total(prefix + name), weight=1)
            metrics.log_derived(
                f"{metric}_{direction}", lambda m, d=direction, p=prefix: corpus_bleu_from_meters(m, d, p)
            )
    translations = [d for d in found if d.count("-") == 1]
    trips = [d for d in found if d.count("-") == 2]

    def mean(meters, directions, prefix):
        return sum(corpus_bleu_from_meters(meters, d, prefix) for d in directions) / len(directions)

    if translations:
        for metric, prefix in (("bleu", ""), ("bleu_tok", "tok_")):
            metrics.log_derived(f"{metric}_mean", lambda m, p=prefix: round(mean(m, translations, p), 2))
    if trips:
        for name, derive in ROUNDTRIP_METRICS.items():
            metrics.log_derived(name, lambda m, f=derive: round(f(lambda p: mean(m, trips, p)), 2))


# means over the round trips a -> b -> a of monolingual valid text (Lample et al. 2018's model selection
# without parallel data), from the tokenised BLEU of a's sentences back (tok_) and of the translations
# into b against their source (copy_: a model that copies its input comes back unchanged)
ROUNDTRIP_METRICS = {
    "roundtrip_bleu": lambda mean: mean("tok_"),
    "roundtrip_copy": lambda mean: mean("copy_"),
    "roundtrip_score": lambda mean: mean("tok_") - mean("copy_"),
}
