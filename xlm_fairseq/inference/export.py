"""A self-contained model directory from a training checkpoint: the weights and config, ``dict.txt``
and the text pipeline (``text_pipeline.json`` and its subword model), so that
``XLMModel.from_pretrained(OUT_DIR)`` needs no data-bin. Works for LMs and translation models::

    xlm-fairseq-export ckpt/unmt/checkpoint_best.pt models/unmt-de-en [--data DATA] [--force]

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
from preprocess.pipeline import PipelineSettings, load_pipeline, read_settings, write_settings
from xlm_fairseq.data.dictionary import dictionary_digest, load_dictionary
from xlm_fairseq.errors import XLMUserError
from xlm_fairseq.patches import safe_load


def export_model_dir(checkpoint: str, out_dir: str, data: Optional[str] = None, force: bool = False) -> str:
    """Write OUT_DIR (see the module's doc); returns its absolute path."""
    if not os.path.isfile(checkpoint):
        raise XLMUserError(f"{checkpoint}: no such checkpoint")
    check_out_dir(out_dir, force, src=checkpoint)
    state = safe_load.load(checkpoint)
    if not (isinstance(state, dict) and isinstance(state.get("cfg"), dict) and "model" in state):
        raise XLMUserError(f"{checkpoint}: not a fairseq checkpoint of xlm_fairseq (no cfg/model)")
    cfg = state["cfg"]
    trained_on = str((cfg.get("task") or {}).get("data") or "").split(os.pathsep)[0]
    dirs = [d for d in (data, os.path.dirname(os.path.abspath(checkpoint)), trained_on) if d]
    stored = (state.get("task_state") or {}).get("text_pipeline")
    if stored:
        settings = PipelineSettings.from_dict(stored, f"{checkpoint}: its text pipeline")
    else:  # a checkpoint from before pipelines were stored: the data-bin's
        settings = next((s for s in (read_settings(d) for d in dirs if os.path.isdir(d)) if s is not None), None)
        if settings is None:
            raise XLMUserError(f"{checkpoint}: no text pipeline in it nor in {', '.join(dirs)}; give --data DATA")
    pipeline = load_pipeline(dirs, settings)
    dict_dir = next((d for d in dirs if os.path.isfile(os.path.join(d, DICT_FILE))), None)
    if dict_dir is None:
        raise XLMUserError(f"no {DICT_FILE} in {', '.join(dirs)}; give --data DATA (the data-bin it was trained on)")

    task_state = dict(state.get("task_state") or {}, text_pipeline=settings.to_dict())
    digest = dictionary_digest(load_dictionary(os.path.join(dict_dir, DICT_FILE)))
    if task_state.setdefault("dictionary_sha256", digest) != digest:
        raise XLMUserError(
            f"{os.path.join(dict_dir, DICT_FILE)}: not the dictionary the model was trained with; give --data DATA "
            "(the data-bin it was trained on)"
        )
    out_dir = os.path.abspath(out_dir)
    state = dict(state, last_optimizer_state=None, task_state=task_state)
    state["cfg"] = dict(cfg, task=dict(cfg.get("task") or {}, data=out_dir))
    with staged_out_dir(out_dir, force) as tmp:
        shutil.copyfile(os.path.join(dict_dir, DICT_FILE), os.path.join(tmp, DICT_FILE))
        shutil.copyfile(pipeline.model_path, os.path.join(tmp, settings.subword_model))
        write_settings(tmp, settings)
        torch_persistent_save(state, os.path.join(tmp, MODEL_FILE))
    return out_dir


def main(argv=None) -> int:
    p = ArgumentParser(name="export", description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint", help="a checkpoint of fairseq-train with --user-dir xlm_fairseq")
    p.add_argument("out_dir", metavar="OUT_DIR")
    p.add_argument("--data", help="the data-bin it was trained on (default: the one its config names)")
    p.add_argument("--force", action="store_true", help="replace an existing OUT_DIR")

    def run(argv):
        args = p.parse_args(argv)
        out = export_model_dir(args.checkpoint, args.out_dir, args.data, args.force)
        print(f"export: wrote {out}")
        return 0

    return run_command("export", run, argv)


if __name__ == "__main__":
    sys.exit(main())
