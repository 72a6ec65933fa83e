"""Let torch >= 2.6's ``weights_only`` loader read fairseq and XLM checkpoints in fairseq's commands, and
nothing more.

Patch of torch >= 2.6 (``torch.load(weights_only=True)`` by default) for fairseq 0.12: fairseq's
commands call ``torch.load`` with torch's default and offer no hook for the allowlist, which
``xlm_fairseq.checkpoints`` holds. This plugin's own checkpoints pickle plain containers and load without
it; what needs it is the checkpoint state that rank 0 sends the other ranks when several processes resume
(fairseq's ``_TensorPlaceholder``), and checkpoints that pickle ``argparse.Namespace`` or numpy values
(fairseq's before 0.10, XLM's).
"""

import torch

from xlm_fairseq.checkpoints import allowed_globals


def install():
    """Add the allowlist to torch's weights-only unpickler (process-wide, idempotent)."""
    torch.serialization.add_safe_globals(allowed_globals())
