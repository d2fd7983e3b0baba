"""A CUDA transfer engine: copies on their own streams, ordered after compute.

Each job first makes its copy stream wait for an event recorded on the compute
stream at submit, so a store reads device blocks only after the kernels that
produced them (and a load overwrites device blocks only after the kernels queued
before it that read them); the copies are non-blocking, so ``submit_*`` returns
at once; each job records its own completion event, which ``poll`` queries
without blocking. Stores and loads use separate streams, so a long store does not
hold back a load. The host pool should be pinned (the default when CUDA is
present): copies from pageable memory are not asynchronous.

Before compute reads blocks a load wrote, it must wait for that load:
:meth:`CudaEngine.order_after` makes a stream wait for a job's completion event
without blocking the host. A store's device blocks must not be rewritten before
the store has ended (``poll`` reported it, or ``order_after`` ordered the writer).

Verified only on a GPU (tests marked ``gpu``); this machine has none.
"""

# torch.cuda's Stream and Event constructors and Event.query carry no annotations in
# torch 2.13; each call below says so with a narrow ignore.

from __future__ import annotations

import time

import torch

from .engine import TransferEngine
from .errors import LayoutMismatch, UnknownJob
from .failures import FailureInjector, never
from .jobs import Job
from .pool import HostBlockPool


class CudaEngine(TransferEngine):
    """Copies between a (pinned) host pool and a CUDA KV tensor on two copy streams.

    ``compute_stream``: the stream whose work produces and consumes the device
    blocks; the current stream of the device when not given.

    raises: LayoutMismatch
    """

    def __init__(self, pool: HostBlockPool, device_blocks: torch.Tensor, *,
                 compute_stream: torch.cuda.Stream | None = None,
                 fail: FailureInjector = never) -> None:
        if not device_blocks.is_cuda:
            raise LayoutMismatch("a CudaEngine copies to and from a CUDA tensor; got one on "
                                 f"{device_blocks.device}")
        super().__init__(pool, device_blocks)
        device = device_blocks.device
        self._compute = compute_stream or torch.cuda.current_stream(device)
        self._streams = {kind: torch.cuda.Stream(device)  # type: ignore[no-untyped-call]  # torch leaves it unannotated
                         for kind in ("store", "load")}
        self._fail = fail
        self._running: dict[int, tuple[Job, torch.cuda.Event]] = {}

    def _start(self, job: Job) -> None:
        produced = torch.cuda.Event()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
        produced.record(self._compute)
        stream = self._streams[job.kind.value]
        stream.wait_event(produced)
        with torch.cuda.stream(stream):
            job.copy.run(non_blocking=True)
        done = torch.cuda.Event()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
        done.record(stream)
        with self._lock:
            self._running[job.job_id] = (job, done)

    def _reap(self) -> None:
        for job_id, (job, done) in list(self._running.items()):
            if not done.query():  # type: ignore[no-untyped-call]  # torch leaves it unannotated
                continue
            del self._running[job_id]
            if self._fail(job):
                with torch.cuda.stream(self._streams[job.kind.value]):
                    job.copy.poison(torn=True)
                self._streams[job.kind.value].synchronize()
                self._end(job, False, "injected failure")
            else:
                self._end(job, True)

    def order_after(self, job_id: int, stream: torch.cuda.Stream | None = None) -> None:
        """Make ``stream`` (the compute stream by default) wait for a job's copy, without
        blocking the host.

        raises: UnknownJob
        """
        with self._lock:
            entry = self._running.get(job_id)
        if entry is None:
            if self.job(job_id) is None:
                raise UnknownJob(f"job {job_id} is neither running nor awaiting poll")
            return  # it has ended: its bytes are in place
        (stream or self._compute).wait_event(entry[1])

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                self._reap()
                if not self._running:
                    return True
                oldest = next(iter(self._running.values()))[1]
            if deadline is None:
                oldest.synchronize()
            elif time.monotonic() >= deadline:
                return False
            else:
                time.sleep(0.0005)
