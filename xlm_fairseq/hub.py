"""Use a pretrained XLM from Python: text in, features / predictions out.

::

    from xlm_fairseq.models.xlm import XLMModel
    xlm = XLMModel.from_pretrained("converted/mlm_ende_1024")      # or XLMHubInterface.from_pretrained
    tokens = xlm.encode("Hello world!", "en")                      # </s> pieces... </s>
    feats = xlm.extract_features(tokens, "en")                     # 1 x T x C, last layer
    xlm.fill_mask("The <mask> sat on the mat.", "en", topk=3)      # [(sentence, prob, token), ...]

The directory holds ``model.pt`` (or the ``checkpoint_file`` named) and ``dict.txt``, and the text
pipeline the model was trained with:

* ``spm.model`` (our own data-bins, ``preprocess/``): Moses punctuation normalisation, non-printing
  characters removed, Romanian normalisation for ``ro``, Moses tokenisation (``escape=False``), then
  sentencepiece;
* ``bpe.codes`` (converted XLM models, see ``xlm_fairseq.convert``): XLM's ``tools/tokenize.sh`` as
  Hugging Face's ``XLMTokenizer`` runs it (unicode punctuation replaced, Moses punctuation
  normalisation, non-printing characters removed, Moses tokenisation without escaping), optional
  lowercasing and accent removal (``xlm_tokenizer.json``), then fastBPE-style BPE
  (``th@@ e``).

Without either file, ``encode``/``decode``/``fill_mask`` refuse; the tensor methods still work.
"""

import json
import logging
import os
import unicodedata
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn
from torch import Tensor

from xlm_fairseq.errors import XLMUserError

logger = logging.getLogger(__name__)

MASK_TEXT = "<mask>"
TOKENIZER_FILE = "xlm_tokenizer.json"
CODES_FILE = "bpe.codes"
SPM_FILE = "spm.model"


class HubError(XLMUserError):
    pass


# --------------------------------------------------------------------------------------------
# text pipelines
# --------------------------------------------------------------------------------------------


def _base_lang(lang: str) -> str:
    return (lang or "en").split("_")[0].split("-")[0].lower()


class _Moses:
    """sacremoses objects, one per language (they are slow to build)."""

    def __init__(self):
        self._norm, self._tok, self._detok = {}, {}, {}

    def normalize(self, text: str, lang: str) -> str:
        from sacremoses import MosesPunctNormalizer

        lang = _base_lang(lang)
        if lang not in self._norm:
            # pre_replace_unicode_punct: Moses' replace-unicode-punctuation.perl first, as tokenize.sh
            self._norm[lang] = MosesPunctNormalizer(lang=lang, pre_replace_unicode_punct=True)
        return self._norm[lang].normalize(text)

    def tokenize(self, text: str, lang: str) -> List[str]:
        from sacremoses import MosesTokenizer

        lang = _base_lang(lang)
        if lang not in self._tok:
            self._tok[lang] = MosesTokenizer(lang=lang)
        return self._tok[lang].tokenize(text, escape=False)

    def detokenize(self, tokens: List[str], lang: str) -> str:
        from sacremoses import MosesDetokenizer

        lang = _base_lang(lang)
        if lang not in self._detok:
            self._detok[lang] = MosesDetokenizer(lang=lang)
        return self._detok[lang].detokenize(tokens)


def remove_non_printing(text: str, replacement: str = " ") -> str:
    """Characters of unicode category C* (control, format, ...) become ``replacement``."""
    return "".join(replacement if unicodedata.category(ch)[0] == "C" else ch for ch in text)


def lowercase_and_remove_accent(text: str) -> str:
    """XLM's ``tools/lowercase_and_remove_accent.py``: lowercase, NFD, drop combining marks (Mn)."""
    text = unicodedata.normalize("NFD", text.lower())
    return "".join(ch for ch in text if unicodedata.category(ch) != "Mn").lower()


