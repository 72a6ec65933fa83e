"""The text pipeline of an XLM translator as a ``transformers`` tokenizer, for one direction.

``xlm-fairseq-export CKPT OUT --hf`` copies this file into every ``OUT/hf/SRC-TGT`` (``auto_map`` in its
``tokenizer_config.json``), so that ``AutoTokenizer.from_pretrained(DIR, trust_remote_code=True)`` needs
only ``transformers``, ``sentencepiece`` and ``sacremoses`` (and, for a model that segments zh, ja or th,
that language's segmenter): this file imports nothing of xlm-fairseq, fairseq or torch.

It repeats ``preprocess/text.py``, ``preprocess/segment.py`` and ``preprocess/subwords.py`` step for step
(a fast tokenizer cannot express Moses' per-language rules): Moses punctuation normalisation, non-printing
characters to spaces, Romanian normalisation, Moses tokenisation of the source language (or its word
segmenter), optional lowercasing and accent removal, then sentencepiece or XLM's BPE; ids are
``</s> pieces </s>``, as the model's encoder was trained on (``text_target=``: ``pieces </s>``, labels).
Decoding joins the pieces and Moses-detokenises in the target language; ``<s>``, ``<pad>`` and ``</s>``
are never text and are dropped whatever ``skip_special_tokens`` says, ``<unk>`` is kept as the
xlm-fairseq hub writes it."""

import functools
import json
import logging
import os
import re
import shutil
import unicodedata
from typing import Dict, List, Optional, Sequence, Tuple

from transformers import PreTrainedTokenizer

VOCAB_FILES_NAMES = {"vocab_file": "vocab.json", "spm_file": "spm.model", "bpe_codes_file": "bpe.codes"}
UNSPACED_LANGS = ("zh", "ja", "th")  # written without spaces between words: detokenised by join_unspaced
SEGMENTER_PACKAGES = {"jieba": "jieba", "mecab": "mecab-python3 ipadic", "pythainlp": "pythainlp"}
_RO_CEDILLA_TO_COMMA = str.maketrans("şŞţŢ", "șȘțȚ")
_RO_DIACRITICS = str.maketrans("șȘțȚăĂâÂîÎ", "sStTaAaAiI")
_SPACED_WORD = re.compile(r"^[0-9A-Za-z\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff]")


def base_lang(lang: str) -> str:
    return (lang or "en").split("_")[0].split("-")[0].lower()


@functools.lru_cache(maxsize=None)
def _moses(lang: str):
    from sacremoses import MosesDetokenizer, MosesPunctNormalizer, MosesTokenizer

    normalizer = MosesPunctNormalizer(lang=lang, pre_replace_unicode_punct=True)
    return normalizer, MosesTokenizer(lang=lang), MosesDetokenizer(lang=lang)


def _remove_non_printing(text: str) -> str:
    if text.isprintable():
        return text
    return "".join(" " if unicodedata.category(ch)[0] == "C" or ch.isspace() else ch for ch in text)


def _normalize_romanian(text: str, remove_diacritics: bool) -> str:
    if not text.isascii():
        text = unicodedata.normalize("NFC", text).translate(_RO_CEDILLA_TO_COMMA)
    return text.translate(_RO_DIACRITICS) if remove_diacritics else text


def _lowercase_and_remove_accent(word: str) -> str:
    word = unicodedata.normalize("NFD", word.lower())
    return "".join(ch for ch in word if unicodedata.category(ch) != "Mn").lower()


@functools.lru_cache(maxsize=None)
def _segmenter(name: str):
    """The words of a line by a segmenter, imported on first use."""
    try:
        if name == "jieba":
            import jieba

            jieba.setLogLevel(logging.WARNING)
            return lambda line: list(jieba.cut(line, HMM=True))
        if name == "mecab":
            import ipadic
            import MeCab

            tagger = MeCab.Tagger(f"{ipadic.MECAB_ARGS} -Owakati")
            return lambda line: tagger.parse(line).split()
        if name == "pythainlp":
            from pythainlp.tokenize import word_tokenize

            return lambda line: word_tokenize(line, engine="newmm", keep_whitespace=False)
    except ImportError:
        raise ImportError(
            f"this tokenizer segments words with {name}: pip install {SEGMENTER_PACKAGES[name]}"
        ) from None
    raise ValueError(f"unknown segmenter {name!r} (one of {', '.join(SEGMENTER_PACKAGES)})")


