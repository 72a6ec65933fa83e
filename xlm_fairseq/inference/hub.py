"""Use a pretrained XLM from Python: text in, features / predictions out.

::

    from xlm_fairseq.models.xlm import XLMModel
    xlm = XLMModel.from_pretrained("converted/mlm_ende_1024")      # or XLMHubInterface.from_pretrained
    tokens = xlm.encode("Hello world!", "en")                      # </s> pieces... </s>
    feats = xlm.extract_features(tokens, "en")                     # 1 x T x C, last layer
    xlm.fill_mask("The <mask> sat on the mat.", "en", topk=3)      # [(sentence, prob, token), ...]

The directory holds ``model.pt`` (or the ``checkpoint_file`` named) and ``dict.txt``; the text
pipeline is the one the model was trained with (``preprocess/pipeline.py``): its settings come from
the checkpoint (or ``text_pipeline.json``), its subword model (``spm.model`` for our data-bins,
``bpe.codes`` for converted XLM models) from the model directory or the data-bin. Without one,
``encode``/``decode``/``fill_mask`` refuse; the tensor methods still work. A translation model loads
as :class:`xlm_fairseq.inference.translation_hub.XLMTranslationHubInterface` (``XLMModel.from_pretrained``
picks the hub of the checkpoint's kind).
"""

import logging
import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn
from fairseq import hub_utils
from torch import Tensor

from preprocess import layout
from preprocess.errors import UserError
from xlm_fairseq import checkpoints
from xlm_fairseq.errors import NOT_A_TRANSLATION_MODEL, XLMUserError

logger = logging.getLogger(__name__)

MASK_TEXT = "<mask>"


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


def is_translation_model(model) -> bool:
    return getattr(model, "decoder", None) is not None


def is_classifier(model) -> bool:
    return getattr(model, "classification_head", None) is not None


def text_batch(value, argument: str) -> Tuple[List[str], bool]:
    """What the hubs' text methods take: a string or a list (tuple) of strings -> (the list, whether
    one string was given). Anything else is one error naming ``argument`` (bytes would otherwise be
    iterated as numbers, ``None`` end in a bare TypeError)."""
    if isinstance(value, str):
        return [value], True
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise XLMUserError(f"{argument}[{i}] is {_what(item)}; give a string or a list of strings")
        return list(value), False
    raise XLMUserError(f"{argument} is {_what(value)}; give a string or a list of strings")


def _what(value) -> str:
    if isinstance(value, (bytes, bytearray)):
        return "bytes (decode them first: .decode('utf-8'))"
    return "None" if value is None else f"a {type(value).__name__}"


# name -> model directory (or None) for names that are not paths; xlm_fairseq.convert.hf_hub adds
# Hugging Face ids (this module cannot import the converter, which imports the model)
MODEL_RESOLVERS: List[Callable[[str], Optional[str]]] = []


