"""Hostile native targets (found on 3 December): managers whose answers look right to
a lenient reader. Each is the reference manager with one answer forged; shared by the
tests of ``kvoffload check`` (test_native.py) and of ``kvoffload corpus replay``
(test_corpus.py), which must both fail them."""

from __future__ import annotations

import random
import time
from collections.abc import Hashable, Iterable
from typing import Any

from kvoffload.impl import OffloadManager
from kvoffload.spec import Completion, Events, LoadPlan, LookupResult, StorePlan, StoreRejected


class AgreesWithAll:
    """An object that claims to equal anything."""

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return "'x'"


class LiarKeys(OffloadManager):
    """Plans name objects that equal everything instead of the keys."""

    def prepare_store(self, keys: Iterable[Hashable]) -> StorePlan | StoreRejected:
        plan = super().prepare_store(keys)
        if isinstance(plan, StorePlan):
            fake = tuple(AgreesWithAll() for _ in plan.keys)
            return StorePlan(fake, plan.slots, plan.evicted, plan.epoch, plan.ticket)
        return plan


class NeverEqual(int):
    """An int that equals nothing, itself included, and hashes by identity."""

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return id(self)


class ZeroTickets(OffloadManager):
    """Every plan's ticket is 0, dressed up so that no two look equal."""

    def __init__(self, capacity: int, *args: Any, **kwargs: Any) -> None:
        super().__init__(capacity, *args, **kwargs)
        self.real: dict[int, int] = {}

    def _dress(self, ticket: int) -> int:
        dressed = NeverEqual(0)
        self.real[id(dressed)] = ticket
        return dressed

    def prepare_store(self, keys: Iterable[Hashable]) -> StorePlan | StoreRejected:
        plan = super().prepare_store(keys)
        if isinstance(plan, StorePlan):
            return StorePlan(plan.keys, plan.slots, plan.evicted, plan.epoch,
                             self._dress(plan.ticket))
        return plan

    def prepare_load(self, keys: Iterable[Hashable]) -> LoadPlan:
        plan = super().prepare_load(keys)
        return LoadPlan(plan.keys, plan.slots, plan.epoch, self._dress(plan.ticket))

    def complete_store(self, keys: Iterable[Hashable], success: bool = True,
                       ticket: int | None = None) -> Completion:
        return super().complete_store(keys, success, self.real.get(id(ticket), ticket))

    def complete_load(self, keys: Iterable[Hashable], ticket: int | None = None) -> Completion:
        return super().complete_load(keys, self.real.get(id(ticket), ticket))


class FloatSlots(OffloadManager):
    """Slots off by a half (read as ints, they would look right)."""

    def prepare_store(self, keys: Iterable[Hashable]) -> StorePlan | StoreRejected:
        plan = super().prepare_store(keys)
        if isinstance(plan, StorePlan):
            slots = tuple(s + 0.5 for s in plan.slots)
            return StorePlan(plan.keys, slots, plan.evicted, plan.epoch, plan.ticket)  # type: ignore[arg-type]  # the bug
        return plan


class NoEpoch(OffloadManager):
    """Store plans carry no epoch."""

    def prepare_store(self, keys: Iterable[Hashable]) -> StorePlan | StoreRejected:
        plan = super().prepare_store(keys)
        if isinstance(plan, StorePlan):
            return StorePlan(plan.keys, plan.slots, plan.evicted, None, plan.ticket)  # type: ignore[arg-type]  # the bug
        return plan


class LyingResetEpoch(OffloadManager):
    """reset_cache answers 7, in an int that says it equals whatever it is compared to."""

    def reset_cache(self) -> int:
        super().reset_cache()

        class Agreeable(int):
            def __eq__(self, other: object) -> bool:
                return True

            def __ne__(self, other: object) -> bool:
                return False

            __hash__ = int.__hash__

        return Agreeable(7)


class WrongLoadEpoch(OffloadManager):
    """Load plans report the next epoch: an epochs failure, and nothing else."""

    def prepare_load(self, keys: Iterable[Hashable]) -> LoadPlan:
        plan = super().prepare_load(keys)
        return LoadPlan(plan.keys, plan.slots, plan.epoch + 1, plan.ticket)


class ClearsItsArgument(OffloadManager):
    """Consumes the caller's list of keys."""

    def prepare_store(self, keys: Iterable[Hashable]) -> StorePlan | StoreRejected:
        plan = super().prepare_store(keys)
        if isinstance(keys, list):
            keys.clear()
        return plan


class ReusesOneBuffer(OffloadManager):
    """Every store plan's keys are one list, overwritten by the next store."""

    def __init__(self, capacity: int, *args: Any, **kwargs: Any) -> None:
        super().__init__(capacity, *args, **kwargs)
        self.buffer: list[Hashable] = []

    def prepare_store(self, keys: Iterable[Hashable]) -> StorePlan | StoreRejected:
        plan = super().prepare_store(keys)
        if isinstance(plan, StorePlan):
            self.buffer[:] = plan.keys
            return StorePlan(self.buffer, plan.slots, plan.evicted, plan.epoch, plan.ticket)  # type: ignore[arg-type]  # the bug
        return plan


