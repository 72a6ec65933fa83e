"""The plugin's one error type: a user error (bad option, missing or mismatched file).

The plugin's excepthook prints it (and ``preprocess``'s ``UserError``, which it derives from) as one
line, ``error: ...``, instead of a traceback; the process still exits non-zero. Other exceptions keep
their full traceback."""

import re
import sys

from preprocess.errors import UserError


class XLMUserError(UserError):
    """A configuration or input error; the message names the option or file."""


def _user_error(exc):
    """The UserError that ``exc`` is, or that fairseq re-raised as a generic Exception while loading a
    checkpoint ("Cannot load model parameters from checkpoint PATH; ..."), as one line; else None."""
    if isinstance(exc, UserError):
        return str(exc)
    cause = exc.__cause__ or exc.__context__
    match = re.match(r"Cannot load model parameters from checkpoint (\S+);", str(exc))
    if match and isinstance(cause, UserError):
        return f"{match.group(1)}: {cause}"
    return None


def _excepthook(exc_type, exc, tb, _previous=sys.excepthook):
    line = _user_error(exc)
    if line is not None:
        print(f"error: {line}", file=sys.stderr)
        return
    _previous(exc_type, exc, tb)


def install_excepthook():
    if getattr(sys.excepthook, "__name__", "") != "_excepthook":
        sys.excepthook = _excepthook
