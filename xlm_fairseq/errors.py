"""The plugin's one error type: a user error (bad option, missing or mismatched file).

The plugin's excepthook prints it (and ``preprocess``'s ``UserError``, which it derives from) as one
line, ``error: ...``, instead of a traceback; the process still exits non-zero. Other exceptions keep
their full traceback."""

import sys

from preprocess.errors import UserError


class XLMUserError(UserError):
    """A configuration or input error; the message names the option or file."""


def _excepthook(exc_type, exc, tb, _previous=sys.excepthook):
    if isinstance(exc, UserError):
        print(f"error: {exc}", file=sys.stderr)
        return
    _previous(exc_type, exc, tb)


def install_excepthook():
    if getattr(sys.excepthook, "__name__", "") != "_excepthook":
        sys.excepthook = _excepthook
