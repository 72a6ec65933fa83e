"""XLM's MLM masking: which tokens are predicted, and what the model sees in their place.

XLM (``Trainer.mask_out``): each non-pad token is predicted with probability ``mask_prob`` (15 %);
with ``sample_alpha > 0`` exactly ceil(mask_prob * n) positions are drawn without replacement with
weight count(token)^-alpha (rare tokens more often; tokens never seen in training never). A predicted
token is replaced by the mask token / kept / replaced by a random vocabulary word with probabilities
``mask_keep_rand`` (0.8, 0.1, 0.1).
"""

import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor


@dataclass
class MaskedLMConfig:
    mask_idx: int
    pad_idx: int
    vocab_size: int
    mask_prob: float = 0.15
    mask_keep_rand: Tuple[float, float, float] = (0.8, 0.1, 0.1)
    mask_scores: Optional[Tensor] = None  # count^-alpha per vocabulary entry; None: uniform


def seeded_generator(seed: int, epoch: int, index: int) -> torch.Generator:
    """A generator fixed by (seed, epoch, index): random draws of a sample or batch repeat exactly
    after a resume, whatever the data-loader workers did before."""
    return torch.Generator().manual_seed(hash((seed, epoch, int(index))) % (2 ** 31))


def mask_scores_from_counts(counts: Sequence[int], pad_idx: int, alpha: float) -> Optional[Tensor]:
    """XLM's ``mask_scores``: max(count, 1)^-alpha, zero for padding and never-seen tokens."""
    if alpha == 0:
        return None
    counts = torch.tensor(list(counts), dtype=torch.float64)
    scores = counts.clamp(min=1).pow(-alpha)
    scores[counts == 0] = 0
    scores[pad_idx] = 0
    return scores


def mask_tokens(tokens: Tensor, cfg: MaskedLMConfig, generator: Optional[torch.Generator] = None):
    """tokens: B x T (right-padded). Returns (input with masks applied, pred_mask B x T bool, targets
    of the predicted positions in row-major order)."""
    candidates = tokens.ne(cfg.pad_idx)
    if cfg.mask_scores is None:
        pred_mask = torch.rand(tokens.shape, generator=generator) < cfg.mask_prob
        pred_mask &= candidates
    else:
        weights = cfg.mask_scores.to(torch.float64)[tokens.flatten()]
        n_pred = min(math.ceil(cfg.mask_prob * int(candidates.sum())), int((weights > 0).sum()))
        pred_mask = torch.zeros(tokens.numel(), dtype=torch.bool)
        if n_pred > 0:
            pred_mask[torch.multinomial(weights, n_pred, replacement=False, generator=generator)] = True
        pred_mask = pred_mask.view_as(tokens)
    if not pred_mask.any():  # a batch must predict something; take the first real token
        pred_mask.view(-1)[candidates.view(-1).nonzero()[0]] = True

    targets = tokens[pred_mask]
    choice = torch.multinomial(
        torch.tensor(cfg.mask_keep_rand, dtype=torch.float), len(targets), replacement=True, generator=generator
    )
    random_words = torch.randint(cfg.vocab_size, targets.shape, generator=generator)
    replaced = torch.where(choice == 0, torch.full_like(targets, cfg.mask_idx), targets)
    replaced = torch.where(choice == 2, random_words, replaced)
    inputs = tokens.clone()
    inputs[pred_mask] = replaced
    return inputs, pred_mask, targets
