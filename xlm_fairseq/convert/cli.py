"""The converter's one path: :func:`~xlm_fairseq.convert.detect.detect_source` says what SRC is, the
reader of that kind makes an :class:`~xlm_fairseq.convert.lm.LM`, the writer of the target writes
OUT_DIR. Also the command line, and the entry points for a SRC whose kind the caller knows."""

import logging
import warnings
from typing import Optional

from preprocess.errors import ArgumentParser, run_command
from preprocess.files import check_out_dir
from xlm_fairseq.convert.add_language import PIECE_INITS, add_language
from xlm_fairseq.convert.detect import HF_DIR, OURS, XLM_PTH, Found, detect_source
from xlm_fairseq.convert.lm import LM
from xlm_fairseq.convert.read_hf import read_hf_dir
from xlm_fairseq.convert.read_ours import read_ours
from xlm_fairseq.convert.read_xlm import read_xlm_pth
from xlm_fairseq.convert.write_fairseq import NOISY_LOGGERS, write_fairseq_dir
from xlm_fairseq.convert.write_hf import write_hf_dir
from xlm_fairseq.errors import XLMUserError

WRITERS = {"fairseq": write_fairseq_dir, "hf": write_hf_dir}
# the kinds each target takes; the others are refused with these words
TAKES = {"fairseq": (XLM_PTH, HF_DIR), "hf": (OURS,)}
REFUSED = {
    (OURS, "fairseq"): "{path}: already an xlm_fairseq checkpoint (--to hf exports it; "
    "xlm-fairseq-export makes a model dir with its text pipeline)",
    (HF_DIR, "hf"): "{path}: a Hugging Face directory; --to hf takes an xlm_fairseq checkpoint (model.pt)",
    (XLM_PTH, "hf"): "{checkpoint_path}: an original XLM .pth; --to hf takes an xlm_fairseq checkpoint "
    "(convert with --to fairseq first)",
}


def convert(
    src: str,
    out: str,
    to: str = "fairseq",
    langs: Optional[str] = None,
    force: bool = False,
    lowercase: Optional[bool] = None,
    codes: Optional[str] = None,
) -> str:
    """SRC -> OUT_DIR in format ``to`` (fairseq: our model dir; hf: a Hugging Face directory). Returns OUT_DIR."""
    check_out_dir(out, force, src)
    found = detect_source(src, hub_ids=HF_DIR in TAKES[to])
    if found.kind not in TAKES[to]:
        raise XLMUserError(REFUSED[found.kind, to].format(**found._asdict()))
    return WRITERS[to](read(found, langs, lowercase, codes), out, force)


def read(
    found: Found, langs: Optional[str] = None, lowercase: Optional[bool] = None, codes: Optional[str] = None
) -> LM:
    """The :class:`LM` of a source of any kind (``langs``/``lowercase``/``codes``: XLM's family only)."""
    if found.kind == XLM_PTH:
        return read_xlm_pth(found.checkpoint_path, found.checkpoint, langs, lowercase, codes)
    if found.kind == HF_DIR:
        return read_hf_dir(found.path, langs, lowercase, codes)
    return read_ours(found.checkpoint_path, found.checkpoint)


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
) -> str:
    """Original XLM ``.pth`` -> xlm_fairseq OUT_DIR."""
    check_out_dir(out, force, src)
    found = detect_source(src)
    if found.kind != XLM_PTH:
        raise XLMUserError(
            f"{src}: not an original XLM checkpoint (keys model or encoder/decoder, params, dico_id2word)"
        )
    return write_fairseq_dir(read(found, langs, lowercase, codes), out, force)


def export_hf(src: str, out: str, force: bool = False) -> str:
    """xlm_fairseq LM checkpoint (file, or directory with model.pt) -> HF XLM directory."""
    return convert(src, out, "hf", force=force)


def main(argv=None):
    return run_command(None, _run, argv)


def _run(argv):
    parser = ArgumentParser(
        prog="xlm-fairseq-convert",
        description="Convert an original XLM .pth or a Hugging Face XLM directory to an xlm_fairseq "
        "model directory (--to fairseq), or an xlm_fairseq checkpoint to a Hugging Face directory (--to hf).",
        examples=[
            "xlm-fairseq-convert FacebookAI/xlm-mlm-ende-1024 models/ende",
            "xlm-fairseq-convert mlm_ende_1024.pth models/ende --codes codes_ende",
            "xlm-fairseq-convert models/ende models/ende-hf --to hf",
            "xlm-fairseq-convert models/ende models/ende-ro --add-lang ro --text ro.txt",
        ],
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
    new = parser.add_argument_group(
        "a new language (--add-lang): SRC is our pretrained LM, OUT_DIR the LM with the language added; continue "
        "pretraining from OUT_DIR/model.pt (--pretrained-xlm-checkpoint) on the old languages and the new one"
    )
    new.add_argument("--add-lang", metavar="LANG", help="the language to add, e.g. ro")
    new.add_argument("--text", action="append", default=[], metavar="FILE", help="its raw text (repeatable)")
    new.add_argument(
        "--keep-text",
        action="append",
        default=[],
        metavar="LANG=FILE",
        help="text of an old language: new pieces that would change how it segments are left out (repeatable)",
    )
    new.add_argument("--pieces", type=int, default=2000, help="pieces learnt on the new text (default 2000)")
    new.add_argument(
        "--init",
        choices=PIECE_INITS,
        default="pieces",
        help="new rows: the mean of the old pieces each new piece splits into (default), or random as XLM initialises",
    )
    new.add_argument("--lang-init", metavar="LANG", help="its language embedding starts as LANG's (default: mean)")
    args = parser.parse_args(argv)
    for name in NOISY_LOGGERS:  # a command line: keep stderr for errors
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=r"(?s).*(hydra|ConfigStore|strict flag|package header)")
    if args.add_lang:
        out = add_language(
            args.src,
            args.out_dir,
            args.add_lang,
            args.text,
            args.keep_text,
            args.pieces,
            args.init,
            args.lang_init,
            args.force,
        )
        print(f"wrote {out}")
        return 0
    if args.text or args.keep_text:
        raise XLMUserError("--text and --keep-text go with --add-lang")
    lowercase = None if args.lowercase is None else args.lowercase == "yes"
    out = convert(args.src, args.out_dir, args.to, args.langs, args.force, lowercase, args.codes)
    print(f"wrote {out}")
    return 0
