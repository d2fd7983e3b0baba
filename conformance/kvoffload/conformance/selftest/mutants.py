"""Seeded-bug variants of the reference manager, for ``kvoffload check --self-test``.

Each variant is :class:`kvoffload.impl.OffloadManager` with one method overridden (or
one small wrapper) so that it has exactly one bug of a class seen in a real engine
(``FIELD-NOTES.md``; the docstring names the source). Controls differ from the
reference only where the spec leaves freedom (which free slot, which allowed victim)
and must pass. Every class here is also a valid TARGET, e.g.
``kvoffload check kvoffload.conformance.selftest.mutants:LookupPendingAsMiss``.

The variants reach into the reference manager's private fields on purpose: a seeded
bug is a small edit of the real code, not a second implementation. This module is
imported only by the self-test (it needs ``kvoffload.impl``; the suite does not).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from kvoffload.impl import OffloadManager
from kvoffload.impl.arc import ArcEviction
from kvoffload.impl.lru import LruEviction
from kvoffload.spec import (
    Completion,
    Events,
    Key,
    LoadPlan,
    LookupResult,
    NotReadable,
    StorePlan,
    StoreRejected,
    UnmatchedCompleteLoad,
    unique,
)

# --- lookup ------------------------------------------------------------------------


class LookupPendingAsMiss(OffloadManager):
    """vLLM <= 0.20 (fixed by PR #41795): a block whose store is in flight reads as a miss,
    so the scheduler recomputes and re-stores it."""

    def lookup(self, key: Key) -> LookupResult:
        found = super().lookup(key)
        return LookupResult.MISS if found is LookupResult.PENDING else found


class LookupPendingAsHit(OffloadManager):
    """Dynamo KVBM #15079: a block still being written is reported as a hit and served
    before its data is there (wrong KV while the metrics show a hit)."""

    def lookup(self, key: Key) -> LookupResult:
        found = super().lookup(key)
        return LookupResult.HIT if found is LookupResult.PENDING else found


class LookupRefreshesRecency(OffloadManager):
    """vLLM 0.24 with ``store_threshold >= 2``: lookup updates state. Here a lookup of a
    READY block counts as a use and refreshes its recency (policy level)."""

    def lookup(self, key: Key) -> LookupResult:
        found = super().lookup(key)
        if found is LookupResult.HIT:
            self._order.touched((key,), self._ready)
        return found


# --- prepare_store -----------------------------------------------------------------


class DuplicateKeySlotLeak(OffloadManager):
    """vLLM up to 0.34: ``prepare_store([k, k])`` allocates two slots and keeps one block;
    the second slot is never freed."""

    def prepare_store(self, keys: Iterable[Key]) -> StorePlan | StoreRejected:
        keys = list(keys)
        plan = super().prepare_store(keys)
        if isinstance(plan, StorePlan):
            for _ in range(sum(keys.count(k) - 1 for k in plan.keys)):
                if self._fresh < self._capacity:
                    self._fresh += 1
                elif self._free:
                    self._free.pop()
        return plan


class EvictsStoringBlock(OffloadManager):
    """SGLang HiCache #28468 / #35769: when nothing READY can go, eviction takes a block
    whose store is still in flight, and frees the slot under the running copy."""

    def prepare_store(self, keys: Iterable[Key]) -> StorePlan | StoreRejected:
        keys = list(keys)
        plan = super().prepare_store(keys)
        if not isinstance(plan, StoreRejected):
            return plan
        short = plan.needed - plan.available
        running = [k for k in self._storing if k not in keys][:short]
        if len(running) < short:
            return plan
        for key in running:
            self._free.append(self._storing.pop(key))
        self._order.removed(running)
        retried = super().prepare_store(keys)
        if isinstance(retried, StoreRejected):
            return retried
        return replace(retried, evicted=(*running, *retried.evicted))


class PartialEvictionBeforeRejection(OffloadManager):
    """vLLM 0.18 ARC: a store that cannot fit is rejected after evicting part of what it
    needed, with no removal event."""

    def prepare_store(self, keys: Iterable[Key]) -> StorePlan | StoreRejected:
        keys = list(keys)
        plan = super().prepare_store(keys)
        if isinstance(plan, StoreRejected):
            evictable = [k for k in self._order.evictable_keys() if k not in keys]
            if evictable:
                stored, _ = self._fold_events()
                for key in self._order.evict(len(evictable), set(keys)):
                    self._free.append(self._ready.pop(key))
                    stored.discard(key)
        return plan


class EvictsMoreThanNeeded(OffloadManager):
    """An eviction loop that frees one block too many (an off-by-one seen in block
    pools): a READY block disappears although there was room."""

    def prepare_store(self, keys: Iterable[Key]) -> StorePlan | StoreRejected:
        keys = list(keys)
        plan = super().prepare_store(keys)
        if isinstance(plan, StorePlan) and plan.evicted:
            more = len([k for k in self._order.evictable_keys() if k not in keys][:1])
            extra = self._order.evict(more, set(keys))
            for key in extra:
                self._free.append(self._ready.pop(key))
            self._changed(False, tuple(extra))
            return replace(plan, evicted=(*plan.evicted, *extra))
        return plan


class ArcRejectsWithEvictable(OffloadManager):
    """vLLM ARC up to 0.27 (fixed by PR #55461): when T1 is not above its target p and T2
    has nothing evictable, the store is rejected although T1 has evictable blocks."""

    def prepare_store(self, keys: Iterable[Key]) -> StorePlan | StoreRejected:
        keys = list(keys)
        order = self._order
        new = [k for k in unique(keys) if k not in self._ready and k not in self._storing]
        free = len(self._free) + self._capacity - self._fresh
        if isinstance(order, ArcEviction) and len(new) > free:
            target = order.p  # as adapted by the keys up to the first that needs a slot
            for key in new[:free + 1]:
                b1, b2 = len(order.b1), len(order.b2)
                if key in order.b1:
                    target = min(order.capacity, target + max(1, b2 // b1))
                elif key in order.b2:
                    target = max(0, target - max(1, b1 // b2))
            stuck = order.t1_size <= target and not [k for k in order.t2 if k not in keys]
            if stuck:
                return StoreRejected(needed=len(new), available=free)
        return super().prepare_store(keys)


class AnnouncesBeforeReady(OffloadManager):
    """LMCache #3119-like: a block is announced to subscribers as stored when its store
    is accepted, before the copy has finished (or even if it fails)."""

    def prepare_store(self, keys: Iterable[Key]) -> StorePlan | StoreRejected:
        plan = super().prepare_store(keys)
        if isinstance(plan, StorePlan):
            self._changed(True, plan.keys)
        return plan


# --- complete_store ----------------------------------------------------------------


class FailedStoreLeaksSlot(OffloadManager):
    """LMCache #4659 / vLLM #52838 class: the failure path is rarely run; here a failed
    store forgets its key but never frees the slot."""

    def complete_store(
        self, keys: Iterable[Key], success: bool = True, ticket: int | None = None
    ) -> Completion:
        keys = list(keys)
        lost = [self._storing[k] for k in unique(keys) if k in self._storing
                and ticket in (None, self._slot_jobs[self._storing[k]])]
        done = super().complete_store(keys, success, ticket)
        if not success:
            for slot in lost:
                self._free.remove(slot)
        return done


class FailedStoreStaysVisible(OffloadManager):
    """vLLM #52838 class (the worker always reports success): a failed store's block is
    marked READY anyway, so unwritten data is served."""

    def complete_store(
        self, keys: Iterable[Key], success: bool = True, ticket: int | None = None
    ) -> Completion:
        return super().complete_store(keys, True, ticket)


class FailedStoreDropsReadyBlock(OffloadManager):
    """vLLM 0.18 ARC: ``complete_store(success=False)`` for a key that is already READY
    drops that READY block instead of ignoring the stray completion."""

    def complete_store(
        self, keys: Iterable[Key], success: bool = True, ticket: int | None = None
    ) -> Completion:
        done = super().complete_store(keys, success, ticket)
        if not success:
            for key in done.ignored:
                if key in self._ready and key not in self._readers:
                    del self._evictable[key]
                    self._order.removed([key])
                    self._free.append(self._ready.pop(key))
                    self._changed(False, (key,))
        return done


class StaleCompletionMarksReady(OffloadManager):
    """vLLM's API (no job identity): a completion from before a reset completes the
    re-allocated, unwritten block of the same key. Here the ticket of a store started
    before the last reset is ignored."""

    def __init__(self, capacity: int, policy: str = "lru") -> None:
        super().__init__(capacity, policy)
        self._first_of_epoch = 0

    def reset_cache(self) -> int:
        self._first_of_epoch = self._next_ticket
        return super().reset_cache()

    def complete_store(
        self, keys: Iterable[Key], success: bool = True, ticket: int | None = None
    ) -> Completion:
        past = ticket is not None and ticket < self._first_of_epoch
        return super().complete_store(keys, success, None if past else ticket)


class IgnoresTicket(OffloadManager):
    """A manager that takes ``ticket=`` but matches completions by key alone (vLLM's
    form): a late or duplicate report of a finished job completes the key's next job,
    e.g. marks a block READY while its second store is still writing (issue 10 A)."""

    def complete_store(
        self, keys: Iterable[Key], success: bool = True, ticket: int | None = None
    ) -> Completion:
        return super().complete_store(keys, success)

    def complete_load(self, keys: Iterable[Key], ticket: int | None = None) -> Completion:
        keys = list(keys)
        try:
            return super().complete_load(keys)
        except UnmatchedCompleteLoad:
            if ticket is None:
                raise
            return Completion(ignored=tuple(unique(keys)))  # named a job: no misuse


# --- loads -------------------------------------------------------------------------


class EvictsPinnedBlock(OffloadManager):
    """SGLang HiCache use-after-free class: a block being read stays in the eviction
    order, so a store can evict it (and reuse its slot) under the running load."""

    def prepare_load(self, keys: Iterable[Key]) -> LoadPlan:
        plan = super().prepare_load(keys)
        for key in plan.keys:
            if key not in self._more_loads:
                self._evictable[key] = None
        return plan


class PrepareLoadDoublePins(OffloadManager):
    """vLLM up to 0.34: ``prepare_load([k, k])`` pins ``k`` twice; one ``complete_load``
    leaves it pinned for ever (a reader leak)."""

    def prepare_load(self, keys: Iterable[Key]) -> LoadPlan:
        keys = list(keys)
        plan = super().prepare_load(keys)
        for key in plan.keys:
            extra = [plan.ticket] * (keys.count(key) - 1)
            if extra:
                self._more_loads.setdefault(key, []).extend(extra)
        return plan


class LoadOfStoringMarksReady(OffloadManager):
    """vLLM under ``python -O`` (its checks are asserts): ``prepare_load`` of a block still
    being written marks it READY and pins it before its data is there."""

    def prepare_load(self, keys: Iterable[Key]) -> LoadPlan:
        keys = list(keys)
        early = [k for k in unique(keys) if k in self._storing]
        for key in early:
            self._ready[key] = self._storing.pop(key)
        for key in early:
            self._evictable[key] = None
        return super().prepare_load(keys)


class MisuseNotAtomic(OffloadManager):
    """vLLM's assert-in-a-loop: ``prepare_load`` pins the READY keys it meets before it
    fails on one that is not READY, so a rejected call still changes the state."""

    def prepare_load(self, keys: Iterable[Key]) -> LoadPlan:
        keys = list(keys)
        try:
            return super().prepare_load(keys)
        except NotReadable:
            for key in unique(keys):
                if key not in self._ready:
                    break
                super().prepare_load([key])
            raise


class UnmatchedCompleteLoadAccepted(OffloadManager):
    """vLLM under ``python -O``: an unmatched ``complete_load`` is not rejected; the
    reader count of a READY block goes to -1, which reads as "being written"."""

    def complete_load(self, keys: Iterable[Key], ticket: int | None = None) -> Completion:
        keys = list(keys)
        try:
            return super().complete_load(keys, ticket)
        except UnmatchedCompleteLoad as error:
            broken = [k for k in error.keys if k in self._ready]
            if len(broken) < len(error.keys):
                raise
            for key in broken:
                if key not in self._readers:
                    del self._evictable[key]
            stored, _ = self._fold_events()
            for key in broken:
                self._readers.pop(key, None)
                self._storing[key] = self._ready.pop(key)
                stored.discard(key)
            return Completion(applied=tuple(broken))


# --- reset_cache -------------------------------------------------------------------


class ResetLeavesBlocks(OffloadManager):
    """vLLM #57727 class: a reset starts a new epoch but leaves blocks behind, still
    readable after the cache was reset."""

    def reset_cache(self) -> int:
        self._epoch += 1
        return self._epoch


class ResetFreesRunningSlots(OffloadManager):
    """SGLang HiCache / vLLM #48102: a reset frees the slots of copies still running, so
    a new store is given a slot a running copy still writes or reads."""

    def reset_cache(self) -> int:
        epoch = super().reset_cache()
        self._store_orphans = type(self._store_orphans)()
        self._load_orphans = type(self._load_orphans)()
        self._free, self._fresh = [], 0
        return epoch


class ResetWithoutRemovalEvents(OffloadManager):
    """vLLM 0.24 and 0.25: ``reset_cache`` emits no removal events, so a subscribed router
    keeps routing to blocks that are gone."""

    def reset_cache(self) -> int:
        pending = set(self._fold_events()[1])
        epoch = super().reset_cache()
        self._removed.intersection_update(pending)
        return epoch


# --- events ------------------------------------------------------------------------


class MissingRemovalEvent(OffloadManager):
    """Failed stores and evictions emit no event (vLLM up to 0.25 for failed stores);
    here no removal is ever announced, so subscribers keep evicted blocks."""

    def take_events(self) -> Events:
        events = super().take_events()
        return Events(stored=events.stored)


# --- eviction order (policy level: pass at --level any, fail at --level exact) ------


class TouchIgnored(OffloadManager):
    """An LRU whose ``touch`` is a no-op: blocks the scheduler marks as used are evicted
    as if they were cold."""

    def touch(self, keys: Iterable[Key]) -> None:
        return None


class TouchForwardOrder(OffloadManager):
    """``touch`` walked forwards, so the call's *last* key ends most recent; vLLM 0.21 to
    0.24 walk backwards, so the first key (the prefix) is kept longest."""

    def touch(self, keys: Iterable[Key]) -> None:
        super().touch(tuple(reversed(unique(keys))))


class _MostRecentFirst(LruEviction):
    def stored(self, keys: Sequence[Key], free: int, protected: Any) -> Sequence[Key]:
        count = max(len(keys) - free, 0)
        victims = [k for k in reversed(self.queue) if k not in protected][:count]
        for key in victims:
            del self.queue[key]
        return victims


class MruEviction(OffloadManager):
    """Evicts the most recently used allowed block: any allowed victim is fine for the
    lifecycle (a control at --level any), but not LRU (a variant at --level exact)."""

    def __init__(self, capacity: int, policy: str = "lru") -> None:
        super().__init__(capacity, policy)
        if isinstance(self._order, LruEviction):
            self._order = _MostRecentFirst()


class _NoAdaptation(ArcEviction):
    def stored(self, keys: Sequence[Key], free: int, protected: Any) -> Sequence[Key]:
        """p never moves (it is put back after every store): a fixed split."""
        p = self.p
        victims = super().stored(keys, free, protected)
        self.p = p
        return victims


class ArcNoAdaptation(OffloadManager):
    """An ARC whose target size p never adapts on ghost hits (the learning half of ARC
    missing): legal victims, wrong ones."""

    def __init__(self, capacity: int, policy: str = "arc") -> None:
        super().__init__(capacity, policy)
        if isinstance(self._order, ArcEviction):
            self._order = _NoAdaptation(capacity)


class _GhostHitsToT1(ArcEviction):
    def stored(self, keys: Sequence[Key], free: int, protected: Any) -> Sequence[Key]:
        """Ghosts forgotten first, so every new key enters T1."""
        for key in keys:
            self.b1.pop(key, None)
            self.b2.pop(key, None)
        return super().stored(keys, free, protected)


class ArcGhostHitToT1(OffloadManager):
    """vLLM's ARC variant: a new key always enters T1, even on a ghost hit (classic ARC
    moves it to T2)."""

    def __init__(self, capacity: int, policy: str = "arc") -> None:
        super().__init__(capacity, policy)
        if isinstance(self._order, ArcEviction):
            self._order = _GhostHitsToT1(capacity)


# --- controls: freedom the spec leaves ---------------------------------------------


class FifoSlotReuse(OffloadManager):
    """Control: reuses the oldest freed slot first (the reference reuses the newest)."""

    def prepare_store(self, keys: Iterable[Key]) -> StorePlan | StoreRejected:
        self._free.reverse()
        try:
            return super().prepare_store(keys)
        finally:
            self._free.reverse()


class SlotsFromTop:
    """Control: hands out the highest free slot first (slot numbers mirrored); a small
    wrapper around the reference manager."""

    def __init__(self, capacity: int, policy: str = "lru") -> None:
        self._inner = OffloadManager(capacity, policy)
        self._top = capacity - 1

    def _mirror(self, slots: Sequence[int]) -> tuple[int, ...]:
        return tuple(self._top - s for s in slots)

    def lookup(self, key: Key) -> LookupResult:
        return self._inner.lookup(key)

    def prepare_load(self, keys: Iterable[Key]) -> LoadPlan:
        plan = self._inner.prepare_load(keys)
        return replace(plan, slots=self._mirror(plan.slots))

    def complete_load(self, keys: Iterable[Key], ticket: int | None = None) -> Completion:
        return self._inner.complete_load(keys, ticket)

    def touch(self, keys: Iterable[Key]) -> None:
        self._inner.touch(keys)

    def prepare_store(self, keys: Iterable[Key]) -> StorePlan | StoreRejected:
        plan = self._inner.prepare_store(keys)
        if isinstance(plan, StoreRejected):
            return plan
        return replace(plan, slots=self._mirror(plan.slots))

    def complete_store(
        self, keys: Iterable[Key], success: bool = True, ticket: int | None = None
    ) -> Completion:
        return self._inner.complete_store(keys, success, ticket)

    def reset_cache(self) -> int:
        return self._inner.reset_cache()

    def take_events(self) -> Events:
        return self._inner.take_events()
