"""``--log-file`` written once per line, however many epochs and validations a run has.

fairseq 0.12's ``progress_bar.progress_bar`` adds a new ``logging.FileHandler`` for ``--log-file`` to
its module's logger every time it is called with one, and ``fairseq-train`` does so at the start of
every epoch, never removing the handler. So the k-th epoch's progress and validation lines were
written k times, and a long run kept one open file per epoch.

The file is now opened by the first call only: a later call for a file that already has a handler
on that logger leaves it alone. Other files (a different ``--log-file`` in the same process) still
get theirs.
"""

import inspect
import logging
import os

from fairseq.logging import progress_bar as progress_bar_module

_original_progress_bar = progress_bar_module.progress_bar
_SIGNATURE = inspect.signature(_original_progress_bar)


def _has_handler_for(path) -> bool:
    target = os.path.abspath(path)
    return any(
        isinstance(h, logging.FileHandler) and h.baseFilename == target for h in progress_bar_module.logger.handlers
    )


def progress_bar(*args, **kwargs):
    bound = _SIGNATURE.bind(*args, **kwargs)
    log_file = bound.arguments.get("log_file")
    if log_file is not None and _has_handler_for(log_file):
        bound.arguments["log_file"] = None
    return _original_progress_bar(*bound.args, **bound.kwargs)


def install() -> None:
    """fairseq's commands (train, validate, generate, eval_lm) call it through the module."""
    progress_bar_module.progress_bar = progress_bar