def load_checkpoint(model_name_or_path, checkpoint_file=layout.MODEL_FILE, data_name_or_path=".", **kwargs):
    """fairseq's ``hub_utils.from_pretrained`` for one checkpoint, read safely: (its dict of
    args/task/models, the model directory). A name that is no path goes to ``MODEL_RESOLVERS``."""
    path = str(model_name_or_path)
    if not os.path.exists(path):
        path = next((found for found in (resolve(path) for resolve in MODEL_RESOLVERS) if found), path)
    if os.path.isfile(path):
        path, checkpoint_file = os.path.dirname(os.path.abspath(path)), os.path.basename(path)
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise XLMUserError(f"{model_name_or_path}: no such model directory or checkpoint file")
    for name in checkpoint_file.split(os.pathsep):
        if not os.path.isfile(os.path.join(path, name)):
            raise XLMUserError(f"{os.path.join(path, name)}: no such checkpoint")
        if not _torch_loads_weights_only():
            # fairseq calls torch.load with torch's default, which unpickles anything before 2.6
            checkpoints.load(os.path.join(path, name))
    x = hub_utils.from_pretrained(path, checkpoint_file, data_name_or_path, **kwargs)
    if len(x["models"]) != 1:
        raise XLMUserError(f"{checkpoint_file}: give one checkpoint, not an ensemble")
    return x, path


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
        self._tokenizer_dirs = [d for d in (model_dir, task.data_dir) if d]
        self._tokenizer = None
        self._tokenizer_error: Optional[str] = None
        try:
            self._tokenizer = task.text_pipeline([model_dir] if model_dir else [])
        except UserError as e:
            self._tokenizer_error = str(e)
        self.eval()
        for p in self.model.parameters():
            p.requires_grad_(False)

    @classmethod
    def from_pretrained(cls, model_name_or_path, checkpoint_file=layout.MODEL_FILE, data_name_or_path=".", **kwargs):
        """``model_name_or_path``: a directory holding ``checkpoint_file`` and ``dict.txt`` (a
        converter OUT_DIR, a model dir made by ``xlm-fairseq-export``, or a training checkpoint
        directory beside a data-bin's files); a checkpoint file path also works. kwargs override
        checkpoint options (``data=...``). Refuses a translation model (see :func:`from_pretrained`)."""
        x, path = load_checkpoint(model_name_or_path, checkpoint_file, data_name_or_path, **kwargs)
        if is_translation_model(x["models"][0]):
            raise XLMUserError(
                f"{checkpoint_file}: a translation model (translation_lm); load it with XLMModel.from_pretrained "
                "or XLMTranslationHubInterface.from_pretrained, which translate"
            )
        if is_classifier(x["models"][0]):
            raise XLMUserError(
                f"{checkpoint_file}: a classifier (xlm_classification); load it with XLMModel.from_pretrained "
                "or XLMClassificationHubInterface.from_pretrained, which classify"
            )
        return cls(x["args"], x["task"], x["models"][0], model_dir=path)

    def translate(self, *args, **kwargs):
        raise XLMUserError(f"{self.model_dir or 'this model'}: {NOT_A_TRANSLATION_MODEL}")

    sample = generate = translate

    # ---- helpers ----------------------------------------------------------------------------

    @property
    def device(self):
        return next(self.model.parameters()).device

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            raise XLMUserError(
                self._tokenizer_error
                or f"no text pipeline: no {layout.PIPELINE_FILE} in {', '.join(self._tokenizer_dirs)}"
            )
        return self._tokenizer

    def _check_lang(self, lang: str) -> int:
        if lang not in self.lang2id:
            raise XLMUserError(f"language '{lang}' is not one of the model's: {','.join(self.langs)}")
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
            raise XLMUserError(f"decode takes one sentence (1-D tokens), got shape {tuple(tokens.shape)}")
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
            raise XLMUserError(f"tokens must be 1-D or 2-D, got shape {tuple(tokens.shape)}")
        max_pos = self.model.lm.max_positions
        if tokens.size(1) > max_pos:
            raise XLMUserError(f"{tokens.size(1)} tokens; the model takes at most {max_pos}")
        if langs is None:
            if self.model.lm.use_lang_emb:
                raise XLMUserError(
                    f"this model has language embeddings: give langs (one of {','.join(self.langs)}, or ids)"
                )
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
                raise XLMUserError(
                    f"langs of shape {tuple(lang_ids.shape)} do not fit tokens of shape {tuple(tokens.shape)}"
                )
        if lang_ids is not None and lang_ids.numel() and (lang_ids.min() < 0 or lang_ids.max() >= len(self.langs)):
            raise XLMUserError(f"language ids must lie in 0..{len(self.langs) - 1} ({','.join(self.langs)})")
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

    def fill_mask(self, text, lang: str, topk: int = 5):
        """Fill the one ``<mask>`` in ``text`` with each of the ``topk`` most probable vocabulary
        entries: [(filled sentence, probability, entry)], most probable first (a list of texts: such
        a list each). Special symbols (``<s> <pad> </s> <unk>``, the mask) are never proposed."""
        texts, single = text_batch(text, "text")
        results = [self._fill_one_mask(t, lang, topk) for t in texts]
        return results[0] if single else results

    @torch.no_grad()
    def _fill_one_mask(self, text: str, lang: str, topk: int) -> List[Tuple[str, float, str]]:
        if text.count(MASK_TEXT) != 1:
            raise XLMUserError(f"fill_mask needs exactly one {MASK_TEXT} in the text, found {text.count(MASK_TEXT)}")
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