def _join_unspaced(words: Sequence[str]) -> str:
    out = ""
    for word in words:
        if out and _SPACED_WORD.match(out[-1]) and _SPACED_WORD.match(word):
            out += " "
        out += word
    return out


class _XLMBPE:
    """XLM's fastBPE applier: the adjacent pair of lowest rank merged until none has a rank; pieces
    spelled ``th@@ e``."""

    def __init__(self, codes_file: str):
        self.ranks: Dict[Tuple[str, str], int] = {}
        self._cache: Dict[str, Tuple[str, ...]] = {}
        with open(codes_file, encoding="utf-8") as f:
            for n, line in enumerate(f):
                parts = line.split()
                if (n == 0 and line.startswith("#version")) or len(parts) not in (2, 3):
                    continue
                self.ranks.setdefault((parts[0], parts[1]), len(self.ranks))

    def word(self, word: str) -> Tuple[str, ...]:
        if word in self._cache:
            return self._cache[word]
        symbols = list(word[:-1]) + [word[-1] + "</w>"]
        while len(symbols) > 1:
            ranks = [self.ranks.get(pair) for pair in zip(symbols, symbols[1:])]
            known = [rank for rank in ranks if rank is not None]
            if not known:
                break
            best = ranks.index(min(known))  # the first pair of the lowest rank, merged everywhere
            first, second = symbols[best], symbols[best + 1]
            merged, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == first and symbols[i + 1] == second:
                    merged.append(first + second)
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            symbols = merged
        pieces = tuple(s + "@@" for s in symbols[:-1]) + (symbols[-1][: -len("</w>")],)
        if len(self._cache) < 100_000:
            self._cache[word] = pieces
        return pieces

    def split(self, text: str) -> List[str]:
        return [piece for word in text.split() for piece in self.word(word)]

    @staticmethod
    def join(pieces: Sequence[str]) -> str:
        text = " ".join(pieces).replace("@@ ", "")
        return text[:-2] if text.endswith("@@") else text


class _SentencePiece:
    def __init__(self, model_file: str):
        import sentencepiece

        self.sp = sentencepiece.SentencePieceProcessor(model_file=model_file)

    def split(self, text: str) -> List[str]:
        return list(self.sp.encode(text, out_type=str)) if text.strip() else []

    @staticmethod
    def join(pieces: Sequence[str]) -> str:
        # xlm-fairseq's hub passes text without any ▁ through unchanged (its pieces were joined already)
        if not any("\u2581" in p for p in pieces):
            return " ".join(pieces)
        return "".join(pieces).replace("\u2581", " ").strip()


