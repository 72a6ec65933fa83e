"""How the classification recipe (``recipe.py``) scores a classifier: its accuracy in English and German
(German read with its own language id and with the fine-tuning language's), predictions of any file, and en-de sentence
retrieval on its stack (as on an LM's)."""

import json
import sys
from pathlib import Path

from recipes.experiments.xcls import corpus
from recipes.experiments.xcls.report import FINETUNE_LANG
from recipes.train.stages import write_json, write_text

BIN = Path(sys.executable).parent  # the commands installed beside this interpreter


class ClassifierScoring:
    """A mixin of the recipe's driver: ``self.run``, ``self.work`` and ``self.xcls`` (the classification files)."""

    def classify(self, save, tsvs, lang_id, out_dir, log, *more):
        """Predictions of ``save``'s best checkpoint for ``tsvs`` into ``out_dir``, rows read with ``lang_id``."""
        self.run(
            [
                BIN / "xlm-fairseq-classify",
                save,
                *tsvs,
                "--checkpoint-file",
                "checkpoint_best.pt",
                "--lang-id",
                lang_id,
                "--out-dir",
                out_dir,
                *more,
            ],
            log,
        )

    def evaluate(self, save):
        """English and German accuracy of the best checkpoint, German read with its own language id
        (XLM) and with the fine-tuning language's (``--lang-id``); retrieval on its stack."""
        out = save / "eval.json"
        result = json.loads(out.read_text()) if out.exists() else {}
        for lang_id, files, key in (("own", ("en", "de"), "acc_de"), (FINETUNE_LANG, ("de",), "acc_de_en_id")):
            if key in result:
                continue
            suffix = "" if lang_id == "own" else f"_lang_id_{lang_id}"
            tsv = [self.xcls / f"valid.{lang}.tsv" for lang in files]
            self.classify(
                save,
                tsv,
                lang_id,
                save / f"predictions{suffix}",
                save / f"classify{suffix}.log",
                "--json",
                save / f"accuracy{suffix}.json",
            )
            scored = json.loads((save / f"accuracy{suffix}.json").read_text()).values()
            accuracy = {v["lang"]: v["accuracy"] for v in scored}  # classify records each file's language
            if lang_id == "own":
                result["acc_en"] = accuracy["en"]
            result[key] = accuracy["de"]
        if "retrieval_classifier" not in result:
            result["retrieval_classifier"] = self.retrieval(save, "checkpoint_best.pt")
        write_json(out, result)
        return result

    def retrieval_texts(self):
        """The validation descriptions, one a line (what retrieval pairs up), written once."""
        texts = self.work / "retrieval"
        for lang in ("en", "de"):
            if not (texts / f"valid.{lang}").exists():
                write_text(texts / f"valid.{lang}", corpus.texts(self.xcls / f"valid.{lang}.tsv"))
        return texts

    def retrieval(self, model_dir, checkpoint, data=None):
        result, texts = model_dir / f"retrieval.{checkpoint}.json", self.work / "retrieval"
        if not result.exists():
            self.run(
                [
                    BIN / "xlm-fairseq-retrieve",
                    model_dir / checkpoint,
                    "--data",
                    data or ".",
                    "--src",
                    f"en={texts}/valid.en",
                    "--tgt",
                    f"de={texts}/valid.de",
                    "--json",
                    result,
                ],
                model_dir / f"retrieval.{checkpoint}.log",
            )
        return json.loads(result.read_text())
