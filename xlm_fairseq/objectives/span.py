"""MASS-style span masking (Song et al., 2019) as a pretraining objective of ``cross_lingual_lm``:
``--span-steps en,de`` predicts, in each sentence of a language, one contiguous run of ``--span-ratio``
(MASS: 0.5) of its words, replaced as MLM replaces them. The whole objective is this class, its options
and its dataset (``data/streams.py``'s ``SpanMaskedDataset``); the loss is the task's (the predicted
positions only)."""

from dataclasses import dataclass, field

from xlm_fairseq.data import SpanMaskedDataset
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.objectives.base import Built, Objective, register_objective


@dataclass
class SpanOptions:
    span_steps: str = field(
        default="",
        metadata={"help": "MASS's span masking on these languages: one contiguous span of each sentence predicted"},
    )
    span_ratio: float = field(default=0.5, metadata={"help": "--span-steps: the fraction of a sentence's words masked"})


@register_objective
class SpanMasking(Objective):
    family, option, Options, loop_order, task_name = "span", "span_steps", SpanOptions, 40, "cross_lingual_lm"

    def check(self):
        if not 0 < self.options.span_ratio <= 1:
            raise XLMUserError(f"--span-ratio must be in (0, 1], got {self.options.span_ratio}")

    def build(self, split, epoch=1):
        context = self.context
        sentences, path = self.monolingual(split, epoch)  # one sentence an item, not a stream
        d = context.dictionary
        dataset = SpanMaskedDataset(
            sentences,
            d.pad(),
            d.eos(),
            context.lang2id[self.source],
            context.mask,
            self.options.span_ratio,
            context.seed,
            evaluation=split != "train",
        )
        # XLM's length filter (sizes count the </s>)
        return Built(dataset, path, len(sentences), [dataset], (context.max_sentence_len + 1,))
