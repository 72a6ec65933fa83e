"""Requests that arrive together, translated together: one thread owns the model and, each time it is
free, takes every request waiting and makes one call of the translator per direction for all of them.
A request that comes while the model is busy waits at most one call; under load, calls grow instead
of queueing one request behind another."""

import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Tuple


@dataclass
class Job:
    texts: List[str]
    src: str
    tgt: str
    future: Future = field(default_factory=Future)


class Batcher:
    """``translate(texts, src, tgt) -> translations`` run on one thread, over batches of requests of
    at most ``max_texts`` texts (a request larger than that is a batch of its own)."""

    def __init__(self, translate: Callable[[List[str], str, str], List[str]], max_texts: int = 512):
        self.translate = translate
        self.max_texts = max_texts
        self.calls = 0  # translator calls made, and the requests and texts they answered
        self.requests = 0
        self.texts = 0
        self._queue: "queue.Queue[Job | None]" = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="xlm-fairseq-translate", daemon=True)
        self._thread.start()

    def submit(self, texts: List[str], src: str, tgt: str) -> Future:
        job = Job(list(texts), src, tgt)
        self._queue.put(job)
        return job.future

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            jobs, size = [job], len(job.texts)
            while size < self.max_texts:
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    self._queue.put(None)  # closing: answer what was taken first
                    break
                jobs.append(job)
                size += len(job.texts)
            by_direction: Dict[Tuple[str, str], List[Job]] = {}
            for job in jobs:
                by_direction.setdefault((job.src, job.tgt), []).append(job)
            for (src, tgt), group in by_direction.items():
                self._answer(group, src, tgt)

    def _answer(self, jobs: List[Job], src: str, tgt: str) -> None:
        texts = [text for job in jobs for text in job.texts]
        try:
            out = self.translate(texts, src, tgt)
        except Exception as e:  # the requests get the error; the thread goes on serving
            for job in jobs:
                job.future.set_exception(e)
            return
        self.calls += 1
        self.requests += len(jobs)
        self.texts += len(texts)
        at = 0
        for job in jobs:
            job.future.set_result(out[at : at + len(job.texts)])
            at += len(job.texts)
