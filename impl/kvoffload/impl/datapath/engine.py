"""The transfer engine: asynchronous store and load jobs with ids, and a poll.

A *store* copies device blocks into host slots, a *load* copies host slots into
device blocks. ``submit_store`` / ``submit_load`` return a job id at once; the copy
runs (or waits to run) in the backend; ``poll()`` returns the jobs that have ended
since the last poll, each with success or failure. Every backend checks, before a
copy starts, that it would not race a running copy on any block (:mod:`.guard`).

Backends: :class:`~.deterministic.DeterministicEngine` (a job ends only when the
test says so), :class:`~.threaded.ThreadedEngine` (worker threads, real concurrency
on CPU, failure injection) and :class:`~.cuda.CudaEngine` (CUDA streams and events).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch

from kvoffload.spec.vocabulary import CopyKind

from .copyplan import BlockCopy, check_pairs
from .errors import BusyBlock, EngineClosed
from .guard import BlockGuard
from .jobs import Job, JobResult
from .pool import HostBlockPool
from .rows import Rows


class TransferEngine(ABC):
    """Copies blocks between a host pool and a device KV tensor of the same layout.

    ``device_blocks`` is ``[num_device_blocks, *pool.layout.shape]``, contiguous, of
    the pool's dtype. Thread-safe: submit and poll from any thread.

    raises: LayoutMismatch
    """

    def __init__(self, pool: HostBlockPool, device_blocks: torch.Tensor) -> None:
        pool.layout.check(device_blocks, "the device KV blocks")
        self.pool = pool
        self.device = Rows(device_blocks)
        self._lock = threading.Lock()
        self._guard = BlockGuard()
        self._next_id = 0
        self._pending: dict[int, Job] = {}
        """Submitted jobs whose result has not been polled yet."""
        self._ended: list[JobResult] = []
        self._closed = False

    # --- submitting ------------------------------------------------------------

    def submit_store(self, device_blocks: Sequence[int], host_slots: Sequence[int]) -> int:
        """Copy ``device_blocks[i]`` into ``host_slots[i]``; returns the job id.

        raises: BadBlockIds, BusyBlock, EngineClosed
        """
        return self._submit(CopyKind.STORE, tuple(host_slots), tuple(device_blocks))

    def submit_load(self, host_slots: Sequence[int], device_blocks: Sequence[int]) -> int:
        """Copy ``host_slots[i]`` into ``device_blocks[i]``; returns the job id.

        raises: BadBlockIds, BusyBlock, EngineClosed
        """
        return self._submit(CopyKind.LOAD, tuple(host_slots), tuple(device_blocks))

    def check_device_blocks(self, kind: CopyKind, device_blocks: Sequence[int]) -> None:
        """Raise if a copy of ``kind`` could not be submitted for these device blocks
        (out of range, written twice, racing a running copy, or the engine closed);
        changes nothing.

        raises: BadBlockIds, BusyBlock, EngineClosed
        """
        self._check_open()
        blocks = tuple(device_blocks)
        if kind is CopyKind.STORE:
            self.device.check_ids(blocks, "device blocks")
        else:
            check_pairs(self.device, blocks, self.device, blocks)
        with self._lock:
            try:
                self._guard.check_device(kind, blocks)
            except BusyBlock:
                self._reap()
                self._guard.check_device(kind, blocks)

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise EngineClosed("this engine has been closed; no new copies can start")

    def _submit(self, kind: CopyKind, host_slots: tuple[int, ...],
                device_blocks: tuple[int, ...]) -> int:
        self._check_open()
        if kind is CopyKind.STORE:
            check_pairs(self.device, device_blocks, self.pool.rows, host_slots)
            copy = BlockCopy(self.device, device_blocks, self.pool.rows, host_slots)
        else:
            check_pairs(self.pool.rows, host_slots, self.device, device_blocks)
            copy = BlockCopy(self.pool.rows, host_slots, self.device, device_blocks)
        with self._lock:
            try:
                self._guard.check(kind, host_slots, device_blocks)
            except BusyBlock:
                self._reap()
                self._guard.check(kind, host_slots, device_blocks)
            self._guard.acquire(self._next_id, kind, host_slots, device_blocks)
            job = Job(self._next_id, kind, host_slots, device_blocks, copy)
            self._next_id += 1
            self._pending[job.job_id] = job
        self._start(job)
        return job.job_id

    # --- ending and polling ------------------------------------------------------

    def poll(self) -> list[JobResult]:
        """The jobs that have ended since the last poll, in the order they ended."""
        with self._lock:
            self._reap()
            ended, self._ended = self._ended, []
            for result in ended:
                del self._pending[result.job_id]
        return ended

    def pending(self) -> tuple[int, ...]:
        """Ids of the jobs submitted whose result has not been polled yet."""
        with self._lock:
            return tuple(self._pending)

    def job(self, job_id: int) -> Job | None:
        """A job whose result has not been polled yet, else None."""
        with self._lock:
            return self._pending.get(job_id)

    def _end(self, job: Job, success: bool, error: str | None = None) -> None:
        """Record that ``job``'s bytes stopped moving. Call with the lock held."""
        self._guard.release(job.kind, job.host_slots, job.device_blocks)
        self._ended.append(JobResult(job.job_id, job.kind, success, error))

    # --- what each backend provides -----------------------------------------------

    @abstractmethod
    def _start(self, job: Job) -> None:
        """Start (or queue) the copy of a job just submitted; called without the lock."""

    def _reap(self) -> None:  # noqa: B027 - a hook: most backends see jobs end as they end
        """Notice jobs that ended without telling (CUDA events); called with the lock."""

    @abstractmethod
    def wait(self, timeout: float | None = None) -> bool:
        """Block until every submitted job has ended or ``timeout`` seconds passed;
        true if none is still running. Results still need :meth:`poll`."""

    def close(self) -> None:
        """Refuse new jobs; jobs already submitted still run and can be polled."""
        self._closed = True

    def __enter__(self) -> TransferEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
