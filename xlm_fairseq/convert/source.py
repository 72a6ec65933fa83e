"""A source model in XLM's terms (:class:`XLMSource`), and what both readers share: XLM's vocabulary
order and spelling, language lists, and reading a checkpoint file through the allowlist."""

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch

from preprocess.langs import parse_langs
from preprocess.layout import MASK_SYMBOL, SPECIAL_SYMBOLS, XLM_SYMBOLS
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.patches import safe_load

# --------------------------------------------------------------------------------------------
# vocabulary order and spelling
# --------------------------------------------------------------------------------------------


def swap_permutation(n: int) -> torch.Tensor:
    """Index map between XLM's and fairseq's vocabulary order: entries 1 and 2 swap, the rest stay.
    It is its own inverse: ``new = old[perm]`` converts either way."""
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


# --------------------------------------------------------------------------------------------
# a source model, in XLM's terms
# --------------------------------------------------------------------------------------------


@dataclass
class XLMSource:
    """Everything a converter needs, read from either source format; vocabulary in XLM order."""

    kind: str  # "xlm_pth" | "hf"
    path: str
    weights: Dict[str, torch.Tensor]  # XLM parameter names (embeddings.weight, ..., pred_layer.proj.bias)
    words: List[str]  # XLM order, fastBPE spelling
    counts: List[int]
    langs: List[str]
    dim: int
    n_layers: int
    n_heads: int
    dropout: float
    attention_dropout: float
    max_positions: int
    sinusoidal: bool
    use_lang_emb: bool
    lowercase: bool
    codes: Optional[List[Tuple[str, str, int]]] = None
    notes: List[str] = field(default_factory=list)


def lowercase_of(
    words: List[str], option: Optional[bool], claim: Optional[bool], claimant: str, notes: List[str]
) -> bool:
    """Whether the model's text was lowercased and stripped of accents: ``--lowercase`` if given, else
    what its vocabulary shows -- text that went through XLM's lowercase_and_remove_accent leaves no
    uppercase letter in any word (XNLI-15, en-2048), cased text leaves many (the en-de/en-fr/en-ro MT
    models, XLM-17/100). A claim of the source that disagrees (Hugging Face's tokenizer_config.json
    says true for the MT models) is overruled, with a note."""
    if option is not None:
        return option
    cased = sum(1 for w in words if w not in SPECIAL_SYMBOLS and w not in XLM_SYMBOLS and any(c.isupper() for c in w))
    lowercase = cased == 0
    if claim is not None and claim != lowercase:
        notes.append(
            f"{claimant} says do_lowercase_and_remove_accent={str(claim).lower()}, but "
            + (f"{cased} vocabulary entries have uppercase letters" if cased else "no vocabulary entry has one")
            + f": converted as lowercase={str(lowercase).lower()} (what the model was trained with); "
            "--lowercase yes|no overrides."
        )
    return lowercase


# settings of XLM (params) or Hugging Face (config) that xlm_transformer cannot represent:
# (name, refused value, what it means); a source that lacks the name is fine
UNREPRESENTABLE = (
    ("asm", True, "an adaptive softmax output layer"),
    ("use_memory", True, "product-key memory layers"),
    ("gelu_activation", False, "ReLU feed-forward layers (xlm_transformer uses GELU)"),
    ("is_encoder", False, "a decoder configuration"),
)


def check_representable(get, src: str) -> None:
    """``get(name, default)`` reads a source setting; refuse the first that xlm_transformer cannot represent."""
    for name, bad, why in UNREPRESENTABLE:
        if get(name, not bad) == bad:
            raise XLMUserError(f"{src}: the model uses {why}, which xlm_transformer cannot represent")


def _py(value):
    """numpy scalars/arrays (as in XLM's ``params``) -> plain Python."""
    if hasattr(value, "tolist") and not isinstance(value, torch.Tensor):
        return value.tolist()
    return value


def _langs_from_ids(mapping, what: str) -> List[str]:
    """{lang: id} or {id: lang} (ids maybe strings, as JSON writes them) -> languages in id order."""
    if not mapping:
        return []
    pairs = []
    for k, v in dict(mapping).items():
        k, v = _py(k), _py(v)
        if isinstance(v, str):
            k, v = v, k
        try:
            pairs.append((int(v), str(k)))
        except (TypeError, ValueError):
            raise XLMUserError(f"{what}: cannot read language ids from {dict(mapping)!r}") from None
    pairs.sort()
    if [i for i, _ in pairs] != list(range(len(pairs))):
        raise XLMUserError(f"{what}: language ids {[i for i, _ in pairs]} are not 0..{len(pairs) - 1}")
    return [lang for _, lang in pairs]


def _resolve_langs(found: List[str], option: Optional[str], n_langs: int, src: str) -> List[str]:
    """The languages the source names (``found``) or, when it names none, ``--langs``; a language
    listed twice is refused by :func:`preprocess.langs.parse_langs`."""
    given = parse_langs(option, "--langs") if option else []
    if found and given and found != given:
        raise XLMUserError(f"{src} names its languages {','.join(found)}; --langs {option} disagrees")
    langs = found or given
    if not langs:
        raise XLMUserError(f"{src} names no languages; pass --langs (in language-id order, {n_langs} of them)")
    if len(langs) != n_langs:
        raise XLMUserError(f"{src} has n_langs={n_langs} but {len(langs)} languages are named ({','.join(langs)})")
    return langs


def _check_vocab_head(words: List[str], src: str):
    if words[:4] != list(XLM_SYMBOLS):
        raise XLMUserError(f"{src}: vocabulary starts {words[:4]}, expected XLM's {list(XLM_SYMBOLS)}")
    missing = [s for s in SPECIAL_SYMBOLS if s not in words]
    if MASK_SYMBOL in missing:
        raise XLMUserError(f"{src}: vocabulary lacks the mask token {MASK_SYMBOL}")
    seen = set()
    for w in words:
        if w in seen:
            raise XLMUserError(f"{src}: vocabulary lists {w!r} twice")
        if not w or any(ch.isspace() for ch in w):
            raise XLMUserError(f"{src}: vocabulary entry {w!r} is empty or holds whitespace; dict.txt cannot store it")
        seen.add(w)


# --------------------------------------------------------------------------------------------
# checkpoint files
# --------------------------------------------------------------------------------------------


def _looks_like_torch_file(path: str) -> bool:
    """torch.save writes a zip archive (torch >= 1.6) or a pickle (protocol 2+ starts with 0x80)."""
    import zipfile

    if zipfile.is_zipfile(path):
        return True
    with open(path, "rb") as f:
        return f.read(1) == b"\x80"


def _load_checkpoint(path: str):
    if not _looks_like_torch_file(path):
        raise XLMUserError(f"{path}: not an XLM .pth nor an xlm_fairseq checkpoint (not a file torch.save writes)")
    return safe_load.load(path)  # a refused pickle or an unreadable file: one line naming it


def _is_xlm_pth(ckpt) -> bool:
    return isinstance(ckpt, dict) and {"model", "params", "dico_id2word"} <= set(ckpt)
