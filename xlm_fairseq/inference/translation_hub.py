"""Translate from Python with a ``translation_lm`` model: fairseq's ``GeneratorHubInterface`` (beam
search, sampling, n-best, batching, ``.cuda()``/``.half()``) with the model's own text pipeline.

::

    from xlm_fairseq import XLMModel
    mt = XLMModel.from_pretrained("ckpt/unmt", checkpoint_file="checkpoint_best.pt", data_name_or_path="DATA")
    mt.translate("Hallo Welt!", src="de", tgt="en")                          # -> str
    mt.translate(["Satz eins.", "Satz zwei."], src="de", tgt="en", beam=5)   # -> list of str
    mt.translate("Erster Absatz. Zwei Sätze.\n\nZweiter Absatz.", src="de", tgt="en")  # paragraphs kept
    mt.sample("Hallo Welt!", src="de", tgt="en", sampling=True, sampling_topk=10)
    best = mt.generate(mt.encode("Hallo Welt!", "de"), src="de", tgt="en", beam=5)  # n-best dicts
    mt.decode(best[0]["tokens"], "en")

A model directory made by ``xlm-fairseq-export`` (checkpoint, ``dict.txt``, the pipeline's
files) loads without ``data_name_or_path``. Text goes through exactly the pipeline of the data-bin
the model was trained on (``preprocess/pipeline.py``, stored in the checkpoint)."""

import contextlib
from typing import List, Optional

import torch
from fairseq.hub_utils import GeneratorHubInterface

from preprocess import layout, segment
from xlm_fairseq.data.encoders import XLMSubwords, XLMWordTokenizer
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.inference.ctranslate2_models import CTranslate2Directions
from xlm_fairseq.inference.documents import translate_texts
from xlm_fairseq.inference.hub import is_translation_model, load_checkpoint, text_batch


