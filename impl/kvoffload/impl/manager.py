"""The reference offloading manager: the spec's lifecycle, fast and torch-free.

``OffloadManager`` offers the native API of ``docs/native-api.md`` and decides every
case as the spec does (``docs/spec.md``), but shares only the spec's vocabulary,
errors and output records: the bookkeeping below is written for speed, so that the
conformance suite comparing the two means something.

Layout: one dict per phase (``_storing`` and ``_ready``, key to slot) and one for
the readers of READY blocks, so each phase is explicit and lookups are a dict probe
or two; the eviction order (:mod:`.lru` or :mod:`.arc`) holds the evictable keys;
slots come from a fresh counter and a free list (as in vLLM, so that with the same
calls both hand out the same slots); events are the net change of the READY set,
kept in two sets as blocks come and go, so ``take_events`` costs only what it returns.
Every operation is O(1) per key it names (``reset_cache`` is O(live blocks)), and
nothing scans past pinned or in-flight blocks.

Errors are raised before anything changes: a call that raises leaves the manager as
it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kvoffload.spec.errors import (
    BadCapacity,
    InvariantViolation,
    NotReadable,
    UnknownEpoch,
    UnmatchedCompleteLoad,
)
from kvoffload.spec.outputs import Completion, Events, LoadPlan, StorePlan, StoreRejected
from kvoffload.spec.vocabulary import Key, LookupResult, Policy

from .arc import ArcEviction, ArcView
from .errors import UnknownPolicy
from .lru import LruEviction
from .orphans import Orphans, OrphanView
from .records import completion, events, load_plan, store_plan

_MISS, _PENDING, _HIT = LookupResult.MISS, LookupResult.PENDING, LookupResult.HIT
T = TypeVar("T")
_NO_EVENTS = Events()
_NONE: frozenset[Key] = frozenset()


def policy_of(policy: str | Policy) -> Policy:
    """The policy a ``policy=`` argument names: ``"lru"``, ``"arc"`` or a :class:`Policy`.

    raises: UnknownPolicy
    """
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, str):
        for member in Policy:
            if member.value == policy:
                return member
    raise UnknownPolicy(
        f"the eviction policy must be one of {[p.value for p in Policy]} or a "
        f"kvoffload.spec.Policy; got {policy!r}")


@dataclass(frozen=True)
class ManagerView:
    """A snapshot of a manager's whole state, for tests, checks and reports.

    Two managers (or one manager before and after a call) with equal views behave
    the same from then on.
    """

    epoch: int
    storing: tuple[tuple[Key, int], ...]
    ready: tuple[tuple[Key, int], ...]
    readers: tuple[tuple[Key, int], ...]
    fresh: int
    free: tuple[int, ...]
    store_orphans: tuple[OrphanView, ...]
    load_orphans: tuple[OrphanView, ...]
    stored: frozenset[Key]
    removed: frozenset[Key]
    order: tuple[Key, ...] | ArcView


class OffloadManager:
    """An offloading tier of ``capacity`` slots with LRU or ARC eviction.

    ``policy`` is ``"lru"`` (vLLM 0.24's order, the default), ``"arc"`` or a
    :class:`kvoffload.spec.Policy`. Not thread-safe: like vLLM's manager, it is
    driven by one scheduler thread.

    raises: BadCapacity, UnknownPolicy
    """

    __slots__ = ("_adaptive", "_capacity", "_epoch", "_free", "_fresh", "_load_orphans", "_order",
                 "_policy", "_readers", "_ready", "_removed", "_store_orphans", "_stored",
                 "_storing")

    def __init__(self, capacity: int, policy: str | Policy = "lru") -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise BadCapacity(f"a tier needs an int number of slots, at least one; "
                              f"got capacity={capacity!r}")
        self._policy = policy_of(policy)
        self._order: LruEviction | ArcEviction = (
            LruEviction() if self._policy is Policy.LRU else ArcEviction(capacity))
        self._adaptive = self._policy is not Policy.LRU
        """Does the order need ``adapted`` / ``inserted`` calls? (LRU's are no-ops.)"""
        self._capacity = capacity
        self._epoch = 0
        self._storing: dict[Key, int] = {}
        self._ready: dict[Key, int] = {}
        self._readers: dict[Key, int] = {}
        """READY keys with at least one reader; a READY key not here is evictable."""
        self._fresh = 0
        """Slots ``fresh .. capacity - 1`` were never handed out since the last reset."""
        self._free: list[int] = []
        self._store_orphans = Orphans()
        self._load_orphans = Orphans()
        self._stored: set[Key] = set()
        """READY keys the last ``take_events`` did not report as READY."""
        self._removed: set[Key] = set()
        """Keys the last ``take_events`` reported READY (or stored) that no longer are."""

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def policy(self) -> Policy:
        return self._policy

    @property
    def epoch(self) -> int:
        """The current reset epoch: 0 at first, one more after each ``reset_cache``."""
        return self._epoch

    # --- the native API --------------------------------------------------------

    def lookup(self, key: Key) -> LookupResult:
        """MISS if absent, PENDING while its store is in flight, HIT when READY; pure."""
        if key in self._ready:
            return _HIT
        if key in self._storing:
            return _PENDING
        return _MISS

    def lookup_function(self, hit: T, pending: T, miss: T) -> Callable[..., T]:
        """``lookup`` answering ``hit`` / ``pending`` / ``miss`` instead of LookupResult.

        The fastest way for an adapter to speak another API's lookup (vLLM's ``True`` /
        ``None`` / ``False``, or its enum): one call, no translation. A second positional
        argument (vLLM's ``req_context``) is accepted and ignored. Stays valid across
        ``reset_cache``.
        """
        ready, storing = self._ready, self._storing  # cleared in place, never replaced

        def lookup(key: Key, req_context: object = None) -> T:
            if key in ready:
                return hit
            if key in storing:
                return pending
            return miss
        return lookup

    def prepare_load(self, keys: Iterable[Key]) -> LoadPlan:
        """Pin READY blocks for reading (one more reader each); say where they are.

        raises: NotReadable
        """
        keys = tuple(dict.fromkeys(keys))
        ready = self._ready
        try:
            slots = tuple(map(ready.__getitem__, keys))
        except KeyError:
            unreadable = tuple(k for k in keys if k not in ready)
            raise NotReadable(
                f"only READY blocks can be loaded; absent or still being stored: "
                f"{list(unreadable)!r}", keys=unreadable) from None
        readers = self._readers
        if readers.keys().isdisjoint(keys):  # the usual case: no key is being read yet
            first: Sequence[Key] = keys
        else:
            first = [k for k in keys if k not in readers]
            for key in keys:
                if key in readers:
                    readers[key] += 1
        if first:
            for key in first:
                readers[key] = 1
            self._order.pinned(first)
        return load_plan(keys, slots, self._epoch)

    def complete_load(self, keys: Iterable[Key], epoch: int | None = None) -> Completion:
        """A load finished: one reader fewer; the last one leaving makes the block evictable.

        ``epoch=None`` (vLLM's form) completes the current load of a key, else the
        oldest one a reset left running; naming the epoch ``prepare_load`` returned
        completes exactly that epoch's load.

        raises: UnknownEpoch, UnmatchedCompleteLoad
        """
        if epoch is not None:
            self._check_epoch(epoch)
        keys = tuple(dict.fromkeys(keys))
        readers, orphans = self._readers, self._load_orphans
        counts: list[int | None] = []
        if epoch is None or epoch == self._epoch:
            counts = list(map(readers.get, keys))
            if None in counts:
                applied = [k for k, n in zip(keys, counts, strict=True) if n is not None]
                stale = [k for k, n in zip(keys, counts, strict=True) if n is None]
                counts = [n for n in counts if n is not None]
            else:
                applied, stale = list(keys), []
        else:
            applied, stale = [], list(keys)
        if stale:
            unmatched = [k for k in stale if not orphans.has(k, epoch)]
            if unmatched:
                raise UnmatchedCompleteLoad(
                    f"complete_load needs a matching prepare_load; no load outstanding "
                    f"for {unmatched!r}", keys=tuple(unmatched))
        if counts.count(1) == len(counts):  # the usual case: each was the last reader
            for key in applied:
                del readers[key]
            freed = applied
        else:
            freed = []
            for key, count in zip(applied, counts, strict=True):
                if count is not None and count > 1:
                    readers[key] = count - 1
                else:
                    del readers[key]
                    freed.append(key)
        if freed:
            self._order.evictable(freed)
        for key in stale:
            slot = orphans.complete(key, epoch)
            if slot is not None:
                self._free.append(slot)
        return completion(tuple(applied), tuple(stale) if stale else (), ())

    def touch(self, keys: Iterable[Key]) -> None:
        """Mark keys as used for the eviction order; absent keys are ignored."""
        self._order.touched(tuple(dict.fromkeys(keys)), self._ready)

    def prepare_store(self, keys: Iterable[Key]) -> StorePlan | StoreRejected:
        """Give slots to the keys not yet present, evicting exactly as many blocks as
        needed, or reject the whole call and change nothing.

        Keys already STORING or READY are skipped, and protected from eviction.
        """
        call = dict.fromkeys(keys)
        ready, storing = self._ready, self._storing
        new = [k for k in call if k not in ready and k not in storing]
        if not new:
            return store_plan((), (), (), self._epoch)
        capacity, free_list, order = self._capacity, self._free, self._order
        free = len(free_list) + capacity - self._fresh
        needed = len(new) - free
        if needed > 0:
            # Evictable blocks not named in the call: the call's own keys stay.
            readers = self._readers
            candidates = len(ready) - len(readers)
            if needed > candidates - (len(call) - len(new)):
                candidates -= sum(1 for k in call if k in ready and k not in readers)
            if needed > candidates:
                return StoreRejected(needed=len(new), available=free + candidates)
            if self._adaptive:
                order.adapted(new)
            victims = order.evict(needed, call)
            free_list.extend(map(ready.pop, victims))
            self._leave_ready(victims)
        else:
            if self._adaptive:
                order.adapted(new)
            victims = []
        # Slots as vLLM hands them out: never-used ones in order, then the free list, LIFO.
        count = len(new)
        fresh = self._fresh
        from_fresh = min(count, capacity - fresh)
        slots = list(range(fresh, fresh + from_fresh))
        self._fresh = fresh + from_fresh
        reused = count - from_fresh
        if reused:
            slots += free_list[:-reused - 1:-1]
            del free_list[-reused:]
        storing.update(zip(new, slots, strict=True))
        if self._adaptive:
            order.inserted(new)
        return store_plan(tuple(new), tuple(slots), tuple(victims), self._epoch)

    def complete_store(
        self, keys: Iterable[Key], success: bool = True, epoch: int | None = None
    ) -> Completion:
        """A store finished: its blocks become READY (success) or ABSENT, slot freed.

        A key that is not STORING is ignored (reported in ``Completion.ignored``).
        ``epoch=None`` (vLLM's form) completes the current STORING block if there is
        one, else the oldest store a reset left running; naming the epoch
        ``prepare_store`` returned completes exactly that epoch's store, so a stale
        completion only frees the slot its copy held.

        raises: UnknownEpoch
        """
        if epoch is not None:
            self._check_epoch(epoch)
        storing, orphans = self._storing, self._store_orphans
        if not isinstance(keys, (list, tuple)):
            keys = list(keys)
        # The current STORING keys with their slots, first occurrence first.
        finished = ({k: storing[k] for k in keys if k in storing}
                    if epoch is None or epoch == self._epoch else {})
        released: list[Key] = []
        ignored: list[Key] = []
        if len(finished) < len(keys):
            for key in dict.fromkeys(keys):
                if key in finished:
                    continue
                if orphans and orphans.has(key, epoch):
                    released.append(key)
                else:
                    ignored.append(key)
        free_list = self._free
        applied = list(finished)
        if applied:
            for key in applied:
                del storing[key]
            if success:
                self._ready.update(finished)
                self._enter_ready(applied)
                self._order.evictable(applied)
            else:
                free_list.extend(finished.values())
                self._order.removed(applied)
        for key in released:
            slot = orphans.complete(key, epoch)
            if slot is not None:
                free_list.append(slot)
        return completion(tuple(applied), tuple(released) if released else (),
                          tuple(ignored) if ignored else ())

    def reset_cache(self) -> int:
        """Drop every block and start a new epoch; returns the new epoch.

        Copies still running (stores in flight, loads with readers) keep their slots
        until their completions arrive, so no new store is given a slot a running
        copy still writes or reads.
        """
        epoch, ready = self._epoch, self._ready
        for key, slot in self._storing.items():
            self._store_orphans.add(key, epoch, slot, 1)
        for key, count in self._readers.items():
            self._load_orphans.add(key, epoch, ready[key], count)
        stored = self._stored
        self._removed.update(k for k in ready if k not in stored)
        stored.clear()
        self._storing.clear()
        ready.clear()
        self._readers.clear()
        self._order.cleared()
        self._epoch = epoch + 1
        if self._store_orphans or self._load_orphans:
            held = self._store_orphans.slots() | self._load_orphans.slots()
            self._free = [s for s in range(self._capacity - 1, -1, -1) if s not in held]
            self._fresh = self._capacity
        else:
            self._free = []
            self._fresh = 0
        return self._epoch

    def forget_running_copies(self) -> tuple[int, ...]:
        """Declare every copy a reset left running finished; free their slots.

        Not a spec operation: for environments that guarantee it themselves. vLLM's
        scheduler makes its workers flush the jobs in flight at a reset and drops
        their completions, so those completions never reach the manager; without this
        call their slots would stay held for good. After it, a late completion of such
        a copy finds nothing: ignored for a store, ``UnmatchedCompleteLoad`` for a
        load. Returns the slots freed.
        """
        freed = tuple(sorted(self._store_orphans.slots() | self._load_orphans.slots(),
                             reverse=True))
        self._store_orphans.clear()
        self._load_orphans.clear()
        self._free.extend(freed)
        return freed

    def take_events(self) -> Events:
        """The net change of the READY set since the last call (stored / removed keys)."""
        stored, removed = self._stored, self._removed
        if not stored and not removed:
            return _NO_EVENTS
        taken = events(frozenset(stored) if stored else _NONE,
                       frozenset(removed) if removed else _NONE)
        stored.clear()
        removed.clear()
        return taken

    # --- inspection --------------------------------------------------------------

    def view(self) -> ManagerView:
        """A snapshot of the whole state (O(size); for tests and reports)."""
        return ManagerView(
            epoch=self._epoch,
            storing=tuple(self._storing.items()),
            ready=tuple(self._ready.items()),
            readers=tuple(self._readers.items()),
            fresh=self._fresh,
            free=tuple(self._free),
            store_orphans=self._store_orphans.view(),
            load_orphans=self._load_orphans.view(),
            stored=frozenset(self._stored),
            removed=frozenset(self._removed),
            order=self._order.view(),
        )

    def check(self) -> None:
        """Raise :class:`InvariantViolation` if the bookkeeping is inconsistent (O(size)).

        raises: InvariantViolation
        """
        storing, ready, readers = self._storing, self._ready, self._readers
        if storing.keys() & ready.keys():
            raise InvariantViolation("phases_are_live", "a key is both STORING and READY")
        if not readers.keys() <= ready.keys() or any(n < 1 for n in readers.values()):
            raise InvariantViolation("readers_only_on_ready_blocks",
                                     "a reader count is on a block that is not READY, or < 1")
        orphans = (*self._store_orphans.view(), *self._load_orphans.view())
        used = [*storing.values(), *ready.values(), *(o.slot for o in orphans)]
        free = [*self._free, *range(self._fresh, self._capacity)]
        if len(set(used)) != len(used) or set(used) & set(free) or len(set(free)) != len(free):
            raise InvariantViolation("no_shared_slots",
                                     "a slot is held twice, or both held and free")
        if sorted(used + free) != list(range(self._capacity)):
            raise InvariantViolation("slots_in_range", "slots leak or lie outside the tier")
        if not self._stored <= ready.keys() or self._removed & ready.keys():
            raise InvariantViolation("events_replay_to_ready_set",
                                     "pending events disagree with the READY set")
        evictable = ready.keys() - readers.keys()
        self._order.check({**storing, **ready}, evictable)

    def _enter_ready(self, keys: list[Key]) -> None:
        """Events: these keys became READY (a key reported removed since is back: no news)."""
        removed = self._removed
        if removed and not removed.isdisjoint(keys):
            back = removed.intersection(keys)
            removed.difference_update(back)
            self._stored.update(k for k in keys if k not in back)
        else:
            self._stored.update(keys)

    def _leave_ready(self, keys: list[Key]) -> None:
        """Events: these keys are no longer READY (one not yet reported READY: no news)."""
        stored = self._stored
        if stored and not stored.isdisjoint(keys):
            unseen = stored.intersection(keys)
            stored.difference_update(unseen)
            self._removed.update(k for k in keys if k not in unseen)
        else:
            self._removed.update(keys)

    def _check_epoch(self, epoch: int | None) -> None:
        if epoch is not None and not 0 <= epoch <= self._epoch:
            raise UnknownEpoch(
                f"a completion may only name an epoch that has begun (0 .. {self._epoch}); "
                f"got epoch={epoch}")
