"""What every reader makes and every writer takes: :class:`LM`, a cross-lingual LM in our terms (our
parameter names, fairseq's vocabulary order), and the vocabulary conventions the formats differ by."""

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch

from preprocess.layout import SPECIAL_SYMBOLS, XLM_SYMBOLS
from xlm_fairseq.errors import XLMUserError


@dataclass
class LM:
    """A source model, read whole: weights, shape, languages, vocabulary and text pipeline."""

    origin: str  # what it was read from, in words ("original XLM .pth", ...), for README.md
    path: str  # the file or directory read; errors name it
    # our parameter names (``LM_PREFIX`` + XLM's), fairseq vocabulary order; the output layer's
    # weight is tied to ``embeddings.weight`` and left out
    state: Dict[str, torch.Tensor]
    words: List[str]  # fairseq order: <s> <pad> </s> <unk>, then fastBPE (or sentencepiece) spelling
    counts: List[int]
    langs: List[str]  # language-id order
    dim: int
    n_layers: int
    n_heads: int
    dropout: float
    attention_dropout: float
    max_positions: int
    sinusoidal: bool
    use_lang_emb: bool
    # the text pipeline: subwords "xlm_bpe" (with ``codes`` when known) or "sentencepiece" (the model
    # file at ``spm_model``), or None when nothing says
    subwords: Optional[str]
    lowercase: bool
    ro_remove_diacritics: bool
    codes: Optional[List[Tuple[str, str, int]]] = None
    spm_model: Optional[str] = None
    notes: List[str] = field(default_factory=list)
    # a translation model (XLM's MT checkpoints): ``state`` also holds the decoder's parameters
    # (``DECODER_PREFIX`` + XLM's names) and ``n_layers`` counts the encoder's; None: an LM
    decoder_layers: Optional[int] = None


def swap_permutation(n: int) -> torch.Tensor:
    """Index map between XLM's (``<s> </s> <pad> <unk>``) and fairseq's (``<s> <pad> </s> <unk>``)
    vocabulary order: entries 1 and 2 swap, the rest stay. Its own inverse: ``new = old[perm]``
    converts either way."""
    if n < 4:
        raise XLMUserError(f"a vocabulary of {n} entries cannot hold <s> </s> <pad> <unk>")
    perm = torch.arange(n)
    perm[1], perm[2] = 2, 1
    return perm


def hf_token_to_xlm_word(token: str) -> str:
    """HF ``vocab.json`` spelling -> XLM/fastBPE spelling: ``the</w>`` -> ``the``, ``th`` -> ``th@@``."""
    if token in XLM_SYMBOLS or token in SPECIAL_SYMBOLS:
        return token
    if token.endswith("</w>"):
        return token[: -len("</w>")]
    return token + "@@"


def xlm_word_to_hf_token(word: str) -> str:
    """XLM/fastBPE spelling -> HF ``vocab.json`` spelling (inverse of :func:`hf_token_to_xlm_word`)."""
    if word in XLM_SYMBOLS or word in SPECIAL_SYMBOLS:
        return word
    if word.endswith("@@"):
        return word[: -len("@@")]
    return word + "</w>"
