"""The one error type of ``preprocess/`` (the plugin's ``XLMUserError`` derives from it), and how a
command line reports it: one line naming the option or file, exit status 2, never a traceback."""

import argparse
import functools
import sys
from typing import Callable, Optional, Sequence


class UserError(ValueError):
    """A bad option or input: reported as one line that names the option or file, never a traceback."""


def _prefix(name: Optional[str]) -> str:
    return f"{name}: error: " if name else "error: "


class HelpFormatter(argparse.HelpFormatter):
    """argparse's, except that a paragraph with indented lines (command lines) keeps its lines."""

    def _fill_text(self, text, width, indent):
        return "\n\n".join(
            "\n".join(indent + line for line in block.splitlines())
            if any(line.startswith("  ") for line in block.splitlines())
            else super(HelpFormatter, self)._fill_text(block, width, indent)
            for block in text.split("\n\n")
        )


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line too: ``NAME: error: ... (see --help)``, exit 2.
    ``examples``: command lines that --help shows after the options; ``intermixed``: positionals may
    follow options (``CMD MODEL -s de FILE``: argparse's ``parse_intermixed_args``)."""

    def __init__(
        self,
        *args,
        name: Optional[str] = None,
        examples: Sequence[str] = (),
        intermixed: bool = False,
        **kwargs,
    ):
        if examples:
            shown = "examples:\n" + "\n".join(f"  {line}" for line in examples)
            kwargs["epilog"] = "\n\n".join(filter(None, (kwargs.get("epilog"), shown)))
        if kwargs.get("description"):  # a docstring's first paragraph: its "::" (a literal block follows) goes
            kwargs["description"] = kwargs["description"].rstrip(":")
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self.name = name
        self.intermixed = intermixed

    def parse_args(self, args=None, namespace=None):
        if self.intermixed:
            return self.parse_intermixed_args(args, namespace)
        return super().parse_args(args, namespace)

    def add_subparsers(self, **kwargs):
        kwargs.setdefault("parser_class", functools.partial(type(self), name=self.name))
        return super().add_subparsers(**kwargs)

    def error(self, message):
        sys.stderr.write(f"{_prefix(self.name)}{message} (see --help)\n")
        sys.exit(2)


def run_command(
    name: Optional[str], run: Callable[[Optional[Sequence[str]]], int], argv: Optional[Sequence[str]] = None
) -> int:
    """``run(argv)``, with a :class:`UserError` printed as one line ``NAME: error: ...`` (exit 2)."""
    try:
        return run(argv)
    except UserError as e:
        sys.stdout.flush()
        sys.stderr.write(f"{_prefix(name)}{' '.join(str(e).split())}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write(f"{name or sys.argv[0]}: interrupted\n")
        return 130
