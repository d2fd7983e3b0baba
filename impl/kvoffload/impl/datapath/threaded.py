"""A CPU transfer engine whose copies really run concurrently with the caller.

Worker threads take jobs from a queue and move each job's blocks with one torch
call (:mod:`.copyplan`); torch releases the GIL during bulk copies, so the caller
keeps running while bytes move, and "in flight" is real without CUDA. A worker
does not loop in Python over blocks: such a loop would fight the caller for the
GIL on every block.

For tests: :meth:`pause` holds queued jobs back (jobs already copying finish), so a
test can keep copies in flight for as long as it needs; a failure injector
(:mod:`.failures`) makes chosen jobs fail with their destination torn.
"""

from __future__ import annotations

import queue
import threading

import torch

from .engine import TransferEngine
from .failures import FailureInjector, never
from .jobs import Job
from .pool import HostBlockPool


class ThreadedEngine(TransferEngine):
    """Copies on ``workers`` threads (one is enough on two cores; more overlap jobs).

    Jobs start in submit order; with more than one worker they may end in any order.
    """

    def __init__(self, pool: HostBlockPool, device_blocks: torch.Tensor, *, workers: int = 1,
                 fail: FailureInjector = never) -> None:
        super().__init__(pool, device_blocks)
        self._fail = fail
        self._queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._open = threading.Event()
        self._open.set()
        self._idle = threading.Condition(self._lock)
        self._running = 0
        self._threads = [threading.Thread(target=self._work, name=f"kvoffload-copy-{i}",
                                          daemon=True) for i in range(max(1, workers))]
        for thread in self._threads:
            thread.start()

    def _start(self, job: Job) -> None:
        with self._lock:
            self._running += 1
        self._queue.put(job)

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            self._open.wait()
            success, error = self._copy(job)
            with self._lock:
                self._end(job, success, error)
                self._running -= 1
                if not self._running:  # what wait() waits for: waking it per job would
                    self._idle.notify_all()  # make the waiter take the lock and the GIL each time

    def _copy(self, job: Job) -> tuple[bool, str | None]:
        """Run one job's copy; any error (or an injected failure) is a failed job."""
        try:
            job.copy.run()
            if self._fail(job):
                job.copy.poison(torn=True)
                return False, "injected failure"
        except Exception as error:  # a failed copy is reported, never raised on a worker
            return False, f"{type(error).__name__}: {error}"
        return True, None

    def pause(self) -> None:
        """Hold jobs not yet started in flight until :meth:`resume`."""
        self._open.clear()

    def resume(self) -> None:
        self._open.set()

    def running(self) -> int:
        """How many jobs are queued or copying."""
        with self._lock:
            return self._running

    def wait(self, timeout: float | None = None) -> bool:
        with self._idle:
            return self._idle.wait_for(lambda: not self._running, timeout)

    def close(self) -> None:
        """Refuse new jobs, let the submitted ones finish, and stop the workers."""
        if self._closed:
            return
        super().close()
        self.resume()
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()