class XLMBPETokenizer:
    """XLM's text pipeline with fastBPE codes (``a b count`` per line, ``</w>`` marks word ends).

    Words are split into the symbols of the word with ``</w>`` on the last one; the adjacent pair of
    lowest rank is merged everywhere in the word until no pair has a rank. Pieces come out in XLM's
    spelling: ``th@@`` for a non-final piece, ``e`` for the final one."""

    kind = "xlm_bpe"

    def __init__(self, codes_path: str, lowercase: bool = True, moses: Optional[_Moses] = None):
        self.ranks: Dict[Tuple[str, str], int] = {}
        with open(codes_path, encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 2 or (not self.ranks and line.startswith("#version")):
                    continue
                self.ranks.setdefault((parts[0], parts[1]), len(self.ranks))
        self.lowercase = lowercase
        self.moses = moses or _Moses()
        self._cache: Dict[str, List[str]] = {}

    def bpe(self, word: str) -> List[str]:
        if word in self._cache:
            return self._cache[word]
        symbols = list(word[:-1]) + [word[-1] + "</w>"]
        while len(symbols) > 1:
            best, best_rank = None, None
            for pair in zip(symbols, symbols[1:]):
                rank = self.ranks.get(pair)
                if rank is not None and (best_rank is None or rank < best_rank):
                    best, best_rank = pair, rank
            if best is None:
                break
            merged, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == best[0] and symbols[i + 1] == best[1]:
                    merged.append(symbols[i] + symbols[i + 1])
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            symbols = merged
        pieces = [s + "@@" for s in symbols[:-1]] + [symbols[-1][: -len("</w>")]]
        if len(self._cache) < 100_000:
            self._cache[word] = pieces
        return pieces

    def words(self, text: str, lang: str) -> List[str]:
        # deleted, not spaced, as Hugging Face's XLMTokenizer does
        text = remove_non_printing(self.moses.normalize(text, lang), replacement="")
        if _base_lang(lang) == "ro":
            from preprocess import normalize_romanian, remove_romanian_diacritics

            text = remove_romanian_diacritics(normalize_romanian(text))  # XLM's en-ro model
        words = self.moses.tokenize(text, lang)
        if self.lowercase:
            words = [lowercase_and_remove_accent(w) for w in words]
        return [w for w in words if w]

    def pieces(self, text: str, lang: str) -> List[str]:
        return [p for w in self.words(text, lang) for p in self.bpe(w)]

    def detokenize(self, pieces: Sequence[str], lang: str) -> str:
        text = " ".join(pieces).replace("@@ ", "")
        if text.endswith("@@"):
            text = text[:-2]
        return self.moses.detokenize(text.split(), lang)


class SentencePieceTokenizer:
    """``preprocess/``'s pipeline (``preprocess.normalize_and_tokenize`` / ``detokenize``: Moses
    normalisation and tokenisation), then sentencepiece."""

    kind = "spm"

    def __init__(self, spm_path: str, ro_remove_diacritics: bool = False, moses: Optional[_Moses] = None):
        import sentencepiece as spm

        self.sp = spm.SentencePieceProcessor(model_file=spm_path)
        self.ro_remove_diacritics = ro_remove_diacritics
        # the very code that made the data-bin (preprocess/ is installed with this package)
        from preprocess import detokenize, normalize_and_tokenize

        self._normalize, self._detokenize = normalize_and_tokenize, detokenize

    def words(self, text: str, lang: str) -> List[str]:
        return self._normalize(text, lang, self.ro_remove_diacritics).split()

    def pieces(self, text: str, lang: str) -> List[str]:
        words = self.words(text, lang)
        return list(self.sp.encode(" ".join(words), out_type=str)) if words else []

    def detokenize(self, pieces: Sequence[str], lang: str) -> str:
        return self._detokenize(self.sp.decode_pieces(list(pieces)), lang)


def build_tokenizer(dirs: Sequence[str]):
    """The model's text pipeline from the first directory that describes one, or None."""
    moses = _Moses()
    for d in dict.fromkeys(x for x in dirs if x):
        info = {}
        info_path = os.path.join(d, TOKENIZER_FILE)
        if os.path.isfile(info_path):
            with open(info_path, encoding="utf-8") as f:
                info = json.load(f)
        spm_path = os.path.join(d, SPM_FILE)
        if os.path.isfile(spm_path) and info.get("type", "spm") == "spm":
            ro_remove = False
            manifest = os.path.join(d, "manifest.json")
            if os.path.isfile(manifest):
                try:
                    with open(manifest, encoding="utf-8") as f:
                        ro_remove = bool(json.load(f).get("options", {}).get("ro_remove_diacritics", False))
                except (ValueError, AttributeError):
                    pass
            return SentencePieceTokenizer(spm_path, ro_remove, moses)
        codes = os.path.join(d, info.get("bpe_codes") or CODES_FILE)
        if os.path.isfile(codes):
            return XLMBPETokenizer(codes, bool(info.get("lowercase_and_remove_accent", True)), moses)
        if info.get("type") == "xlm_bpe":
            raise HubError(f"{d}: no {CODES_FILE}; copy the model's released BPE codes file there (see its README.md)")
    return None


# --------------------------------------------------------------------------------------------
# hub interface
# --------------------------------------------------------------------------------------------


def _torch_loads_weights_only() -> bool:
    """Whether a plain ``torch.load`` refuses pickled code (torch >= 2.6, not switched off)."""
    try:
        major, minor = (int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    except ValueError:
        return False
    forced_off = os.environ.get("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "").lower() not in ("", "0", "false")
    return (major, minor) >= (2, 6) and not forced_off


class XLMHubInterface(nn.Module):
    """A loaded XLM LM with its dictionary, languages and text pipeline. Eval mode, no gradients."""

    def __init__(self, cfg, task, model, model_dir: Optional[str] = None):
        super().__init__()
        self.cfg = cfg
        self.task = task
        self.model = model
        self.model_dir = model_dir
        self.langs: List[str] = list(task.langs)
        self.lang2id: Dict[str, int] = {lang: i for i, lang in enumerate(self.langs)}
        self.dictionary = task.source_dictionary
        self.mask_idx = task.mask_idx
        data = getattr(getattr(cfg, "task", None), "data", None)
        data_dir = str(data).split(os.pathsep)[0] if data else None
        self._tokenizer_dirs = [model_dir, data_dir]
        self._tokenizer = None
        self._tokenizer_error: Optional[str] = None
        try:
            self._tokenizer = build_tokenizer(self._tokenizer_dirs)
        except HubError as e:
            self._tokenizer_error = str(e)
        self.eval()
        for p in self.model.parameters():
            p.requires_grad_(False)

    @classmethod
    def from_pretrained(cls, model_name_or_path, checkpoint_file="model.pt", data_name_or_path=".", **kwargs):
        """``model_name_or_path``: a directory holding ``checkpoint_file`` and ``dict.txt`` (a
        converter OUT_DIR, or a training checkpoint directory beside a data-bin's dict.txt/spm.model);
        a checkpoint file path also works. kwargs override checkpoint options (``data=...``)."""
        from fairseq import hub_utils

        import xlm_fairseq  # noqa: F401  (registers the model/task and the safe loader)

        path = str(model_name_or_path)
        if os.path.isfile(path):
            path, checkpoint_file = os.path.dirname(os.path.abspath(path)), os.path.basename(path)
        path = os.path.abspath(path)
        for name in checkpoint_file.split(os.pathsep):
            if not os.path.isfile(os.path.join(path, name)):
                raise HubError(f"{os.path.join(path, name)}: no such checkpoint")
            if not _torch_loads_weights_only():
                # fairseq calls torch.load with torch's default, which unpickles anything before 2.6
                from xlm_fairseq import safe_load

                safe_load.load(os.path.join(path, name))
        x = hub_utils.from_pretrained(path, checkpoint_file, data_name_or_path, **kwargs)
        models = x["models"]
        if len(models) != 1:
            raise HubError(f"{checkpoint_file}: give one checkpoint, not an ensemble")
        if getattr(models[0], "decoder", None) is not None:
            raise HubError(f"{checkpoint_file}: a translation model; XLMHubInterface serves cross_lingual_lm models")
        return cls(x["args"], x["task"], models[0], model_dir=path)

    # ---- helpers ----------------------------------------------------------------------------

    @property
    def device(self):
        return next(self.model.parameters()).device

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            raise HubError(self._tokenizer_error or f"no text pipeline: none of {SPM_FILE}, {CODES_FILE} in "
                           f"{', '.join(d for d in self._tokenizer_dirs if d)}")
        return self._tokenizer

    def _check_lang(self, lang: str) -> int:
        if lang not in self.lang2id:
            raise HubError(f"language '{lang}' is not one of the model's: {','.join(self.langs)}")
        return self.lang2id[lang]

    def _ids(self, pieces: Sequence[str]) -> List[int]:
        return [self.dictionary.index(p) for p in pieces]

    # ---- text <-> tokens --------------------------------------------------------------------

    def encode(self, text: str, lang: str) -> Tensor:
        """``</s> pieces... </s>`` as a LongTensor of dictionary ids (unknown pieces -> ``<unk>``)."""
        self._check_lang(lang)
        eos = self.dictionary.eos()
        return torch.tensor([eos] + self._ids(self.tokenizer.pieces(text, lang)) + [eos], dtype=torch.long)

    def decode(self, tokens: Tensor, lang: Optional[str] = None) -> str:
        """Tokens (1-D) back to text; leading/trailing ``</s>`` and padding dropped. ``lang`` picks
        the Moses detokeniser (default: the model's first language)."""
        tokens = torch.as_tensor(tokens)
        if tokens.dim() != 1:
            raise HubError(f"decode takes one sentence (1-D tokens), got shape {tuple(tokens.shape)}")
        ids = [int(t) for t in tokens if int(t) != self.dictionary.pad()]
        eos = self.dictionary.eos()
        while ids and ids[0] == eos:
            ids = ids[1:]
        while ids and ids[-1] == eos:
            ids = ids[:-1]
        pieces = [self.dictionary[i] for i in ids]
        return self.tokenizer.detokenize(pieces, lang or self.langs[0])

    # ---- model ------------------------------------------------------------------------------

    def _batch(self, tokens, langs):
        tokens = torch.as_tensor(tokens, dtype=torch.long)
        if tokens.dim() == 1:
            tokens = tokens.unsqueeze(0)
        if tokens.dim() != 2:
            raise HubError(f"tokens must be 1-D or 2-D, got shape {tuple(tokens.shape)}")
        max_pos = self.model.lm.max_positions
        if tokens.size(1) > max_pos:
            raise HubError(f"{tokens.size(1)} tokens; the model takes at most {max_pos}")
        if langs is None:
            if self.model.lm.use_lang_emb:
                raise HubError(f"this model has language embeddings: give langs (one of {','.join(self.langs)}, or ids)")
            lang_ids = None
        elif isinstance(langs, str):
            lang_ids = torch.full_like(tokens, self._check_lang(langs))
        elif isinstance(langs, int):
            lang_ids = torch.full_like(tokens, langs)
        else:
            lang_ids = torch.as_tensor(langs, dtype=torch.long)
            if lang_ids.dim() == 1 and lang_ids.numel() == tokens.size(1) and tokens.size(0) == 1:
                lang_ids = lang_ids.unsqueeze(0)  # per token of the one sentence
            elif lang_ids.dim() == 1 and lang_ids.numel() == tokens.size(0):
                lang_ids = lang_ids[:, None].expand_as(tokens)  # one language per sentence
            if lang_ids.shape != tokens.shape:
                raise HubError(f"langs of shape {tuple(lang_ids.shape)} do not fit tokens of shape {tuple(tokens.shape)}")
        if lang_ids is not None and lang_ids.numel() and (lang_ids.min() < 0 or lang_ids.max() >= len(self.langs)):
            raise HubError(f"language ids must lie in 0..{len(self.langs) - 1} ({','.join(self.langs)})")
        device = self.device
        return tokens.to(device), (None if lang_ids is None else lang_ids.to(device))

    @torch.no_grad()
    def extract_features(self, tokens, langs=None) -> Tensor:
        """Last layer's hidden states, B x T x C (zero at padding). ``langs``: a language code for
        the whole batch, or a LongTensor of language ids per token (B x T; B: per sentence)."""
        tokens, langs = self._batch(tokens, langs)
        features, _ = self.model(tokens, src_langs=langs, features_only=True)
        return features

    @torch.no_grad()
    def predict(self, tokens, langs=None) -> Tensor:
        """Output-layer logits, B x T x V."""
        tokens, langs = self._batch(tokens, langs)
        logits, _ = self.model(tokens, src_langs=langs)
        return logits

    @torch.no_grad()
    def fill_mask(self, text: str, lang: str, topk: int = 5) -> List[Tuple[str, float, str]]:
        """Fill the one ``<mask>`` in ``text`` with each of the ``topk`` most probable vocabulary
        entries: [(filled sentence, probability, entry)], most probable first. Special symbols
        (``<s> <pad> </s> <unk>``, the mask) are never proposed."""
        if text.count(MASK_TEXT) != 1:
            raise HubError(f"fill_mask needs exactly one {MASK_TEXT} in the text, found {text.count(MASK_TEXT)}")
        self._check_lang(lang)
        left, right = text.split(MASK_TEXT)
        tok = self.tokenizer
        eos = self.dictionary.eos()
        left_ids = self._ids(tok.pieces(left, lang))
        ids = [eos] + left_ids + [self.mask_idx] + self._ids(tok.pieces(right, lang)) + [eos]
        tokens = torch.tensor(ids, dtype=torch.long)
        position = 1 + len(left_ids)
        logits = self.predict(tokens, lang)[0, position].float()
        banned = list(range(self.dictionary.nspecial)) + [self.mask_idx]
        logits[banned] = float("-inf")
        probs = logits.softmax(-1)
        k = min(topk, len(self.dictionary) - len(banned))
        values, indices = probs.topk(k)
        results = []
        for p, idx in zip(values.tolist(), indices.tolist()):
            filled = tokens.clone()
            filled[position] = idx
            results.append((self.decode(filled, lang), p, self.dictionary[idx]))
        return results
