"""A failure on one data-parallel rank, made an error on every rank: ranks agree before gradients
are all-reduced, so that none waits in a collective for a rank that has stopped."""

from typing import Optional, Tuple

import torch
from fairseq.distributed import utils as distributed_utils


class RankFailure(RuntimeError):
    """An objective failed on one data-parallel rank, raised on every rank so that none waits for it
    in a collective. Out of memory anywhere reads "out of memory" everywhere: fairseq's trainer then
    recovers from it on every rank alike."""


def agree_on_failure(failure: Optional[Tuple[str, BaseException]], device) -> None:
    """Every data-parallel rank learns whether any has failed (one all-reduce of two numbers)."""
    rank = distributed_utils.get_data_parallel_rank()
    oom = failure is not None and "out of memory" in str(failure[1])
    flags = torch.tensor([0 if failure is None else rank + 1, int(oom)], device=device)
    distributed_utils.all_reduce(flags, distributed_utils.get_data_parallel_group(), op="max")
    failed, oom = (int(x) for x in flags.tolist())
    if not failed:
        return
    what = "out of memory" if oom else "an error"
    if failure is None:
        raise RankFailure(f"rank {failed - 1} stopped with {what} (its log has it); every rank stops here")
    key, error = failure
    raise RankFailure(
        f"rank {rank} failed in objective {key}: {type(error).__name__}: {error}; every rank stops here"
    ) from error
