"""A self-contained model directory from a training checkpoint: the weights and config, ``dict.txt``,
the text pipeline (``text_pipeline.json`` and its subword model) and a model card (``README.md``:
``model_card.py``), so that ``XLMModel.from_pretrained(OUT_DIR)`` needs no data-bin. It takes LMs and
translation models::

    xlm-fairseq-export ckpt/unmt/checkpoint_best.pt models/unmt-de-en [--data DATA] [--force]
    xlm-fairseq-export ckpt/unmt/checkpoint_best.pt models/unmt-de-en --ctranslate2 --quantization int8

With ``--ctranslate2`` a translation model also gets one CTranslate2 model per direction
(``ctranslate2/SRC-TGT``, ``--directions`` or every pair of its languages), which
``XLMModel.from_pretrained(OUT_DIR).translate`` then uses (``inference/ctranslate2_models.py``).
With ``--hf`` it gets one Hugging Face ``transformers`` model and tokenizer per direction
(``hf/SRC-TGT``, ``--directions`` too), which need neither fairseq nor this package
(``inference/hf_translators.py``).
The optimizer state is left out (a third of a checkpoint's size with Adam's two moments). OUT_DIR
appears whole or not at all; an existing one is replaced only with ``--force``."""

import os
import shutil
import sys
from typing import Optional

from fairseq.checkpoint_utils import torch_persistent_save

from preprocess.errors import ArgumentParser, run_command
from preprocess.files import check_out_dir, staged_out_dir
from preprocess.layout import DICT_FILE, MODEL_FILE
from preprocess.pipeline import write_settings
from xlm_fairseq.assets import PretrainedCheckpoint
from xlm_fairseq.data.dictionary import dictionary_digest
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.inference.ctranslate2_models import QUANTIZATIONS, parse_directions, write_ctranslate2
from xlm_fairseq.inference.model_card import checkpoint_card, write_card


def export_model_dir(
    checkpoint: str,
    out_dir: str,
    data: Optional[str] = None,
    force: bool = False,
    ctranslate2: bool = False,
    quantization: Optional[str] = None,
    directions: Optional[str] = None,
    hf: bool = False,
) -> str:
    """Write OUT_DIR (see the module's doc); returns its absolute path."""
    if not os.path.isfile(checkpoint):
        raise XLMUserError(f"{checkpoint}: no such checkpoint")
    check_out_dir(out_dir, force, src=checkpoint)
    ckpt = PretrainedCheckpoint(checkpoint, data)
    state, cfg = ckpt.state, ckpt.state.get("cfg")
    if not isinstance(cfg, dict):
        raise XLMUserError(f"{checkpoint}: not a fairseq checkpoint of xlm_fairseq (no cfg)")
    settings = ckpt.assets.pipeline_settings()
    if settings is None:
        raise XLMUserError(
            f"{checkpoint}: no text pipeline in it nor in {', '.join(ckpt.assets.dirs)}; give --data DATA"
        )
    pipeline = ckpt.assets.pipeline()
    dictionary, where = ckpt.assets.dictionary()
    if dictionary is None:
        raise XLMUserError(
            f"no {DICT_FILE} in {', '.join(ckpt.assets.dirs)}; give --data DATA (the data-bin it was trained on)"
        )
    remedy = "give --data DATA (the data-bin it was trained on)"
    ckpt.assets.check_dictionary(dictionary, where, rows=ckpt.embedding_rows, remedy=remedy)
    task_state = dict(ckpt.task_state, text_pipeline=settings.to_dict())
    task_state.setdefault("dictionary_sha256", dictionary_digest(dictionary))
    if ctranslate2:
        model_cfg = cfg.get("model") or {}
        heads = {model_cfg.get("encoder_attention_heads"), model_cfg.get("decoder_attention_heads")}
        if not any(k.startswith("decoder.") for k in state["model"]):
            raise XLMUserError(f"{checkpoint}: --ctranslate2 exports translation models (translation_lm), not this one")
        if len(heads) != 1 or None in heads:
            raise XLMUserError(f"{checkpoint}: --ctranslate2 needs one number of attention heads on both sides")
        pairs = parse_directions(directions, ckpt.langs)
    if (quantization and not ctranslate2) or (directions and not (ctranslate2 or hf)):
        raise XLMUserError("--quantization and --directions go with --ctranslate2 (--directions also with --hf)")
    if hf:
        from xlm_fairseq.inference import hf_translators

        hf_translators.check_exportable(state["model"], cfg.get("model") or {}, checkpoint)
        pairs = parse_directions(directions, ckpt.langs)
    out_dir = os.path.abspath(out_dir)
    state = dict(state, last_optimizer_state=None, task_state=task_state)
    state["cfg"] = dict(cfg, task=dict(cfg.get("task") or {}, data=out_dir))
    with staged_out_dir(out_dir, force) as tmp:
        dictionary.save(os.path.join(tmp, DICT_FILE))
        shutil.copyfile(pipeline.model_path, os.path.join(tmp, settings.subword_model))
        write_settings(tmp, settings)
        torch_persistent_save(state, os.path.join(tmp, MODEL_FILE))
        if ctranslate2:
            write_ctranslate2(state["model"], heads.pop(), ckpt.langs, dictionary.symbols, tmp, pairs, quantization)
        if hf:
            hf_translators.write_hf(state, ckpt.langs, dictionary.symbols, pipeline, tmp, pairs)
        translation = any(k.startswith("decoder.") for k in state["model"])
        served = parse_directions(directions, ckpt.langs) if translation else []
        write_card(tmp, checkpoint_card(state, ckpt.langs, served, len(dictionary) - dictionary.nspecial))
    return out_dir


def main(argv=None) -> int:
    p = ArgumentParser(
        name="export",
        prog="xlm-fairseq-export",
        description=__doc__.split("\n\n")[0],
        examples=[
            "xlm-fairseq-export ckpt/unmt/checkpoint_best.pt models/unmt-de-en",
            "xlm-fairseq-export ckpt/unmt/checkpoint_best.pt models/unmt-de-en --ctranslate2 --quantization int8",
        ],
    )
    p.add_argument("checkpoint", help="a checkpoint of fairseq-train with --user-dir xlm_fairseq")
    p.add_argument("out_dir", metavar="OUT_DIR", help="the model directory to write (appears whole or not at all)")
    p.add_argument("--data", help="the data-bin it was trained on (default: the one its config names)")
    p.add_argument("--force", action="store_true", help="replace an existing OUT_DIR")
    p.add_argument(
        "--ctranslate2", action="store_true", help="also a CTranslate2 model per direction (a translation model)"
    )
    p.add_argument("--quantization", choices=QUANTIZATIONS, help="CTranslate2 weights (default: float32)")
    p.add_argument("--hf", action="store_true", help="also a Hugging Face transformers model per direction")
    p.add_argument("--directions", metavar="SRC-TGT,...", help="CTranslate2 / --hf directions (default: every pair)")

    def run(argv):
        args = p.parse_args(argv)
        out = export_model_dir(
            args.checkpoint,
            args.out_dir,
            args.data,
            args.force,
            args.ctranslate2,
            args.quantization,
            args.directions,
            args.hf,
        )
        print(f"export: wrote {out}")
        return 0

    return run_command("export", run, argv)


if __name__ == "__main__":
    sys.exit(main())
