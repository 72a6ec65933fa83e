"""XLM's MLM masking: which tokens are predicted, and what the model sees in their place.

Training (XLM's ``Trainer.mask_out``): at ``sample_alpha`` 0 every non-pad token is predicted with
probability ``mask_prob`` (15 %) — ``</s>`` (sentence boundaries in a stream, TLM's separators) and
``<unk>`` like words; with ``sample_alpha > 0`` exactly ceil(mask_prob * n) positions are drawn
without replacement with weight count(token)^-alpha, special symbols weighing 0 (XLM gives them
count 0; fairseq's ``Dictionary`` counts its four as 1, which would make them the likeliest
targets). A predicted token is replaced by the mask token / kept / replaced by a random token with
probabilities ``mask_keep_rand`` (0.8, 0.1, 0.1); the random token is any vocabulary id but
``<pad>`` (XLM draws ``<pad>`` too and attends to it; here ``<pad>`` is padding, hidden from
attention). The first position of a block is never predicted (XLM's ``pred_mask[0] = 0``).

Evaluation (XLM's ``Evaluator.mask_out``, its ``valid_{lang}_mlm_ppl``): ``eval_pred_mask``. MASS's
contiguous spans: ``span_pred_mask``.
"""

import math
import re
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
from torch import Tensor

SPECIAL_SYMBOL_RE = re.compile(r"<special\d+>|madeupword\d+")


@dataclass
class MaskedLMConfig:
    mask_idx: int
    pad_idx: int
    is_word: Tensor  # bool per vocabulary id: a real word (not a special symbol)
    mask_prob: float = 0.15
    mask_keep_rand: Tuple[float, float, float] = (0.8, 0.1, 0.1)
    mask_scores: Optional[Tensor] = None  # count^-alpha per vocabulary id (0 for non-words); None: uniform

    def __post_init__(self):
        self.predictable = torch.ones_like(self.is_word)  # XLM: every id but padding
        self.predictable[self.pad_idx] = False
        self.replacement_ids = self.predictable.nonzero().flatten()

    @classmethod
    def from_dictionary(cls, dictionary, mask_idx, mask_prob=0.15, mask_keep_rand=(0.8, 0.1, 0.1), sample_alpha=0.0):
        is_word = word_flags(dictionary)
        return cls(
            mask_idx=mask_idx,
            pad_idx=dictionary.pad(),
            is_word=is_word,
            mask_prob=mask_prob,
            mask_keep_rand=tuple(mask_keep_rand),
            mask_scores=mask_scores_from_counts(dictionary.count, is_word, sample_alpha),
        )


def word_flags(dictionary) -> Tensor:
    """True for real words of a fairseq ``Dictionary``; False for its special symbols."""
    flags = torch.tensor([not SPECIAL_SYMBOL_RE.fullmatch(sym) for sym in dictionary.symbols], dtype=torch.bool)
    flags[: dictionary.nspecial] = False
    return flags


def seeded_generator(seed: int, epoch: int, index: int, round_: int = 0) -> torch.Generator:
    """A generator fixed by (seed, epoch, index, round): random draws of a sample or batch repeat
    exactly after a resume, whatever the data-loader workers did before. ``round_`` counts how often
    a smaller objective dataset has come round within the epoch (see ``ObjectiveZipDataset``)."""
    return torch.Generator().manual_seed(hash((seed, epoch, int(index), int(round_))) % (2**31))


def mask_scores_from_counts(counts, is_word: Tensor, alpha: float) -> Optional[Tensor]:
    """XLM's ``mask_scores``: max(count, 1)^-alpha, zero for special symbols and never-seen tokens."""
    if alpha == 0:
        return None
    counts = torch.tensor(list(counts), dtype=torch.float64)
    scores = counts.clamp(min=1).pow(-alpha)
    scores[(counts == 0) | ~is_word] = 0
    return scores


