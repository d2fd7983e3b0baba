"""A transfer engine for tests: a job ends only when the test says so.

The copy happens at completion time, and submitting a job overwrites its
destination with a poison pattern at once. So between submit and completion the
destination holds neither the old bytes nor the new ones, as with a real copy
half done, and any read of a block whose copy is still in flight sees poison:
"no load reads a block whose store is in flight" is checkable byte for byte.
:meth:`complete` copies and reports success; :meth:`fail` leaves the
destination torn (half copied, half poison) and reports failure.
"""

from __future__ import annotations

import torch

from .engine import TransferEngine
from .errors import UnknownJob
from .jobs import Job
from .pool import HostBlockPool


class DeterministicEngine(TransferEngine):
    """Jobs wait in flight until :meth:`complete` or :meth:`fail` names them."""

    def __init__(self, pool: HostBlockPool, device_blocks: torch.Tensor) -> None:
        super().__init__(pool, device_blocks)
        self._running: dict[int, Job] = {}

    def _start(self, job: Job) -> None:
        job.copy.poison()
        with self._lock:
            self._running[job.job_id] = job

    def running(self) -> tuple[int, ...]:
        """Ids of the jobs in flight (neither completed nor failed), oldest first."""
        with self._lock:
            return tuple(self._running)

    def complete(self, job_id: int) -> None:
        """Run the job's copy now and report success.

        raises: UnknownJob
        """
        job = self._take(job_id)
        job.copy.run()
        with self._lock:
            self._end(job, True)

    def fail(self, job_id: int, error: str = "failed by the test") -> None:
        """Leave the job's destination torn and report failure.

        raises: UnknownJob
        """
        job = self._take(job_id)
        job.copy.run()
        job.copy.poison(torn=True)
        with self._lock:
            self._end(job, False, error)

    def wait(self, timeout: float | None = None) -> bool:
        """Never blocks: only :meth:`complete` and :meth:`fail` end jobs here."""
        with self._lock:
            return not self._running

    def _take(self, job_id: int) -> Job:
        with self._lock:
            job = self._running.pop(job_id, None)
        if job is None:
            raise UnknownJob(f"job {job_id} is not in flight on this engine: never "
                             "submitted, or already completed or failed")
        return job
