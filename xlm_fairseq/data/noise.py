"""XLM's denoising noise for auto-encoding (``TrainerMT.word_shuffle/word_dropout/word_blank``).

Applied to one sentence of subword ids ``w1 .. wn </s>`` (no leading ``</s>``); the final ``</s>``
always stays in place.
"""

from typing import Optional

import torch
from torch import Tensor


def _body(tokens: Tensor, eos: int):
    assert tokens[-1] == eos, "sentence must end with </s>"
    return tokens[:-1], tokens[-1:]


def word_shuffle(tokens: Tensor, eos: int, k: float, generator: Optional[torch.Generator] = None) -> Tensor:
    """Local shuffle: each token moves by less than ``k`` positions (XLM: sort by i + U(0, k))."""
    if k == 0:
        return tokens
    body, end = _body(tokens, eos)
    noise = torch.rand(len(body), generator=generator) * k
    order = (torch.arange(len(body), dtype=torch.float) + noise).argsort()
    return torch.cat([body[order], end])


def word_dropout(tokens: Tensor, eos: int, p: float, generator: Optional[torch.Generator] = None) -> Tensor:
    """Drop each token with probability ``p``; at least one token survives."""
    if p == 0:
        return tokens
    body, end = _body(tokens, eos)
    keep = torch.rand(len(body), generator=generator) >= p
    if len(body) > 0 and not keep.any():
        keep[torch.randint(len(body), (1,), generator=generator)] = True
    return torch.cat([body[keep], end])


def word_blank(tokens: Tensor, eos: int, p: float, blank: int, generator: Optional[torch.Generator] = None) -> Tensor:
    """Replace each token by ``blank`` (the mask token) with probability ``p``."""
    if p == 0:
        return tokens
    body, end = _body(tokens, eos)
    hit = torch.rand(len(body), generator=generator) < p
    return torch.cat([torch.where(hit, torch.full_like(body, blank), body), end])


def add_noise(tokens, eos, blank, shuffle=3.0, dropout=0.1, blank_prob=0.1, generator=None) -> Tensor:
    """XLM's order: shuffle, then dropout, then blank."""
    tokens = word_shuffle(tokens, eos, shuffle, generator)
    tokens = word_dropout(tokens, eos, dropout, generator)
    return word_blank(tokens, eos, blank_prob, blank, generator)
