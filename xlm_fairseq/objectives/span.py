"""MASS-style span masking (Song et al., 2019) as a pretraining objective of ``cross_lingual_lm``:
``--span-steps en,de`` predicts, in each sentence of a language, one contiguous run of ``--span-ratio``
(MASS: 0.5) of its words, replaced as MLM replaces them. The whole objective is this class and its
dataset (``data/streams.py``'s ``SpanMaskedDataset``); the loss is the task's (the predicted positions only)."""

from xlm_fairseq.data import SpanMaskedDataset
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.objectives.base import Built, Objective, register_objective


@register_objective
class SpanMasking(Objective):
    family, option, loop_order = "span", "span_steps", 40

    def check(self):
        if not 0 < self.task.cfg.span_ratio <= 1:
            raise XLMUserError(f"--span-ratio must be in (0, 1], got {self.task.cfg.span_ratio}")

    def build(self, split, epoch=1):
        task = self.task
        sentences, path = self.monolingual(split, epoch)  # one sentence an item, not a stream
        d = task.dictionary
        dataset = SpanMaskedDataset(
            sentences,
            d.pad(),
            d.eos(),
            task.lang2id[self.source],
            task.mask_cfg,
            task.cfg.span_ratio,
            task.cfg.seed,
            evaluation=split != "train",
        )
        # XLM's length filter (sizes count the </s>)
        return Built(dataset, path, len(sentences), [dataset], (task.cfg.max_sentence_len + 1,))
