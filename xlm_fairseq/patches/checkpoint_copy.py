"""fairseq's copy of a fresh checkpoint over ``checkpoint_last.pt`` / ``checkpoint_best.pt``, made atomic.

fairseq writes ``checkpoint_E_U.pt`` under a ``.tmp`` name and renames it, but then copies it over
``checkpoint_last.pt`` in place (``PathManager.copy`` is ``shutil.copyfile``): a job killed during that
copy leaves a truncated ``checkpoint_last.pt``, and the restarted job cannot resume. Here a local copy
is written beside the destination under a temporary name and renamed over it, so the destination is
always either the old checkpoint or the new one.

Patch of fairseq 0.12's ``PathManager.copy`` (no hook for how checkpoints are copied).
"""

import shutil

from fairseq.file_io import PathManager

from preprocess.files import atomic_write

_original_copy = PathManager.copy


def atomic_copy(src_path: str, dst_path: str, overwrite: bool = False) -> bool:
    if PathManager.path_requires_pathmanager(src_path) or PathManager.path_requires_pathmanager(dst_path):
        return _original_copy(src_path, dst_path, overwrite=overwrite)
    if not overwrite and PathManager.exists(dst_path):
        return False
    with open(src_path, "rb") as src, atomic_write(dst_path, binary=True) as dst:
        shutil.copyfileobj(src, dst, 1 << 22)
    return True


def install():
    PathManager.copy = staticmethod(atomic_copy)
