"""The pretraining objectives of ``--task cross_lingual_lm`` (XLM's names): CLM and MLM on a language's
stream of blocks (``--clm-steps en``, ``--mlm-steps en``), TLM on its parallel pairs (``--mlm-steps en-de``)."""

import logging

from xlm_fairseq.data import LMObjectiveDataset, TLMPairDataset, stream_dataset
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.objectives.base import Built, MissingData, Objective, register_objective

logger = logging.getLogger(__name__)


class StreamObjective(Objective):
    """An LM objective over the stream of one language's sentences, cut into ``--tokens-per-sample`` blocks."""

    predicts = "mlm"  # LMObjectiveDataset's kind: masked positions, or every next token ("clm")

    def build(self, split, epoch=1):
        task = self.task
        mono, path = self.monolingual(split, epoch)
        pad, eos = task.dictionary.pad(), task.dictionary.eos()
        stream = stream_dataset(mono, task.cfg.tokens_per_sample, pad, eos)
        dataset = LMObjectiveDataset(
            stream,
            self.predicts,
            pad,
            task.lang2id[self.source],
            task.mask_cfg,
            task.cfg.seed,
            evaluation=split != "train",
        )
        return Built(dataset, path, len(mono), drawing=[dataset])  # its masks follow the zip's round


@register_objective
class CausalLM(StreamObjective):
    family, option, predicts, loop_order = "clm", "clm_steps", "clm", 10


@register_objective
class MaskedLM(StreamObjective):
    family, option, loop_order, full_mask_validation = "mlm", "mlm_steps", 20, True


@register_objective
class TranslationLM(Objective):
    """XLM's TLM: a pair concatenated, positions restarting for the second sentence, a language id per
    half; pairs with a side over ``--max-sentence-len`` subwords dropped."""

    family, option, n_langs, loop_order, full_mask_validation = "tlm", "mlm_steps", 2, 30, True

    def build(self, split, epoch=1):
        task = self.task
        (a, b), limit = self.langs, task.cfg.max_sentence_len
        first, second, path = task.pair_datasets(split, a, b, epoch)
        if first is None or second is None:
            raise MissingData(path, f"missing parallel data {path}.bin")
        pairs = TLMPairDataset(first, second, task.lang2id[a], task.lang2id[b], task.dictionary.eos(), limit)
        if pairs.n_dropped:
            logger.info(
                f"{self.key} {split}: {pairs.n_dropped} pairs with a side over --max-sentence-len {limit} dropped"
            )
        if not len(pairs):
            raise XLMUserError(f"{self.key} {split}: no pair within --max-sentence-len {limit} in {path}")
        pad = task.dictionary.pad()
        dataset = LMObjectiveDataset(pairs, "mlm", pad, None, task.mask_cfg, task.cfg.seed, evaluation=split != "train")
        return Built(dataset, path, len(pairs), drawing=[dataset])
