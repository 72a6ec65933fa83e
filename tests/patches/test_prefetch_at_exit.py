"""xlm_fairseq/patches/prefetch_at_exit.py: a command that ends while fairseq's threads prefetch
batches exits cleanly."""

import signal
import sys

import pytest
from conftest import run

pytestmark = pytest.mark.slow
PREFETCH_AT_EXIT = """
import sys
import torch
from fairseq.data.iterators import BufferedIterator
if sys.argv[1] == "plugin":
    import xlm_fairseq  # noqa: F401


class Batches:  # collating takes a while, as a real batch does
    def __len__(self):
        return 10**9

    def __iter__(self):
        while True:
            x = torch.randn(256, 256)
            for _ in range(50):
                x = torch.nn.functional.gelu(x @ x.T / 256)
            yield x


next(iter(BufferedIterator(10, Batches())))  # the command ends while the buffer is filling
"""


def test_a_command_that_ends_while_fairseq_prefetches_batches_exits_cleanly(tmp_path):
    """fairseq-train's last epoch iterator may still be collating batches in its daemon thread when
    training ends: the interpreter ended that thread inside a torch op and the finished run exited
    134 ("terminate called without an active exception"; seen in CI at --stop-time-hours)."""
    script = tmp_path / "prefetch_at_exit.py"
    script.write_text(PREFETCH_AT_EXIT)
    without = run([sys.executable, script, "fairseq"], ok=False)
    assert without.returncode == -signal.SIGABRT and "terminate called" in without.stderr  # the hazard is real
    for _ in range(3):
        proc = run([sys.executable, script, "plugin"], ok=False)
        assert proc.returncode == 0 and "terminate called" not in proc.stderr, proc.stderr[-2000:]