class ListsAndSets(OffloadManager):
    """Correct, with lists where the records hold tuples, fresh for every answer."""

    def prepare_store(self, keys: Iterable[Hashable]) -> StorePlan | StoreRejected:
        plan = super().prepare_store(keys)
        if isinstance(plan, StorePlan):
            return StorePlan(list(plan.keys), list(plan.slots), list(plan.evicted),  # type: ignore[arg-type]  # lists on purpose
                             plan.epoch, plan.ticket)
        return plan

    def complete_load(self, keys: Iterable[Hashable], ticket: int | None = None) -> Completion:
        done = super().complete_load(keys, ticket)
        return Completion(list(done.applied), list(done.released), list(done.ignored))  # type: ignore[arg-type]  # lists on purpose


class AnnouncesAgain(OffloadManager):
    """Every drain also names, as stored, the keys the previous drain stored (a
    subscriber replaying the events still sees the right set)."""

    def __init__(self, capacity: int, *args: Any, **kwargs: Any) -> None:
        super().__init__(capacity, *args, **kwargs)
        self.last: frozenset[Hashable] = frozenset()

    def take_events(self) -> Events:
        events = super().take_events()
        again = frozenset(k for k in self.last if self.lookup(k) is LookupResult.HIT)
        self.last = events.stored
        return Events(events.stored | again, events.removed)


class RemovesUnannounced(OffloadManager):
    """A failed store's keys are announced as removed, though never announced as
    stored."""

    def __init__(self, capacity: int, *args: Any, **kwargs: Any) -> None:
        super().__init__(capacity, *args, **kwargs)
        self.failed: set[Hashable] = set()

    def complete_store(self, keys: Iterable[Hashable], success: bool = True,
                       ticket: int | None = None) -> Completion:
        done = super().complete_store(keys, success, ticket)
        if not success:
            self.failed.update(done.applied)
        return done

    def take_events(self) -> Events:
        events = super().take_events()
        gone = frozenset(k for k in self.failed if self.lookup(k) is not LookupResult.HIT)
        self.failed = set()
        return Events(events.stored, events.removed | gone)


class NarrowSlotIndex(OffloadManager):
    """Slots kept in three bits: a plan names ``slot % 8``, so past 8 slots two live
    blocks share one. Invisible on tiers of up to 8 slots."""

    def prepare_store(self, keys: Iterable[Hashable]) -> StorePlan | StoreRejected:
        plan = super().prepare_store(keys)
        if isinstance(plan, StorePlan):
            slots = tuple(s % 8 for s in plan.slots)
            return StorePlan(plan.keys, slots, plan.evicted, plan.epoch, plan.ticket)
        return plan


# --- targets whose answers change from run to run (issue 23: a failure found is never
# lost to an error, nor to Hypothesis's Flaky... errors) ---------------------------------


class CrashesAtRandom(OffloadManager):
    """Raises in one call of ``ODDS`` (any operation), drawn from ``SystemRandom``: no
    seed replays it, so the shrunk trace rarely fails again."""

    ODDS = 1000

    def __init__(self, capacity: int, policy: str = "lru") -> None:
        super().__init__(capacity, policy)
        self._dice = random.SystemRandom()

    def _roll(self, op: str) -> None:
        if self._dice.randrange(self.ODDS) == 0:
            raise RuntimeError(f"{op}: lost a race (one call in {self.ODDS})")

    def lookup(self, key: Hashable) -> LookupResult:
        self._roll("lookup")
        return super().lookup(key)

    def prepare_store(self, keys: Iterable[Hashable]) -> StorePlan | StoreRejected:
        self._roll("prepare_store")
        return super().prepare_store(keys)

    def complete_store(self, keys: Iterable[Hashable], success: bool = True,
                       ticket: int | None = None) -> Completion:
        self._roll("complete_store")
        return super().complete_store(keys, success, ticket)


class CrashesOftenAtRandom(CrashesAtRandom):
    """:class:`CrashesAtRandom` at one call in 100: found within a small budget."""

    ODDS = 100


class LookupWrongByTheClock(OffloadManager):
    """Answers MISS for a READY key when the wall clock's millisecond is a multiple of
    ``EVERY_MS``: wrong, but not on a replay of the same calls."""

    EVERY_MS = 10

    def lookup(self, key: Hashable) -> LookupResult:
        answer = super().lookup(key)
        if answer is LookupResult.HIT and time.time_ns() // 1_000_000 % self.EVERY_MS == 0:
            return LookupResult.MISS
        return answer


BUILT: list[int] = []
"""Instances of :class:`FailsThenBreaks` built so far in this process."""


class FailsThenBreaks(OffloadManager):
    """Fails ``lookup`` on every run (PENDING read as MISS), and from its ``LIMIT``-th
    instance on its constructor raises: an error that comes after a found failure."""

    LIMIT = 40

    def __init__(self, capacity: int, policy: str = "lru") -> None:
        BUILT.append(capacity)
        if len(BUILT) > self.LIMIT:
            raise OSError("out of shared memory segments")
        super().__init__(capacity, policy)

    def lookup(self, key: Hashable) -> LookupResult:
        answer = super().lookup(key)
        return LookupResult.MISS if answer is LookupResult.PENDING else answer
