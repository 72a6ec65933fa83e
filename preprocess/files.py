"""Files appear whole or not at all: written under a temporary sibling name, renamed on success."""

import contextlib
import hashlib
import os
import re
import shutil
import socket
import sys
import tempfile
from typing import List, Optional

from preprocess.errors import UserError


@contextlib.contextmanager
def atomic_write(path: str, binary: bool = False):
    """An open file that becomes ``path`` when the block ends without error; on error it is removed
    and an existing ``path`` is left as it was."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    clean_leftovers(path)  # the temporary files of earlier writes of path that were killed
    fd, tmp = tempfile.mkstemp(prefix="." + _owner_prefix(path, "tmp"), dir=parent)
    try:
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            yield f
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _owner_prefix(final: str, kind: str) -> str:
    """``DEST.partial-HOST-PID-`` / ``DEST.old-HOST-PID-`` / ``DEST.tmp-HOST-PID-``: whose staging
    directory or temporary file it is."""
    return f"{os.path.basename(final)}.{kind}-{socket.gethostname()}-{os.getpid()}-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def clean_leftovers(final: str) -> List[str]:
    """Staging directories and temporary files of ``final`` left by a killed run on this host (its
    process is gone): a ``.partial-`` directory or ``.tmp-`` file is deleted; an ``.old-`` directory
    holds the previous ``final``, put back if the kill came between the two renames, else deleted.
    Returns what was done, a line each."""
    parent, base = os.path.split(os.path.abspath(final))
    pattern = re.compile(r"\.?" + re.escape(base) + r"\.(partial|old|tmp)-(.+)-(\d+)-[^-]+$")
    done = []
    for name in sorted(os.listdir(parent)) if os.path.isdir(parent) else []:
        match = pattern.match(name)
        if not match or match.group(2) != socket.gethostname() or _alive(int(match.group(3))):
            continue
        path = os.path.join(parent, name)
        previous = os.path.join(path, "previous")
        if match.group(1) == "old" and not os.path.lexists(final) and os.path.lexists(previous):
            os.rename(previous, final)
            done.append(f"{final}: put back from {path}, where a killed run (pid {match.group(3)}) had moved it")
        else:
            done.append(f"removed {path}, left by a killed run (pid {match.group(3)})")
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)
    return done


@contextlib.contextmanager
def staged_dir(final: str):
    """A new sibling directory to build ``final`` in. On success it takes ``final``'s place (an
    existing ``final`` is moved aside first and deleted only then); on error it is deleted and
    ``final`` is untouched. Its name carries host and pid, so that a later run cleans up after a
    kill (:func:`clean_leftovers`) and never touches a live run's."""
    final = os.path.abspath(final)
    parent = os.path.dirname(final)
    os.makedirs(parent, exist_ok=True)
    for line in clean_leftovers(final):
        print(f"preprocess: {line}", file=sys.stderr)
    tmp = tempfile.mkdtemp(prefix=_owner_prefix(final, "partial"), dir=parent)
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())
        old = None
        if os.path.lexists(final):
            old = tempfile.mkdtemp(prefix=_owner_prefix(final, "old"), dir=parent)
            os.rename(final, os.path.join(old, "previous"))
        os.rename(tmp, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def file_digest(path: str, algorithm: str = "sha256") -> str:
    """The hex digest of a file's bytes, read in blocks (hashlib's names: sha256, md5, ...)."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: str) -> str:
    return file_digest(path, "sha256")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_out_dir(out_dir: str, force: bool, src: Optional[str] = None):
    """OUT_DIR of a command that writes a directory: refused when it holds something (without
    ``--force``) or holds SRC."""
    out_dir = os.path.abspath(out_dir)
    if os.path.lexists(out_dir):
        if not os.path.isdir(out_dir):
            if not force:
                raise UserError(f"{out_dir} exists and is not a directory (use --force to replace it)")
        elif os.listdir(out_dir) and not force:
            raise UserError(f"{out_dir} exists and is not empty (use --force to replace it)")
    if src is not None:
        s = os.path.realpath(src)
        o = os.path.realpath(out_dir)
        if s == o or s.startswith(o + os.sep):
            raise UserError(f"OUT_DIR {out_dir} holds SRC {src}; choose another OUT_DIR")


@contextlib.contextmanager
def staged_out_dir(out_dir: str, force: bool):
    """:func:`check_out_dir` (again: the callers' public entry points may be called directly), then
    a staging directory that takes OUT_DIR's place only when everything is written (:func:`staged_dir`)."""
    check_out_dir(out_dir, force)
    with staged_dir(out_dir) as tmp:
        yield tmp
