"""Translate text files, or standard input, with a translation model::

    xlm-fairseq-translate MODEL_DIR -s de -t en [FILE ...] [-o OUT]

Text of any length: each line is cut into sentences and put back with its line breaks, blank lines
and spacing (the hub's ``translate``, ``documents.py``). Files are translated in order, with a
progress bar; without files, standard input (a terminal line by line). The output goes to standard
output, or to ``-o OUT``, written whole or not at all and never over an input."""

import os
import sys
from typing import Iterator, List, Optional

from preprocess.errors import ArgumentParser, UserError, run_command
from preprocess.files import atomic_write
from preprocess.inputs import chunks  # runs of lines: a sentence never spans a line break, so each translates alone


def read_lines(path: str) -> List[str]:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read().splitlines(keepends=True)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: a directory, not a text file") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text (byte {e.start})") from None


def stdin_lines(interactive: bool) -> Iterator[str]:
    stream = open(sys.stdin.fileno(), encoding="utf-8", errors="strict", newline="", closefd=False)
    try:
        yield from (iter(stream.readline, "") if interactive else stream)
    except UnicodeDecodeError as e:
        raise UserError(f"standard input: not UTF-8 text (byte {e.start})") from None


def main(argv=None) -> int:
    p = ArgumentParser(
        name="translate",
        prog="xlm-fairseq-translate",
        description=__doc__.split("\n\n")[0],
        intermixed=True,  # files before or after the options
        examples=[
            "xlm-fairseq-translate runs/quickstart/model -s de -t en handbuch.txt -o manual.txt",
            "echo 'Hallo Welt. Wie geht es?' | xlm-fairseq-translate runs/quickstart/model -s de -t en",
        ],
    )
    add_translator_options(p)
    p.add_argument("files", nargs="*", metavar="FILE", help="UTF-8 text files (default: standard input)")
    p.add_argument("-s", "--source-lang", required=True, help="the language of the text")
    p.add_argument("-t", "--target-lang", required=True, help="the language to translate into")
    p.add_argument("-o", "--output", help="write the translation here (default: standard output)")
    p.add_argument("--lines", type=int, default=200, help="lines translated in one batch (default: %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    def run(argv):
        args = p.parse_args(argv)
        if args.beam < 1 or args.lines < 1:
            raise UserError(f"--beam {args.beam} / --lines {args.lines}: give numbers of at least 1")
        if args.output and any(_same_file(args.output, f) for f in args.files):
            raise UserError(f"-o {args.output}: is one of the input files; give another path")
        texts = [read_lines(path) for path in args.files]  # every input read before the model loads
        hub = load_translator(args)
        hub.translate("", src=args.source_lang, tgt=args.target_lang)  # the direction checked before any output
        with _output(args.output) as out:
            if args.files:
                _translate_files(hub, args, texts, out)
            else:
                interactive = sys.stdin.isatty()
                for block in chunks(stdin_lines(interactive), 1 if interactive else args.lines):
                    out.write(_translate(hub, args, block))
                    out.flush()
        return 0

    return run_command("translate", run, argv)


def _translate(hub, args, lines: List[str]) -> str:
    return hub.translate("".join(lines), src=args.source_lang, tgt=args.target_lang, beam=args.beam, engine=args.engine)


def _translate_files(hub, args, texts: List[List[str]], out) -> None:
    from tqdm import tqdm

    total = sum(map(len, texts))
    with tqdm(total=total, unit="line", disable=args.quiet or total == 0, file=sys.stderr) as bar:
        for lines in texts:
            for block in chunks(lines, args.lines):
                out.write(_translate(hub, args, block))
                bar.update(len(block))


def add_translator_options(p) -> None:
    """The model and decoding options of the commands that translate with a model (this one and
    ``xlm-fairseq-serve``); :func:`load_translator` reads them."""
    p.add_argument("model", help="a model directory (xlm-fairseq-export's, or a run's model/) or a checkpoint")
    p.add_argument("--checkpoint-file", default="model.pt", help="in the model directory (default: %(default)s)")
    p.add_argument("--beam", type=int, default=5, help="beam size (default: %(default)s)")
    p.add_argument(
        "--engine",
        choices=("fairseq", "ctranslate2"),
        help="default: ctranslate2 where the model directory holds one for the direction, else fairseq",
    )
    p.add_argument("--cpu", action="store_true", help="stay on the CPU even if a GPU is there")


def load_translator(args):
    """The translation hub of :func:`add_translator_options`' arguments, on the GPU where there is one."""
    import torch

    from xlm_fairseq.inference import XLMTranslationHubInterface

    hub = XLMTranslationHubInterface.from_pretrained(args.model, checkpoint_file=args.checkpoint_file)
    if torch.cuda.is_available() and not args.cpu:
        hub.cuda()
    return hub


class _output:
    """Standard output, or ``path`` written whole when the translation ends without error."""

    def __init__(self, path: Optional[str]):
        self.path = path
        self.writer = None

    def __enter__(self):
        if self.path is None:
            return sys.stdout
        self.writer = atomic_write(self.path)
        return self.writer.__enter__()

    def __exit__(self, *exc):
        return self.writer.__exit__(*exc) if self.writer else False


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(main())
