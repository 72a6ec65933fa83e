"""Every change this plugin makes to fairseq's and torch's behaviour, one module each, installed by
one explicit call (:func:`install`, from the plugin's ``__init__``). Each module names the fairseq
(or torch) version and the missing hook it works around; nothing else in the plugin patches.

``XLM_FAIRSEQ_SKIP_PATCHES=name,...`` (module names) leaves those patches out, with a warning: for
checking that a patch's tests fail without it (``tests/patches/audit.py``), or for trying a fairseq
version that no longer needs one."""

import logging
import os

from xlm_fairseq.patches import (
    checkpoint_copy,
    checkpoint_reader,
    cpu_clip_norm,
    interactive_input,
    legacy_task,
    log_file_once,
    precision,
    prefetch_at_exit,
    safe_load,
    task_help,
    user_errors,
)

PATCHES = (
    safe_load,  # torch >= 2.6 loads weights-only: fairseq's and XLM's checkpoints allowlisted by class
    # an unreadable checkpoint is one line naming it (and how to resume otherwise); fairseq-train's
    # resume checks --langs against the checkpoint's language list
    checkpoint_reader,
    user_errors,  # a user error raised inside fairseq's commands is one `error:` line
    task_help,  # `fairseq-train --task cross_lingual_lm --help` lists the task's options
    checkpoint_copy,  # checkpoint_last.pt / _best.pt replaced atomically, never half-copied
    precision,  # --bf16 without a TPU; TF32 under CUDA unless --no-tf32
    cpu_clip_norm,  # --cpu --clip-norm on a machine with a GPU: the norm taken on the CPU
    prefetch_at_exit,  # batch-prefetch threads stop between batches at exit (no abort after a finished run)
    interactive_input,  # fairseq-interactive reads strict UTF-8, a bad line one error naming it
    legacy_task,  # fairseq's legacy cross_lingual_lm task leaves its name to the plugin's
    log_file_once,  # --log-file gets each line once, not once per epoch begun so far
)


SKIP_VARIABLE = "XLM_FAIRSEQ_SKIP_PATCHES"


def name(patch) -> str:
    return patch.__name__.rsplit(".", 1)[-1]


def install() -> None:
    """Install every patch (idempotent), but those named in ``XLM_FAIRSEQ_SKIP_PATCHES``."""
    skip = {s.strip() for s in os.environ.get(SKIP_VARIABLE, "").split(",") if s.strip()}
    if skip:
        names = [name(patch) for patch in PATCHES]
        unknown = sorted(skip - set(names))
        logging.getLogger(__name__).warning(
            f"{SKIP_VARIABLE}: fairseq runs without the patches {', '.join(sorted(skip & set(names))) or '(none)'}"
            + (f"; no patch is called {', '.join(unknown)} (the patches: {', '.join(names)})" if unknown else "")
        )
    for patch in PATCHES:
        if name(patch) not in skip:
            patch.install()
