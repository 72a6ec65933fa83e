"""The text pipeline (``preprocess/pipeline.py``) as fairseq's tokenizer and BPE, ``--tokenizer xlm``
and ``--bpe xlm``: fairseq-interactive and fairseq-generate encode and decode exactly as
``preprocess/`` encoded the data-bin. The XLM tasks build both by default from the settings stored
in the checkpoint (or the data-bin), so no flag is needed; with another task, ``--xlm-pipeline DIR``
names the data-bin or model directory."""

from dataclasses import dataclass, field
from typing import Optional

from fairseq.data.encoders import register_bpe, register_tokenizer
from fairseq.dataclass import FairseqDataclass

from preprocess.pipeline import TextPipeline, require_pipeline
from preprocess.text import detokenize
from xlm_fairseq.errors import XLMUserError


@dataclass
class XLMPipelineConfig(FairseqDataclass):
    xlm_pipeline: str = field(
        default="", metadata={"help": "data-bin or model directory holding text_pipeline.json and its subword model"}
    )
    source_lang: Optional[str] = field(default=None, metadata={"help": "source language"})
    target_lang: Optional[str] = field(default=None, metadata={"help": "target language"})


@register_tokenizer("xlm", dataclass=XLMPipelineConfig)
class XLMWordTokenizer:
    """Words: normalisation, Moses tokenisation, Romanian handling and lowercasing as stored.
    Encodes in the source language, decodes (Moses detokenisation) in the target language."""

    name = "xlm"

    def __init__(self, cfg: XLMPipelineConfig, pipeline: Optional[TextPipeline] = None):
        self.pipeline = pipeline or require_pipeline(cfg.xlm_pipeline, "--xlm-pipeline")
        self.source_lang = cfg.source_lang
        self.target_lang = cfg.target_lang

    @classmethod
    def for_pipeline(cls, pipeline: TextPipeline, source_lang: Optional[str], target_lang: Optional[str]):
        return cls(XLMPipelineConfig(source_lang=source_lang, target_lang=target_lang), pipeline)

    def _lang(self, lang: Optional[str], option: str) -> str:
        if not lang:
            raise XLMUserError(f"the text pipeline needs the language: give {option}")
        return lang

    def encode(self, x: str) -> str:
        return self.pipeline.tokenize(x, self._lang(self.source_lang, "-s SRC"))

    def decode(self, x: str) -> str:
        return detokenize(x, self._lang(self.target_lang, "-t TGT"))


@register_bpe("xlm", dataclass=XLMPipelineConfig)
class XLMSubwords:
    """Subwords: the data-bin's sentencepiece model or XLM's fastBPE codes."""

    name = "xlm"

    def __init__(self, cfg: XLMPipelineConfig, pipeline: Optional[TextPipeline] = None):
        self.pipeline = pipeline or require_pipeline(cfg.xlm_pipeline, "--xlm-pipeline")

    @classmethod
    def for_pipeline(cls, pipeline: TextPipeline):
        return cls(XLMPipelineConfig(), pipeline)

    def encode(self, x: str) -> str:
        return " ".join(self.pipeline.split(x))

    def decode(self, x: str) -> str:
        return self.pipeline.join_text(x)  # fairseq-generate --post-process may have joined them already
