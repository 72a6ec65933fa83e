"""The pretraining objectives of ``--task cross_lingual_lm`` (XLM's names): MLM and CLM on a language's
stream of blocks (``--mlm-steps en``, ``--clm-steps en``), TLM on its parallel pairs (``--mlm-steps en-de``).
MLM is registered first: ``--mlm-steps``' objectives come before ``--clm-steps``' in the task's data."""

import logging
from dataclasses import dataclass, field

from xlm_fairseq.data import LMObjectiveDataset, TLMPairDataset, stream_dataset
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.objectives.base import Built, MissingData, Objective, register_objective

logger = logging.getLogger(__name__)


@dataclass
class StreamOptions:
    tokens_per_sample: int = field(default=256, metadata={"help": "tokens per stream block (XLM --bptt)"})


@dataclass
class MLMOptions(StreamOptions):
    mlm_steps: str = field(
        default="", metadata={"help": "MLM on languages (en,de) and TLM on pairs (en-de), comma-separated"}
    )


@dataclass
class CLMOptions(StreamOptions):
    clm_steps: str = field(default="", metadata={"help": "causal LM on these languages, comma-separated"})


class StreamObjective(Objective):
    """An LM objective over the stream of one language's sentences, cut into ``--tokens-per-sample`` blocks."""

    task_name = "cross_lingual_lm"
    predicts = "mlm"  # LMObjectiveDataset's kind: masked positions, or every next token ("clm")

    def mask(self):
        """How its predicted positions are chosen and replaced (the task's masking; a subclass may change it)."""
        return self.context.mask

    def build(self, split, epoch=1):
        context = self.context
        mono, path = self.monolingual(split, epoch)
        pad, eos = context.dictionary.pad(), context.dictionary.eos()
        stream = stream_dataset(mono, self.options.tokens_per_sample, pad, eos)
        dataset = LMObjectiveDataset(
            stream,
            self.predicts,
            pad,
            context.lang2id[self.source],
            self.mask(),
            context.seed,
            evaluation=split != "train",
        )
        return Built(dataset, path, len(mono), drawing=[dataset])  # its masks follow the zip's round


@register_objective
class MaskedLM(StreamObjective):
    family, option, Options, loop_order, full_mask_validation = "mlm", "mlm_steps", MLMOptions, 20, True


@register_objective
class TranslationLM(Objective):
    """XLM's TLM: a pair concatenated, positions restarting for the second sentence, a language id per
    half; pairs with a side over ``--max-sentence-len`` subwords dropped. Listed by MLM's option."""

    family, option, Options, n_langs, loop_order = "tlm", "mlm_steps", MLMOptions, 2, 30
    task_name, full_mask_validation = "cross_lingual_lm", True

    def build(self, split, epoch=1):
        context = self.context
        (a, b), limit = self.langs, context.max_sentence_len
        first, second, path = context.pair_datasets(split, a, b, epoch)
        if first is None or second is None:
            raise MissingData(path, f"missing parallel data {path}.bin")
        eos = context.dictionary.eos()
        pairs = TLMPairDataset(first, second, context.lang2id[a], context.lang2id[b], eos, limit)
        if pairs.n_dropped:
            logger.info(
                f"{self.key} {split}: {pairs.n_dropped} pairs with a side over --max-sentence-len {limit} dropped"
            )
        if not len(pairs):
            raise XLMUserError(f"{self.key} {split}: no pair within --max-sentence-len {limit} in {path}")
        pad = context.dictionary.pad()
        dataset = LMObjectiveDataset(pairs, "mlm", pad, None, context.mask, context.seed, evaluation=split != "train")
        return Built(dataset, path, len(pairs), drawing=[dataset])


@register_objective
class CausalLM(StreamObjective):
    family, option, Options, predicts, loop_order = "clm", "clm_steps", CLMOptions, "clm", 10
