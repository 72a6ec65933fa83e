"""Files appear whole or not at all: written under a temporary sibling name, renamed on success."""

import contextlib
import hashlib
import os
import shutil
import tempfile


@contextlib.contextmanager
def atomic_write(path: str, binary: bool = False):
    """An open file that becomes ``path`` when the block ends without error; on error it is removed
    and an existing ``path`` is left as it was."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.tmp-", dir=parent)
    try:
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            yield f
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def staged_dir(final: str):
    """A new sibling directory to build ``final`` in. On success it takes ``final``'s place (an
    existing ``final`` is moved aside first and deleted only then); on error it is deleted and
    ``final`` is untouched."""
    final = os.path.abspath(final)
    parent = os.path.dirname(final)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f"{os.path.basename(final)}.partial-", dir=parent)
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())
        old = None
        if os.path.lexists(final):
            old = tempfile.mkdtemp(prefix=f"{os.path.basename(final)}.old-", dir=parent)
            os.rename(final, os.path.join(old, "previous"))
        os.rename(tmp, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