def mask_tokens(tokens: Tensor, cfg: MaskedLMConfig, generator: Optional[torch.Generator] = None):
    """tokens: B x T (right-padded). Returns (input with masks applied, pred_mask B x T bool, targets
    of the predicted positions in row-major order)."""
    candidates = cfg.predictable[tokens]
    candidates[:, 0] = False
    if cfg.mask_scores is None:
        pred_mask = torch.rand(tokens.shape, generator=generator) <= cfg.mask_prob
        pred_mask &= candidates
    else:
        weights = cfg.mask_scores.to(torch.float64)[tokens.flatten()] * candidates.flatten()
        n_pred = min(math.ceil(cfg.mask_prob * int(tokens.ne(cfg.pad_idx).sum())), int((weights > 0).sum()))
        pred_mask = torch.zeros(tokens.numel(), dtype=torch.bool)
        if n_pred > 0:
            pred_mask[torch.multinomial(weights, n_pred, replacement=False, generator=generator)] = True
        pred_mask = pred_mask.view_as(tokens)
    if not pred_mask.any() and candidates.any():  # a batch must predict something; take the first candidate
        pred_mask.view(-1)[candidates.view(-1).nonzero()[0]] = True
    return replace_predicted(tokens, pred_mask, cfg, generator)


def replace_predicted(tokens: Tensor, pred_mask: Tensor, cfg: MaskedLMConfig, generator=None):
    """What the model sees at the predicted positions: the mask token, the token itself or a random
    one (``cfg.mask_keep_rand``). Returns (inputs, pred_mask, targets in row-major order)."""
    targets = tokens[pred_mask]
    choice = torch.multinomial(
        torch.tensor(cfg.mask_keep_rand, dtype=torch.float), len(targets), replacement=True, generator=generator
    )
    random_ids = cfg.replacement_ids[torch.randint(len(cfg.replacement_ids), targets.shape, generator=generator)]
    replaced = torch.where(choice == 0, torch.full_like(targets, cfg.mask_idx), targets)
    replaced = torch.where(choice == 2, random_ids, replaced)
    inputs = tokens.clone()
    inputs[pred_mask] = replaced
    return inputs, pred_mask, targets


def span_pred_mask(tokens: Tensor, pad_idx: int, eos_idx: int, ratio: float, generator=None) -> Tensor:
    """MASS's span masking: in each right-padded row ``w1 .. wn </s>`` one run of max(1, round(ratio * n))
    consecutive words, starting anywhere it fits, is predicted (the ``</s>`` never)."""
    words = (tokens.ne(pad_idx) & tokens.ne(eos_idx)).sum(1)
    span = (words.double() * ratio).round().long().clamp(min=1).minimum(words)
    start = (torch.rand(len(tokens), generator=generator, dtype=torch.float64) * (words - span + 1)).long()
    position = torch.arange(tokens.size(1))[None, :]
    return (position >= start[:, None]) & (position < (start + span)[:, None])


def eval_pred_mask(tokens: Tensor, pad_idx: int, mask_prob: float, generator: torch.Generator) -> Tensor:
    """XLM's evaluator (``Evaluator.mask_out``): positions with rand <= mask_prob, never the first or
    the last token of a row, at least one per row (drawn among the others), whatever the token —
    special symbols included. Every chosen position is then shown as the mask token."""
    rows, cols = tokens.shape
    lengths = tokens.ne(pad_idx).sum(1)
    position = torch.arange(cols)[None, :]
    pred_mask = torch.rand(tokens.shape, generator=generator) <= mask_prob
    pred_mask &= (position >= 1) & (position < (lengths - 1)[:, None])
    empty = ~pred_mask.any(1) & (lengths >= 3)
    for row in empty.nonzero().flatten().tolist():
        pick = 1 + int(torch.randint(int(lengths[row]) - 2, (1,), generator=generator))
        pred_mask[row, pick] = True
    return pred_mask
