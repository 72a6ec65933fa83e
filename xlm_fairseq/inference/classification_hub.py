"""Classify from Python with a model fine-tuned by ``--task xlm_classification``::

    from xlm_fairseq import XLMModel
    clf = XLMModel.from_pretrained("ckpt/xcls", checkpoint_file="checkpoint_best.pt")   # the save dir alone
    clf.classify(["Ein Texteditor für Programmierer.", "Ein Spiel."], "de")   # -> a label each
    clf.classify("A text editor.", "en", probs=True)                        # -> {label: probability}
    clf.classify(premises, "fr", texts_b=hypotheses)                         # sentence pairs (XNLI)

The checkpoint carries the dictionary, the text pipeline with its subword model, the languages
and the label set, so no data directory is needed. Rows are encoded exactly as in training
(``XLMClassificationTask.encode_rows``) and batched by length."""

from typing import Dict, List, Optional, Sequence, Union

import torch

from preprocess import layout
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.inference.hub import XLMHubInterface, is_classifier, load_checkpoint, text_batch


class XLMClassificationHubInterface(XLMHubInterface):
    """A loaded classifier (eval mode, no gradients): :meth:`classify`, and the LM hub's
    ``encode``/``extract_features`` on its fine-tuned stack."""

    def __init__(self, cfg, task, model, model_dir: Optional[str] = None):
        super().__init__(cfg, task, model, model_dir=model_dir)
        self.labels: List[str] = list(task.labels)

    @classmethod
    def from_pretrained(
        cls, model_name_or_path, checkpoint_file=layout.MODEL_FILE, data_name_or_path=".", lang_id=None, **kwargs
    ):
        """``lang_id``: the language id of every row (``own`` or a language), instead of the
        ``--lang-id`` the classifier was fine-tuned with (a checkpoint's stored settings take no
        fairseq override for an option newer than the checkpoint, so it is set on the task here)."""
        x, path = load_checkpoint(model_name_or_path, checkpoint_file, data_name_or_path, **kwargs)
        if not is_classifier(x["models"][0]):
            raise XLMUserError(
                f"{checkpoint_file}: not a classifier (xlm_classification); load it with XLMModel.from_pretrained, "
                "or fine-tune one with --task xlm_classification --pretrained-xlm-checkpoint"
            )
        if lang_id is not None:
            x["task"].cfg.lang_id = lang_id
            x["task"].model_lang_id(x["task"].langs[0])  # one clear line for a language the model lacks
        return cls(x["args"], x["task"], x["models"][0], model_dir=path)

    def predict(self, tokens, langs=None):
        raise XLMUserError("a classifier has no word predictions; use classify(), or extract_features()")

    def fill_mask(self, *args, **kwargs):
        raise XLMUserError("a classifier has no word predictions (fill_mask needs a pretrained LM)")

    @torch.no_grad()
    def probabilities(
        self, texts: Sequence[str], lang: str, texts_b: Optional[Sequence[str]] = None, max_tokens: int = 4096
    ) -> torch.Tensor:
        """Label probabilities, len(texts) x len(labels), in the order of ``texts``."""
        self._check_lang(lang)
        lang_id = self.task.model_lang_id(lang)  # the row's own, or the one --lang-id gives every row
        if (texts_b is not None) != self.task.pairs:
            raise XLMUserError(
                "this classifier reads sentence pairs: give texts_b="
                if self.task.pairs
                else "this classifier reads single texts: give no texts_b"
            )
        if texts_b is not None and len(texts_b) != len(texts):
            raise XLMUserError(f"texts_b has {len(texts_b)} entries for {len(texts)} texts")
        rows, _ = self.task.encode_rows(list(texts), None if texts_b is None else list(texts_b), lang)
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        out = torch.empty(len(rows), len(self.labels))
        pad, start = self.dictionary.pad(), 0
        while start < len(order):
            width, end = len(rows[order[start]]), start + 1  # rows are sorted: the last is the widest
            while end < len(order) and len(rows[order[end]]) * (end - start + 1) <= max(max_tokens, width):
                end += 1
            batch = [rows[i] for i in order[start:end]]
            tokens = torch.full((len(batch), len(batch[-1])), pad, dtype=torch.long)
            for i, row in enumerate(batch):
                tokens[i, : len(row)] = torch.as_tensor(row)
            tokens = tokens.to(self.device)
            langs = torch.full((len(batch),), lang_id, dtype=torch.long, device=self.device)
            logits, _ = self.model(tokens, src_langs=langs)
            out[order[start:end]] = logits.float().softmax(-1).cpu()
            start = end
        return out

    def classify(
        self,
        texts: Union[str, Sequence[str]],
        lang: str,
        texts_b: Union[None, str, Sequence[str]] = None,
        probs: bool = False,
        max_tokens: int = 4096,
    ) -> Union[str, Dict[str, float], List[str], List[Dict[str, float]]]:
        """The label of each text (sentence pair with ``texts_b``) in ``lang``; with ``probs``, a
        dict label -> probability instead. A string gives one answer, a list a list."""
        texts, single = text_batch(texts, "texts")
        if texts_b is not None:
            texts_b, single_b = text_batch(texts_b, "texts_b")
            if single_b != single:
                raise XLMUserError("give texts and texts_b alike: both strings, or both lists")
        p = self.probabilities(texts, lang, texts_b, max_tokens)
        if probs:
            answers = [dict(zip(self.labels, row.tolist())) for row in p]
        else:
            answers = [self.labels[i] for i in p.argmax(-1).tolist()]
        return answers[0] if single else answers
