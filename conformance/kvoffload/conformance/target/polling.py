"""When the judge and the Python host poll their end of the channel before sleeping.

A process that sleeps on a pipe leaves its core idle, and waking an idle core again
costs more than a call of the reference manager: on the project's 2-core machine, with
nothing else running, the default ``kvoffload check`` took about twice its in-process
wall time when both sides slept at every wait (issue 22, docs/performance.md "Polling
before sleeping"). Polling for a short window first keeps both cores awake while the
answers come quickly. On a busy machine it does the opposite: the core a side polls on
is one another process (the other side among them) waits for, and the same run took
twice as long. So each side polls only while its recent polls paid: the data came
within the window, and the poll had its core to itself (its thread's CPU time kept up
with the clock). When they stop paying, the side sleeps at once, and tries a poll again
now and then (every :data:`PROBE_EVERY` waits) to see whether the machine has quietened.

Nothing here changes what is sent or when an answer is read: only how a side waits.
"""

from __future__ import annotations

import os
import select
import time
from contextlib import suppress

SCORE_WEIGHT = 1 / 16
"""The weight of the latest poll in the running score (about the last 16 polls count)."""
POLL_ABOVE = 0.75
"""Poll while the running score (the share of recent polls that paid) is at least this."""
CORE_SHARE = 0.8
"""A poll had its core to itself when its thread ran for at least this share of it."""
SHORT_S = 50e-6
"""A poll this short paid if the data came (too short to measure its share of the core)."""
PROBE_EVERY = 64
"""While polling does not pay, every this many waits is polled all the same."""


def usable_cpus() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


class Poller:
    """One side's waits on a non-blocking descriptor: poll it first or not, learned from
    the last polls.

    ``window`` is the longest a wait is polled for; with fewer than two usable cores it
    is 0 and nothing is polled (the other side cannot run while this one polls)."""

    def __init__(self, window: float, cpus: int | None = None) -> None:
        if window < 0:
            raise ValueError(f"a polling window is at least 0 s, not {window!r}")
        self.window = window if (usable_cpus() if cpus is None else cpus) >= 2 else 0.0
        self.score = 1.0
        """The running share of recent polls that paid (starts at 1: poll until the
        polls say otherwise)."""
        self.skipped = 0
        """Waits not polled since the last poll."""

    @property
    def polling(self) -> bool:
        """Whether polling pays now (the judge also writes its calls as it posts them
        only while it does)."""
        return self.window > 0 and self.score >= POLL_ABOVE

    def poll(self, fd: int) -> bytes | None:
        """What a read of ``fd`` gave within the window, polling (the descriptor is
        non-blocking); None when nothing came, or when this wait is not polled (the
        caller then sleeps until the descriptor is readable)."""
        if not self.polling:
            self.skipped += 1
            if self.window <= 0 or self.skipped < PROBE_EVERY:
                return None
        self.skipped = 0
        begun, ran = time.perf_counter(), time.thread_time()
        until = begun + self.window
        chunk: bytes | None = None
        while True:
            try:
                chunk = os.read(fd, 1 << 20)
                break
            except BlockingIOError:
                if time.perf_counter() >= until:
                    break
                os.sched_yield()  # to whatever else wants this core
        took = time.perf_counter() - begun
        paid = chunk is not None and (took < SHORT_S or
                                      time.thread_time() - ran >= CORE_SHARE * took)
        self.score += (float(paid) - self.score) * SCORE_WEIGHT
        return chunk

    def read(self, fd: int, deadline: float | None = None) -> bytes | None:
        """What a read of the non-blocking ``fd`` gives (b"" at its end): at once if
        something is there, else polled for while polling pays (:meth:`poll`), else
        waited for asleep until ``deadline`` (``time.monotonic``; None: no limit).
        None only at the deadline."""
        try:
            return os.read(fd, 1 << 20)
        except BlockingIOError:
            pass
        chunk = self.poll(fd)
        while chunk is None:
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                return None
            select.select([fd], [], [], wait)
            with suppress(BlockingIOError):
                chunk = os.read(fd, 1 << 20)
        return chunk
