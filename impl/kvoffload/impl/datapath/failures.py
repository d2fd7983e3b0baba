"""Failure injection: which copy jobs a real backend makes fail, for tests.

A failure injector is any ``Callable[[Job], bool]``: true means the job fails. The
engine then leaves the job's destination torn (the first half of each block
written, the rest overwritten with a poison pattern, as a copy that stopped midway
would) and reports ``success=False``. Injectors run on the engine's worker threads,
so the ones here are pure functions of the job: the same jobs fail on every run.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

from .jobs import Job

FailureInjector = Callable[[Job], bool]


def never(job: Job) -> bool:
    """The default: no job fails on purpose."""
    return False


def fail_randomly(probability: float, seed: int = 0) -> FailureInjector:
    """Each job fails with ``probability``, decided by its id and ``seed`` alone."""

    def injector(job: Job) -> bool:
        return random.Random(seed * 1_000_003 + job.job_id).random() < probability

    return injector


def fail_jobs(job_ids: Iterable[int]) -> FailureInjector:
    """Exactly the jobs with these ids fail."""
    doomed = frozenset(job_ids)

    def injector(job: Job) -> bool:
        return job.job_id in doomed

    return injector
