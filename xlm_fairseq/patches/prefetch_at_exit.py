"""fairseq's batch prefetching, stopped cleanly when a command exits.

fairseq's ``BufferedIterator`` collates the next batches in a daemon thread (``--data-buffer-size``,
default 10). Python >= 3.9 ends daemon threads at interpreter exit wherever they are; one ended inside
a torch operation aborts the whole process ("terminate called without an active exception", exit
code 134) after training has finished and saved: a successful run reported as a crash. This happens
when training stops shortly after a new epoch's iterator started filling its buffer (tiny epochs,
``--stop-time-hours``). At exit each prefetch thread now finishes the batch in hand and stops.

Patch for fairseq 0.12's ``iterators.BackgroundConsumer`` (it has no stop at exit): an ``atexit`` hook.
"""

import atexit
import queue
import threading

from fairseq.data import iterators

STOP_TIMEOUT_S = 30  # at most one batch's collation is waited for; a thread still busy is left as before


def stop_prefetch_threads() -> None:
    for thread in threading.enumerate():
        if isinstance(thread, iterators.BackgroundConsumer) and thread.is_alive():
            full = thread._queue
            thread._max_len = 0  # the loop breaks after its next put
            thread._queue = queue.Queue()  # unbounded: that put and the end marker never block
            while True:  # frees a put already waiting on the full buffer
                try:
                    full.get_nowait()
                except queue.Empty:
                    break
            thread.join(STOP_TIMEOUT_S)


def install() -> None:
    atexit.register(stop_prefetch_threads)