class XLMFairseqTokenizer(PreTrainedTokenizer):
    """Raw text in ``src_lang`` -> ``</s> pieces </s>`` ids; ids -> detokenised text in ``tgt_lang``."""

    vocab_files_names = VOCAB_FILES_NAMES
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(
        self,
        vocab_file: str,
        spm_file: Optional[str] = None,
        bpe_codes_file: Optional[str] = None,
        src_lang: str = "en",
        tgt_lang: str = "en",
        ro_remove_diacritics: bool = False,
        lowercase_and_remove_accent: bool = False,
        segmenters: Optional[Dict[str, str]] = None,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        **kwargs,
    ):
        if (spm_file is None) == (bpe_codes_file is None):
            raise ValueError("give one subword model: spm_file (sentencepiece) or bpe_codes_file (XLM's BPE)")
        with open(vocab_file, encoding="utf-8") as f:
            self.symbols: List[str] = json.load(f)
        self.indices = {symbol: i for i, symbol in enumerate(self.symbols)}
        self.vocab_file, self.spm_file, self.bpe_codes_file = vocab_file, spm_file, bpe_codes_file
        self.subwords = _SentencePiece(spm_file) if spm_file else _XLMBPE(bpe_codes_file)
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self.ro_remove_diacritics = ro_remove_diacritics
        self.lowercase_and_remove_accent = lowercase_and_remove_accent
        self.segmenters = dict(segmenters or {})
        for name in self.segmenters.values():
            if name not in SEGMENTER_PACKAGES:
                raise ValueError(f"unknown segmenter {name!r} (one of {', '.join(SEGMENTER_PACKAGES)})")
        self._target = False
        # text is never read as special tokens: "</s>" typed in a sentence is tokenised as the pipeline does
        kwargs.setdefault("split_special_tokens", True)
        kwargs.setdefault("clean_up_tokenization_spaces", False)
        super().__init__(
            src_lang=src_lang,
            tgt_lang=tgt_lang,
            ro_remove_diacritics=ro_remove_diacritics,
            lowercase_and_remove_accent=lowercase_and_remove_accent,
            segmenters=self.segmenters,
            bos_token=bos_token,
            eos_token=eos_token,
            pad_token=pad_token,
            unk_token=unk_token,
            **kwargs,
        )

    # ---- the pipeline -----------------------------------------------------------------------

    def words(self, text: str, lang: str) -> str:
        """Normalised, Moses-tokenised (or segmented), optionally lowercased words, space-separated."""
        base = base_lang(lang)
        normalizer, tokenizer, _ = _moses(base)
        line = _remove_non_printing(normalizer.normalize(text))
        if base == "ro":
            line = _normalize_romanian(line, self.ro_remove_diacritics)
        line = " ".join(line.split())
        if not line:
            return ""
        if self.segmenters.get(lang):
            words = (w.strip() for w in _segmenter(self.segmenters[lang])(line))
            line = " ".join(w for w in words if w)
        else:
            line = tokenizer.tokenize(line, escape=False, return_str=True)
        if self.lowercase_and_remove_accent and line:
            line = " ".join(w for w in map(_lowercase_and_remove_accent, line.split()) if w)
        return line

    def detokenize(self, pieces: Sequence[str], lang: str) -> str:
        words = self.subwords.join(pieces).split()
        if base_lang(lang) in UNSPACED_LANGS:
            return _join_unspaced(words)
        return _moses(base_lang(lang))[2].detokenize(words)

    # ---- transformers' interface ------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return len(self.symbols)

    def get_vocab(self) -> Dict[str, int]:
        return {**self.indices, **self.added_tokens_encoder}

    def _switch_to_input_mode(self):
        self._target = False

    def _switch_to_target_mode(self):
        self._target = True

    def _tokenize(self, text: str, **kwargs) -> List[str]:
        return self.subwords.split(self.words(text, self.tgt_lang if self._target else self.src_lang))

    def _convert_token_to_id(self, token: str) -> int:
        return self.indices.get(token, self.indices[str(self.unk_token)])

    def _convert_id_to_token(self, index: int) -> str:
        return self.symbols[index]

    def convert_tokens_to_string(self, tokens: List[str]) -> str:
        return self.detokenize(tokens, self.tgt_lang)

    def _decode(self, token_ids, skip_special_tokens: bool = False, clean_up_tokenization_spaces=None, **kwargs) -> str:
        ids = [token_ids] if isinstance(token_ids, int) else [int(i) for i in token_ids]
        markers = {self.bos_token_id, self.pad_token_id, self.eos_token_id}
        return self.convert_tokens_to_string([self.symbols[i] for i in ids if i not in markers])

    def build_inputs_with_special_tokens(self, token_ids_0: List[int], token_ids_1: Optional[List[int]] = None):
        if token_ids_1 is not None:
            raise ValueError("a translator's input is one sentence, not a pair")
        eos = [self.eos_token_id]
        return token_ids_0 + eos if self._target else eos + token_ids_0 + eos

    def get_special_tokens_mask(self, token_ids_0, token_ids_1=None, already_has_special_tokens=False):
        if already_has_special_tokens:
            return [int(i in (self.bos_token_id, self.pad_token_id, self.eos_token_id)) for i in token_ids_0]
        return ([] if self._target else [1]) + [0] * len(token_ids_0) + [1]

    def save_vocabulary(self, save_directory: str, filename_prefix: Optional[str] = None) -> Tuple[str, ...]:
        prefix = f"{filename_prefix}-" if filename_prefix else ""
        vocab = os.path.join(save_directory, prefix + VOCAB_FILES_NAMES["vocab_file"])
        with open(vocab, "w", encoding="utf-8") as f:
            json.dump(self.symbols, f, ensure_ascii=False)
        key, source = ("spm_file", self.spm_file) if self.spm_file else ("bpe_codes_file", self.bpe_codes_file)
        subwords = os.path.join(save_directory, prefix + VOCAB_FILES_NAMES[key])
        if os.path.abspath(source) != os.path.abspath(subwords):
            shutil.copyfile(source, subwords)
        return vocab, subwords