class XLMTranslationHubInterface(GeneratorHubInterface):
    """A loaded translation model. ``src``/``tgt`` name the direction of each call; every method of
    fairseq's hub that takes generation options (``beam``, ``sampling``, ``nbest``, ``max_len_b``,
    ...) passes them to fairseq's ``SequenceGenerator``."""

    def __init__(self, cfg, task, models, model_dir: Optional[str] = None):
        super().__init__(cfg, task, models)
        self.model_dir = model_dir
        self.langs: List[str] = list(task.langs)
        self.pipeline = task.text_pipeline([model_dir] if model_dir else [])
        if self.pipeline is None:
            raise XLMUserError(
                f"no text pipeline: no {layout.PIPELINE_FILE} in {model_dir or task.data_dir}; give "
                "data_name_or_path= the data-bin the model was trained on"
            )
        # fairseq's hub builds these from --tokenizer/--bpe, which a training checkpoint has not
        self.tokenizer = XLMWordTokenizer.for_pipeline(self.pipeline, None, None)
        self.bpe = XLMSubwords.for_pipeline(self.pipeline)
        self.ctranslate2 = CTranslate2Directions(model_dir or "")  # empty unless exported with --ctranslate2
        self.eval()

    @classmethod
    def from_pretrained(cls, model_name_or_path, checkpoint_file=layout.MODEL_FILE, data_name_or_path=".", **kwargs):
        x, path = load_checkpoint(model_name_or_path, checkpoint_file, data_name_or_path, **kwargs)
        if not is_translation_model(x["models"][0]):
            raise XLMUserError(
                f"{checkpoint_file}: a pretrained LM (cross_lingual_lm), not a translation model; use "
                "XLMHubInterface for features and fill_mask, or train one with --task translation_lm "
                "--pretrained-xlm-checkpoint"
            )
        return cls(x["args"], x["task"], x["models"], model_dir=path)

    def _check_lang(self, lang: Optional[str], what: str, needed: bool) -> Optional[str]:
        if lang is None and needed:
            raise XLMUserError(f"give {what}= (one of {','.join(self.langs)})")
        if lang is not None and lang not in self.langs:
            raise XLMUserError(f"{what}={lang!r} is not one of the model's languages: {','.join(self.langs)}")
        return lang

    @contextlib.contextmanager
    def direction(self, src: Optional[str] = None, tgt: Optional[str] = None, need=("src", "tgt")):
        """Within the block, encode/generate/decode translate ``src`` -> ``tgt`` (None: as set)."""
        cfg, tok = self.task.cfg, self.tokenizer
        before = (cfg.source_lang, cfg.target_lang, tok.source_lang, tok.target_lang)
        src = self._check_lang(src if src is not None else cfg.source_lang, "src", "src" in need)
        tgt = self._check_lang(tgt if tgt is not None else cfg.target_lang, "tgt", "tgt" in need)
        if (src, tgt, src, tgt) == before:  # nested in a block of the same direction (setting cfg is slow)
            yield
            return
        cfg.source_lang, cfg.target_lang, tok.source_lang, tok.target_lang = src, tgt, src, tgt
        try:
            yield
        finally:
            cfg.source_lang, cfg.target_lang, tok.source_lang, tok.target_lang = before

    def translate(
        self,
        sentences,
        src=None,
        tgt=None,
        beam: int = 5,
        verbose: bool = False,
        engine: Optional[str] = None,
        split_sentences: bool = True,
        **kwargs,
    ):
        """Raw text (a string or a list of strings) -> detokenised translations (the same shape). Each
        string is a text of any length: cut into sentences (a long one into parts the model takes
        whole), all of them translated in one batch, and put back with the text's line breaks, blank
        lines and spacing (``documents.py``); a blank string comes back as it is. ``split_sentences=False``
        translates each string as one sentence, as fairseq-generate does (cut to the model's positions;
        a blank string gives "").
        ``engine``: ``"ctranslate2"``, the default where the model
        directory holds a CTranslate2 model of the direction (``xlm-fairseq-export --ctranslate2``),
        takes ``beam``, ``max_len_a``, ``max_len_b``, ``min_len``, ``lenpen``, ``no_repeat_ngram_size``
        and in float32 gives fairseq's tokens (greedy, and beam search at ``lenpen=0``; with length
        normalisation nearly always: ``ctranslate2_models.py`` says where they can part);
        ``"fairseq"`` (fairseq's ``SequenceGenerator``) takes every generation option."""
        with self.direction(src, tgt):
            src, tgt = self.task.cfg.source_lang, self.task.cfg.target_lang
            if self._engine(engine, src, tgt) == "fairseq":

                def translate(texts):
                    return super(XLMTranslationHubInterface, self).sample(texts, beam, verbose, **kwargs)

            else:

                def translate(texts):
                    return self._translate_ctranslate2(texts, src, tgt, beam, kwargs)

            if not split_sentences:
                return self._each_text(sentences, translate)
            texts, single = text_batch(sentences, "sentences")
            out = translate_texts(texts, src, tgt, translate, self.fits, self._segmenter(src))
            return out[0] if single else out

    def fits(self, sentence: str, lang: Optional[str] = None) -> bool:
        """Whether the model translates ``sentence`` whole: within its positions, and no longer than
        the sentences it was trained on (``--max-sentence-len``; generation stops at ``max_len_b``)."""
        limit = self.task.max_source_positions or self.models[0].encoder.max_positions()
        trained = getattr(self.task.cfg, "max_sentence_len", None)
        if trained:
            limit = min(limit, trained + 2)
        return len(self.encode(sentence, lang)) + 1 <= limit  # encode gives pieces </s>; a </s> goes first

    def _segmenter(self, lang: str):
        name = self.pipeline.settings.segmenters.get(lang)
        return segment.segmenter(name) if name else None

    def sample(self, sentences, src=None, tgt=None, beam: int = 1, verbose: bool = False, **kwargs):
        """fairseq's ``sample`` (every generation option: ``sampling``, ``sampling_topk``, ...) on a
        string or a list of strings; a blank string gives ""."""
        with self.direction(src, tgt):
            return self._each_text(
                sentences, lambda texts: super(XLMTranslationHubInterface, self).sample(texts, beam, verbose, **kwargs)
            )

    def _each_text(self, sentences, translate):
        texts, single = text_batch(sentences, "sentences")
        todo = [i for i, text in enumerate(texts) if text.strip()]
        out = [""] * len(texts)
        for i, translation in zip(todo, translate([texts[i] for i in todo]) if todo else []):
            out[i] = translation
        return out[0] if single else out

    def _engine(self, engine: Optional[str], src: str, tgt: str) -> str:
        if engine not in (None, "fairseq", "ctranslate2"):
            raise XLMUserError(f"engine={engine!r}: give 'fairseq' or 'ctranslate2'")
        if engine is None:
            return "ctranslate2" if (src, tgt) in self.ctranslate2.directions else "fairseq"
        return engine

    def _translate_ctranslate2(self, texts: List[str], src: str, tgt: str, beam: int, options: dict) -> List[str]:
        generation = self.cfg.generation
        known = {"max_len_a", "max_len_b", "min_len", "lenpen", "no_repeat_ngram_size"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise XLMUserError(
                f"engine='ctranslate2' takes beam, {', '.join(sorted(known))}; not {', '.join(unknown)} "
                "(translate with engine='fairseq')"
            )
        option = {name: options.get(name, getattr(generation, name)) for name in known}
        if self.device.type != self.ctranslate2.device:
            self.ctranslate2 = CTranslate2Directions(self.model_dir, device=self.device.type)
        dictionary = self.task.source_dictionary
        # encode gives pieces... </s>; CTranslate2 adds XLM's </s> on both sides
        pieces = [[dictionary[i] for i in self.encode(text)[:-1]] for text in texts]
        outputs = self.ctranslate2.translate(
            pieces,
            src,
            tgt,
            beam,
            option["max_len_a"],
            option["max_len_b"],
            self.models[0].max_decoder_positions(),
            min_decoding_length=option["min_len"],
            length_penalty=option["lenpen"],
            no_repeat_ngram_size=option["no_repeat_ngram_size"],
        )
        return [self.decode(torch.tensor([dictionary.index(p) for p in hypothesis])) for hypothesis in outputs]

    def generate(self, tokenized_sentences, beam: int = 5, verbose: bool = False, *, src=None, tgt=None, **kwargs):
        """Token tensors (from :meth:`encode`) -> for each, the n-best hypotheses as fairseq's
        dicts (``tokens``, ``score``, ``positional_scores``, ...)."""
        nbest = kwargs.pop("nbest", None)
        with self.direction(src, tgt):
            outputs = super().generate(tokenized_sentences, beam, verbose, **kwargs)
        if nbest is None:
            return outputs
        # fairseq's hub returns the whole beam; fairseq-generate cuts it to --nbest
        return outputs[:nbest] if outputs and isinstance(outputs[0], dict) else [h[:nbest] for h in outputs]

    def score(self, sentences, **kwargs):
        raise XLMUserError("score() is fairseq's LM scoring; for a translation model, generate with beam/nbest")

    def encode(self, sentence: str, lang: Optional[str] = None) -> torch.LongTensor:
        """Raw text in ``lang`` (default: the current source) -> ``pieces... </s>`` ids."""
        with self.direction(src=lang, need=("src",)):
            return super().encode(sentence)

    def decode(self, tokens: torch.LongTensor, lang: Optional[str] = None) -> str:
        """Ids -> detokenised text in ``lang`` (default: the current target)."""
        with self.direction(tgt=lang, need=("tgt",)):
            return super().decode(tokens)
