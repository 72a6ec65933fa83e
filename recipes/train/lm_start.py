"""``recipes/train.sh --lm DIR``: a run that starts from a pretrained LM of ours instead of from nothing. The LM
fixes the vocabulary, the text pipeline and the model's size; every language of the run must be one of its
languages (a new one is added first: ``xlm-fairseq-convert LM OUT --add-lang LANG --text FILE``)."""

import os
from pathlib import Path
from typing import Dict, List

from preprocess.errors import UserError
from preprocess.files import file_sha256
from recipes.train.plan import ModelSize, parse_size


class LMStart:
    def __init__(self, path: str):
        from xlm_fairseq.assets import PretrainedCheckpoint
        from xlm_fairseq.errors import XLMUserError

        try:
            self.ckpt = PretrainedCheckpoint(path)
        except XLMUserError as e:
            raise UserError(f"--lm: {e}") from None
        self.path = self.ckpt.path
        if any(k.startswith("decoder.") for k in self.ckpt.state["model"]):
            raise UserError(f"--lm {path}: a translation model; --lm takes a pretrained LM (cross_lingual_lm)")
        self.langs: List[str] = self.ckpt.langs
        self.settings = self.ckpt.assets.pipeline_settings()
        if self.settings is None or self.settings.subwords != "sentencepiece":
            raise UserError(f"--lm {path}: no sentencepiece text pipeline in it or beside it")
        model = (self.ckpt.state.get("cfg") or {}).get("model") or {}
        self.dim, self.layers = model.get("encoder_embed_dim"), model.get("encoder_layers")
        self.heads = model.get("encoder_attention_heads")
        if not (self.dim and self.layers and self.heads) or model.get("encoder_ffn_embed_dim") != 4 * self.dim:
            raise UserError(f"--lm {path}: not a model train.sh can continue (it trains FFNs of 4 x dim)")
        self.digest = file_sha256(self.path)[:16]

    def check_langs(self, langs: List[str]) -> None:
        missing = [lang for lang in langs if lang not in self.langs]
        if missing:
            raise UserError(
                f"--lm {self.path}: pretrained on {','.join(self.langs)}, not {','.join(missing)}; add a language "
                f"first: xlm-fairseq-convert {self.path} OUT --add-lang {missing[0]} --text FILE, then --lm OUT"
            )

    def size(self) -> ModelSize:
        return parse_size(f"{self.dim}x{self.layers}")

    def vocab_files(self, directory: Path) -> Dict[str, str]:
        """The LM's subword model and dict.txt as files (written into ``directory``): preprocess's
        ``--spm-model``/``--dict``."""
        pipeline = self.ckpt.assets.pipeline()
        dictionary, _ = self.ckpt.assets.dictionary()
        directory.mkdir(parents=True, exist_ok=True)
        dict_path = directory / "dict.txt"
        dictionary.save(str(dict_path))
        return {"--spm-model": os.path.abspath(pipeline.model_path), "--dict": str(dict_path)}
