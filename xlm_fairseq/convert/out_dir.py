"""OUT_DIR: refused when it holds something (without ``--force``) or holds SRC; written in a sibling
temporary directory that takes its place only when everything is written."""

import contextlib
import os
from typing import Optional

from preprocess.files import staged_dir
from xlm_fairseq.errors import XLMUserError


def check_out_dir(out_dir: str, force: bool, src: Optional[str] = None):
    out_dir = os.path.abspath(out_dir)
    if os.path.lexists(out_dir):
        if not os.path.isdir(out_dir):
            if not force:
                raise XLMUserError(f"{out_dir} exists and is not a directory (use --force to replace it)")
        elif os.listdir(out_dir) and not force:
            raise XLMUserError(f"{out_dir} exists and is not empty (use --force to replace it)")
    if src is not None:
        s = os.path.realpath(src)
        o = os.path.realpath(out_dir)
        if s == o or s.startswith(o + os.sep):
            raise XLMUserError(f"OUT_DIR {out_dir} holds SRC {src}; choose another OUT_DIR")


@contextlib.contextmanager
def staged_out_dir(out_dir: str, force: bool):
    """:func:`check_out_dir` (again: the callers' public entry points may be called directly), then
    a staging directory to write in (see :func:`preprocess.files.staged_dir`)."""
    check_out_dir(out_dir, force)
    with staged_dir(out_dir) as tmp:
        yield tmp
