"""What the two readers of XLM's own family (an original ``.pth``, a Hugging Face directory) share:
their vocabulary and language checks, the lowercasing default, the settings xlm_transformer cannot
represent, and XLM's names and vocabulary order turned into ours."""

from typing import Dict, List, Optional, Tuple

import torch

from preprocess.langs import parse_langs
from preprocess.layout import MASK_SYMBOL, SPECIAL_SYMBOLS, XLM_SYMBOLS
from xlm_fairseq.convert.lm import swap_permutation
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.models.xlm import LM_PREFIX

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


def py(value):
    """numpy scalars/arrays (as in XLM's ``params``) -> plain Python."""
    if hasattr(value, "tolist") and not isinstance(value, torch.Tensor):
        return value.tolist()
    return value


def langs_from_ids(mapping, what: str) -> List[str]:
    """{lang: id} or {id: lang} (ids maybe strings, as JSON writes them) -> languages in id order."""
    if not mapping:
        return []
    pairs = []
    for k, v in dict(mapping).items():
        k, v = py(k), py(v)
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


def resolve_langs(found: List[str], option: Optional[str], n_langs: int, src: str) -> List[str]:
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


def check_vocab_head(words: List[str], src: str) -> None:
    """XLM's four symbols first, the mask token present, every entry once and storable in dict.txt."""
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


def in_our_terms(
    weights: Dict[str, torch.Tensor], words: List[str], counts: List[int], src: str
) -> Tuple[Dict[str, torch.Tensor], List[str], List[int]]:
    """XLM's parameter names and vocabulary order -> ours: ``LM_PREFIX`` before every name, entries 1
    and 2 of the vocabulary swapped (its words, the embedding rows, the output bias), the output
    weight checked to be the embeddings' (xlm_transformer ties them) and left out."""
    n_words = len(words)
    emb = weights.get("embeddings.weight")
    if emb is None or emb.shape[0] != n_words:
        rows = None if emb is None else emb.shape[0]
        raise XLMUserError(f"{src}: embeddings have {rows} rows but the vocabulary {n_words} entries")
    tied = weights.get("pred_layer.proj.weight")
    if tied is not None and not torch.equal(tied, emb):
        raise XLMUserError(f"{src}: pred_layer.proj.weight differs from embeddings.weight; xlm_transformer ties them")
    perm = swap_permutation(n_words)
    state = {}
    for name, value in weights.items():
        if name == "pred_layer.proj.weight":
            continue
        if name in ("embeddings.weight", "pred_layer.proj.bias") and value.shape[0] == n_words:
            value = value[perm]
        state[LM_PREFIX + name] = value
    return state, [words[int(i)] for i in perm], [counts[int(i)] for i in perm]
