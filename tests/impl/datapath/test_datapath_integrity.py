"""Data integrity end to end: random interleavings on real tensors, checked byte for byte.

Each run drives a tier with :class:`integrity_driver.IntegrityDriver` (stores, loads,
completions, failures, polls, evictions under capacity pressure, resets with copies
in flight, touches, misuse) and checks that every successful load returns exactly
the bytes of the last successful store of its key, and that a block whose store is
in flight is never readable. Each test prints what it checked (``pytest -s``).

The default tier runs a few seeds per backend and per policy (``-m wide``: per backend
and policy); ``-m slow`` runs many more.
Planted bugs below show that the checks fail when the tier breaks its promises.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from datapath_fixtures import LAYOUT, device_blocks
from integrity_driver import Counts, IntegrityDriver

from kvoffload.impl import OffloadManager
from kvoffload.impl.datapath import (
    DeterministicEngine,
    Finished,
    HostBlockPool,
    JobResult,
    LoadTicket,
    OffloadTier,
    StoreTicket,
    ThreadedEngine,
    TransferEngine,
    fail_randomly,
)
from kvoffload.spec.errors import KvOffloadError
from kvoffload.spec.vocabulary import Key

BACKENDS = ("deterministic", "threaded")
POLICIES = ("lru", "arc")


def build(backend: str, seed: int, policy: str,
          manager: type[OffloadManager] = OffloadManager,
          tier_type: type[OffloadTier] = OffloadTier,
          engine_type: type[TransferEngine] | None = None) -> OffloadTier:
    """A tier whose size, device blocks, workers and failure rate come from ``seed``."""
    rng = random.Random(f"build-{seed}")
    capacity = rng.choice([1, 2, 4, 6, 8])
    pool = HostBlockPool(capacity, LAYOUT)
    device = device_blocks(rng.choice([8, 16, 48]))
    engine: TransferEngine
    if backend == "deterministic":
        engine = (engine_type or DeterministicEngine)(pool, device)
    else:
        engine = ThreadedEngine(pool, device, workers=rng.choice([1, 2]),
                                fail=fail_randomly(rng.choice([0.0, 0.05, 0.2]), seed))
    return tier_type(manager(capacity, policy), engine)


def run(backend: str, policy: str, seeds: range, steps: int, **kinds: type) -> Counts:
    total = Counts()
    for seed in seeds:
        tier = build(backend, seed, policy, **kinds)
        try:
            total.add(IntegrityDriver(tier, random.Random(seed)).run(steps))
        finally:
            tier.close()
    return total


def report(name: str, seeds: range, steps: int, counts: Counts) -> None:
    print(f"\nintegrity {name}: {len(seeds)} seeds x {steps} steps: {counts.summary()}")


def assert_checked_everything(counts: Counts) -> None:
    """The run exercised each thing it claims to check, not just quiet paths."""
    assert counts.loads_verified > 0
    assert counts.stores_verified > 0
    assert counts.failed_stores > 0
    assert counts.stale_completions > 0
    assert counts.resets_in_flight > 0
    assert counts.evictions > 0
    assert counts.stores_rejected > 0
    assert counts.pending_lookups > 0
    assert counts.refused_loads > 0


@pytest.mark.parametrize(("backend", "policy"), [
    ("deterministic", "lru"),
    ("threaded", "arc"),
    # [deterministic-lru] and [threaded-arc]: each engine, each policy's evictions, the
    # same tier and checks (the policy picks victims, the engine runs the copies)
    pytest.param("deterministic", "arc", marks=pytest.mark.wide),
    pytest.param("threaded", "lru", marks=pytest.mark.wide),
])
def test_loads_return_the_last_successful_store(backend: str, policy: str) -> None:
    seeds, steps = range(10), 500
    counts = run(backend, policy, seeds, steps)
    report(f"{backend}/{policy}", seeds, steps, counts)
    assert_checked_everything(counts)


@pytest.mark.slow
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_loads_return_the_last_successful_store_long(backend: str, policy: str) -> None:
    seeds, steps = range(100, 200), 2_000
    counts = run(backend, policy, seeds, steps)
    report(f"{backend}/{policy} (slow)", seeds, steps, counts)
    assert_checked_everything(counts)


# --- planted bugs: each must be caught -------------------------------------------


class _VllmCompletionTier(OffloadTier):
    """Completes jobs in vLLM's form (no ticket): a pre-reset store completes a new one."""

    def _finish(self, ticket: StoreTicket | LoadTicket, result: JobResult) -> Finished:
        if isinstance(ticket, StoreTicket):
            completion = self.manager.complete_store(ticket.keys, success=result.success)
        else:
            completion = self.manager.complete_load(tuple(dict.fromkeys(ticket.keys)))
        return Finished(ticket, result.success, completion, result.error)


class _SuccessOnlyTier(OffloadTier):
    """Reports every job as a success, like a worker that never reports failures."""

    def _finish(self, ticket: StoreTicket | LoadTicket, result: JobResult) -> Finished:
        return super()._finish(ticket, JobResult(result.job_id, result.kind, True))


class _ForgetfulManager(OffloadManager):
    """Frees every slot on reset, even those running copies still write or read."""

    def reset_cache(self) -> int:
        epoch = super().reset_cache()
        self.__init__(self.capacity, self.policy)  # type: ignore[misc]  # the bug under test: a reset that forgets its slots
        self._epoch = epoch
        return epoch


class _PeekingTier(OffloadTier):
    """Loads a key whose store is in flight from its slot, as a two-valued lookup invites."""

    def load(self, keys: Sequence[Key], device_blocks: Sequence[int]) -> LoadTicket:
        storing = dict(self.manager.view().storing)
        if not any(k in storing for k in keys):
            return super().load(keys, device_blocks)
        slots = tuple(storing[k] for k in keys if k in storing)
        blocks = tuple(b for k, b in zip(keys, device_blocks, strict=True) if k in storing)
        job_id = self.engine.submit_load(slots, blocks)
        return LoadTicket(job_id, tuple(k for k in keys if k in storing), blocks, slots,
                          self.manager.epoch, -1)  # no plan, so a ticket never issued


def caught(backend: str, seeds: range, **kinds: type) -> bool:
    for seed in seeds:
        try:
            run(backend, "lru", range(seed, seed + 1), 400, **kinds)
        except (AssertionError, KvOffloadError):
            return True
    return False


@pytest.mark.parametrize("backend", BACKENDS)
def test_stale_completions_without_tickets_are_caught(backend: str) -> None:
    assert caught(backend, range(30), tier_type=_VllmCompletionTier)


@pytest.mark.parametrize("backend", BACKENDS)
def test_failures_reported_as_success_are_caught(backend: str) -> None:
    assert caught(backend, range(30), tier_type=_SuccessOnlyTier)


@pytest.mark.parametrize("backend", BACKENDS)
def test_slots_freed_under_running_copies_are_caught(backend: str) -> None:
    assert caught(backend, range(30), manager=_ForgetfulManager)


@pytest.mark.parametrize("backend", BACKENDS)
def test_loads_of_blocks_being_stored_are_caught(backend: str) -> None:
    assert caught(backend, range(30), tier_type=_PeekingTier)
