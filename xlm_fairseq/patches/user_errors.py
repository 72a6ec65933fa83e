"""A user error raised inside fairseq's commands is one ``error:`` line, not a traceback.

fairseq 0.12's ``fairseq-train`` / ``-generate`` / ``-interactive`` have no error hook: an
:class:`~xlm_fairseq.errors.XLMUserError` (and ``preprocess``'s ``UserError``, its base) raised by
the plugin, or re-raised by fairseq while loading a checkpoint ("Cannot load model parameters from
checkpoint PATH; ..."), is printed as one line and the process still exits non-zero. Other
exceptions keep their full traceback.
"""

import re
import sys

from preprocess.errors import UserError


def user_error_line(exc):
    """The one line of ``exc`` if it is a user error (or fairseq's wrapping of one); else None."""
    if isinstance(exc, UserError):
        return str(exc)
    cause = exc.__cause__ or exc.__context__
    match = re.match(r"Cannot load model parameters from checkpoint (\S+);", str(exc))
    if match and isinstance(cause, UserError):
        return f"{match.group(1)}: {cause}"
    return None


def _excepthook(exc_type, exc, tb, _previous=sys.excepthook):
    line = user_error_line(exc)
    if line is not None:
        print(f"error: {line}", file=sys.stderr)
        return
    _previous(exc_type, exc, tb)


def install() -> None:
    if getattr(sys.excepthook, "__name__", "") != "_excepthook":
        sys.excepthook = _excepthook
