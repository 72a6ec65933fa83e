"""XLM's LM batches: MLM / CLM over a language's stream of blocks, or over TLM pairs; MASS's span masking."""

import logging

import numpy as np
import torch
from fairseq.data import FairseqDataset, TokenBlockDataset, data_utils

from .masking import MaskedLMConfig, eval_pred_mask, mask_tokens, replace_predicted, seeded_generator, span_pred_mask

logger = logging.getLogger(__name__)


def stream_dataset(dataset, tokens_per_sample: int, pad: int, eos: int) -> TokenBlockDataset:
    """XLM's ``StreamDataset``: sentences (each ending in ``</s>``) concatenated into one stream and
    cut into blocks of ``tokens_per_sample`` (XLM's ``--bptt``)."""
    return TokenBlockDataset(dataset, dataset.sizes, tokens_per_sample, pad=pad, eos=eos, break_mode="none")


def collate_right(values, pad):
    return data_utils.collate_tokens(values, pad, left_pad=False)


class LMObjectiveDataset(FairseqDataset):
    """Turns token sequences into MLM or CLM batches.

    Items of ``dataset`` are either token tensors (a monolingual stream: ``lang_id`` for all tokens,
    positions 0..T-1) or dicts with ``tokens``, ``langs``, ``positions`` (TLM pairs).
    Masking is drawn per batch, as XLM does, from a generator seeded by (seed, epoch, first id) so a
    batch is the same after a resume. With ``evaluation`` the draw ignores the epoch (every
    validation sees the same positions, as XLM's evaluator) and MLM batches also carry
    ``full_mask``: XLM's evaluator's own positions (``eval_pred_mask``), all shown as the mask
    token, with their targets (XLM's validation perplexity, ``*_fullmask_ppl``).
    """

    xlm_validation = True  # in evaluation, also XLM's full-mask positions (``full_mask``)

    def __init__(
        self, dataset, objective: str, pad: int, lang_id=None, mask_cfg: MaskedLMConfig = None, seed=1, evaluation=False
    ):
        assert objective in ("mlm", "clm")
        assert objective == "clm" or mask_cfg is not None
        self.dataset = dataset
        self.objective = objective
        self.pad = pad
        self.lang_id = lang_id
        self.mask_cfg = mask_cfg
        self.seed = seed
        self.epoch = 1
        self.evaluation = evaluation
        self.round = 0  # how often the zip has come round its items (ObjectiveZipDataset's drawing)

    @property
    def sizes(self):
        return self.dataset.sizes

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, index):
        item = self.dataset[index]
        if torch.is_tensor(item):
            item = {"tokens": item, "langs": None, "positions": None}
        return dict(item, id=index, round=self.round)

    def num_tokens(self, index):
        return self.dataset.sizes[index]

    def size(self, index):
        return self.dataset.sizes[index]

    def num_tokens_vec(self, indices):
        return np.asarray(self.dataset.sizes)[indices]

    def ordered_indices(self):
        """Shuffled, then sorted by length: batches of like lengths, few pads (XLM's ``group_by_size``
        for parallel data; stream blocks all have one length, so they stay shuffled)."""
        order = np.random.permutation(len(self))
        return order[np.argsort(np.asarray(self.sizes)[order], kind="mergesort")]

    def set_epoch(self, epoch):
        self.epoch = epoch
        if hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(epoch)

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        return False

    def mask(self, tokens, generator):
        """(inputs, predicted positions, their targets) of a batch: XLM's MLM masking."""
        return mask_tokens(tokens, self.mask_cfg, generator)

    def collater(self, samples):
        if not samples:
            return {}
        tokens = collate_right([s["tokens"] for s in samples], self.pad)
        if samples[0]["langs"] is None:
            langs = torch.full_like(tokens, self.lang_id)
        else:
            langs = collate_right([s["langs"] for s in samples], 0)
        if samples[0]["positions"] is None:
            positions = None
        else:
            positions = collate_right([s["positions"] for s in samples], 0)

        extra = {}
        if self.objective == "mlm":
            if self.evaluation:  # the same masks at every validation, as XLM's evaluator
                gen = seeded_generator(self.seed, 0, samples[0]["id"])
            else:
                gen = seeded_generator(self.seed, self.epoch, samples[0]["id"], samples[0].get("round", 0))
            inputs, pred_mask, targets = self.mask(tokens, gen)
            if self.evaluation and self.xlm_validation:
                full = eval_pred_mask(tokens, self.pad, self.mask_cfg.mask_prob, gen)
                extra["full_mask"] = {
                    "src_tokens": tokens.masked_fill(full, self.mask_cfg.mask_idx),
                    "pred_mask": full,
                    "target": tokens[full],
                }
        else:  # CLM: every position whose next token is real predicts it
            nxt = tokens.roll(-1, dims=1)
            pred_mask = nxt.ne(self.pad)
            pred_mask[:, -1] = False
            inputs, targets = tokens, nxt[pred_mask]
        return {
            "id": torch.LongTensor([s["id"] for s in samples]),
            "nsentences": len(samples),
            "ntokens": int(tokens.ne(self.pad).sum()),  # input tokens, as fairseq's masked_lm (wps)
            "net_input": {
                "src_tokens": inputs,
                "src_langs": langs,
                "positions": positions,
                "causal": self.objective == "clm",
                "pred_mask": pred_mask,
            },
            "target": targets,
            **extra,
        }


class SpanMaskedDataset(LMObjectiveDataset):
    """MLM batches of whole sentences whose predicted positions are one contiguous span each (MASS's
    masking, ``span_pred_mask``), replaced as MLM replaces (mask / keep / random)."""

    xlm_validation = False

    def __init__(self, dataset, pad, eos, lang_id, mask_cfg, ratio, seed=1, evaluation=False):
        super().__init__(dataset, "mlm", pad, lang_id, mask_cfg, seed, evaluation)
        self.eos, self.ratio = eos, ratio

    def mask(self, tokens, generator):
        pred_mask = span_pred_mask(tokens, self.pad, self.eos, self.ratio, generator)
        return replace_predicted(tokens, pred_mask, self.mask_cfg, generator)
