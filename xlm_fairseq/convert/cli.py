"""The converter's entry points: what SRC is, which conversion runs, and the command line."""

import logging
import os
import warnings
from typing import Optional

from preprocess.errors import ArgumentParser, run_command
from preprocess.files import check_out_dir
from preprocess.layout import MODEL_FILE
from xlm_fairseq.convert import hf_hub
from xlm_fairseq.convert.from_hf import read_hf_dir
from xlm_fairseq.convert.from_xlm import read_xlm_pth
from xlm_fairseq.convert.source import _is_xlm_pth, _load_checkpoint
from xlm_fairseq.convert.to_fairseq import _NOISY_LOGGERS, write_fairseq_dir
from xlm_fairseq.convert.to_hf import export_hf
from xlm_fairseq.errors import XLMUserError


def detect_source(src: str):
    """(kind, content): kind 'hf', 'xlm_pth' or 'fairseq' (our own checkpoint), content the loaded
    file for a file SRC (else None); XLMUserError for anything else."""
    if not os.path.exists(src):
        raise XLMUserError(f"{src}: no such file or directory")
    if os.path.isdir(src):
        if os.path.isfile(os.path.join(src, "config.json")):
            return "hf", None
        if os.path.isfile(os.path.join(src, MODEL_FILE)):
            return "fairseq", None
        raise XLMUserError(
            f"{src}: neither a Hugging Face XLM directory (no config.json) nor a converted model (no {MODEL_FILE})"
        )
    ckpt = _load_checkpoint(src)
    if _is_xlm_pth(ckpt):
        return "xlm_pth", ckpt
    if isinstance(ckpt, dict) and "cfg" in ckpt and "model" in ckpt:
        return "fairseq", ckpt
    raise XLMUserError(f"{src}: not an XLM .pth (keys model, params, dico_id2word) nor an xlm_fairseq checkpoint")


def convert_hf(
    src: str,
    out: str,
    langs: Optional[str] = None,
    force: bool = False,
    lowercase: Optional[bool] = None,
    codes: Optional[str] = None,
) -> str:
    """HF XLM directory -> xlm_fairseq OUT_DIR."""
    check_out_dir(out, force, src)
    return write_fairseq_dir(read_hf_dir(src, langs, lowercase, codes), out, force)


def convert_xlm_pth(
    src: str,
    out: str,
    langs: Optional[str] = None,
    force: bool = False,
    lowercase: Optional[bool] = None,
    codes: Optional[str] = None,
    _ckpt=None,
) -> str:
    """Original XLM ``.pth`` -> xlm_fairseq OUT_DIR."""
    check_out_dir(out, force, src)
    return write_fairseq_dir(read_xlm_pth(src, langs, lowercase, codes, _ckpt), out, force)


def convert(
    src: str,
    out: str,
    to: str = "fairseq",
    langs: Optional[str] = None,
    force: bool = False,
    lowercase: Optional[bool] = None,
    codes: Optional[str] = None,
) -> str:
    check_out_dir(out, force, src)
    if to == "hf":
        if not os.path.exists(src):
            raise XLMUserError(f"{src}: no such file or directory")
        return export_hf(src, out, force)
    if hf_hub.is_repo_id(src):
        src = hf_hub.download(src)
    kind, ckpt = detect_source(src)
    if kind == "fairseq":
        raise XLMUserError(
            f"{src}: already an xlm_fairseq checkpoint (--to hf exports it; "
            "xlm-fairseq-export makes a model dir with its text pipeline)"
        )
    if kind == "hf":
        return convert_hf(src, out, langs, force, lowercase, codes)
    return convert_xlm_pth(src, out, langs, force, lowercase, codes, _ckpt=ckpt)


def main(argv=None):
    return run_command(None, _run, argv)


def _run(argv):
    parser = ArgumentParser(
        prog="python -m xlm_fairseq.convert",
        description="Convert an original XLM .pth or a Hugging Face XLM directory to an xlm_fairseq "
        "model directory (--to fairseq), or an xlm_fairseq checkpoint to a Hugging Face directory (--to hf).",
    )
    parser.add_argument(
        "src",
        metavar="SRC",
        help="XLM .pth, HF XLM directory, Hugging Face model id (owner/name[@revision], fetched with "
        "huggingface_hub), or (--to hf) our model.pt / its directory",
    )
    parser.add_argument("out_dir", metavar="OUT_DIR", help="directory to create")
    parser.add_argument("--to", choices=("fairseq", "hf"), default="fairseq", help="target format (default: fairseq)")
    parser.add_argument("--langs", help="languages in id order, e.g. en,de (only if SRC names none)")
    parser.add_argument("--codes", metavar="FILE", help="fastBPE codes of the model (original .pth files carry none)")
    parser.add_argument(
        "--lowercase",
        choices=("yes", "no"),
        help="the model's text is lowercased and accent-stripped (default: what its vocabulary shows: "
        "yes if no entry has an uppercase letter, as for XLM's XNLI-15 models; no for the cased MT models)",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing non-empty OUT_DIR")
    args = parser.parse_args(argv)
    for name in _NOISY_LOGGERS:  # a command line: keep stderr for errors
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=r"(?s).*(hydra|ConfigStore|strict flag|package header)")
    lowercase = None if args.lowercase is None else args.lowercase == "yes"
    out = convert(args.src, args.out_dir, args.to, args.langs, args.force, lowercase, args.codes)
    print(f"wrote {out}")
    return 0
