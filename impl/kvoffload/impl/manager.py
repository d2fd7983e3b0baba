"""The reference offloading manager: the spec's lifecycle, fast and torch-free.

``OffloadManager`` offers the native API of ``docs/native-api.md`` and decides every
case as the spec does (``docs/spec.md``), but shares only the spec's vocabulary,
errors and output records: the bookkeeping below is written for speed, so that the
conformance suite comparing the two means something.

Layout: one dict per phase (``_storing`` and ``_ready``, key to slot), the running
jobs' tickets (``_slot_jobs``: each slot's last store ticket; ``_readers``: a READY
key's oldest running load, ``_more_loads`` its later ones), so each phase is explicit
and lookups are a dict probe or two; the eviction order (:mod:`.lru` or :mod:`.arc`, an
:class:`~.eviction.EvictionOrder`) holds the evictable keys, updated in place through
its ``evictable`` mapping (so the manager has no branch per policy); slots come from a fresh
counter and a free list (as in vLLM, so that with the same calls both hand out the
same slots); every accepted plan takes the next ticket of a per-manager counter (never
reset); events are the net change of the READY set: each call that changes the READY set
appends its keys to a short log (one append per call, not per key), which
``take_events`` turns into the net change, directly when no key appears in it twice
(the usual case), else by folding it into two sets (``_stored``, ``_removed``); a long
log is folded early, so it stays short. Every operation is O(1) per key
it names (``reset_cache`` is O(live blocks)), and nothing scans past pinned or
in-flight blocks. A call naming one key (decode's usual call) takes a short path
that skips deduplication. A completion naming the plan's own keys while they are all
the running stores (or loads), as when every job ends before the next plan, completes
the whole dict at once (``_sole``, ``_sole_load``).

Errors are raised before anything changes: a call that raises leaves the manager as
it was.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, MutableMapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import TypeVar

from kvoffload.spec.errors import (
    BadCapacity,
    InvariantViolation,
    NotReadable,
    UnmatchedCompleteLoad,
)
from kvoffload.spec.outputs import Completion, Events, LoadPlan, StorePlan, StoreRejected
from kvoffload.spec.vocabulary import Key, LookupResult, Policy, Ticket

from .arc import ArcEviction, ArcView
from .errors import UnknownPolicy
from .eviction import EvictionOrder
from .lru import LruEviction
from .orphans import Orphans, OrphanView
from .records import completion, events, load_plan, store_plan

_MISS, _PENDING, _HIT = LookupResult.MISS, LookupResult.PENDING, LookupResult.HIT
T = TypeVar("T")
_NO_EVENTS = Events()
_NONE: frozenset[Key] = frozenset()
_LOG_FOLD = 64
"""Log entries ``prepare_store`` lets pile up before folding them (bounds the log when
nobody calls ``take_events``)."""
_NO_SLOTS = repeat(None)
"""``pop``'s default for every key of a call (``map`` stops at the shorter argument)."""
_NO_PLAN: tuple[Key, ...] = (object(),)
"""What ``_sole`` and ``_sole_load`` hold when no plan's keys are the whole of
``_storing`` / ``_readers``: a key no caller can name, so no completion matches it."""


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
    store_jobs: tuple[tuple[Key, Ticket], ...] = ()
    """Each STORING key's store ticket."""
    loads: tuple[tuple[Key, tuple[Ticket, ...]], ...] = ()
    """Each READY key with readers: its running loads' tickets, oldest first."""
    next_ticket: Ticket = 0


class OffloadManager:
    """An offloading tier of ``capacity`` slots with LRU or ARC eviction.

    ``policy`` is ``"lru"`` (vLLM 0.24's order, the default), ``"arc"`` or a
    :class:`kvoffload.spec.Policy`. ``net_events=False`` switches off the net-change
    view of ``take_events`` (an adapter with events of its own saves its upkeep). Not
    thread-safe: like vLLM's manager, it is
    driven by one scheduler thread.

    raises: BadCapacity, UnknownPolicy
    """

    __slots__ = ("_capacity", "_epoch", "_evictable", "_eviction", "_free", "_fresh",
                 "_load_orphans", "_log", "_more_loads", "_net_events", "_new_set", "_next_ticket",
                 "_policy",
                 "_readers", "_ready", "_removed", "_slot_jobs", "_sole", "_sole_load", "_step",
                 "_store_orphans", "_stored", "_storing")

    def __init__(self, capacity: int, policy: str | Policy = "lru", *,
                 net_events: bool = True) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise BadCapacity(f"a tier needs an int number of slots, at least one; "
                              f"got capacity={capacity!r}")
        self._policy = policy_of(policy)
        self._evictable: MutableMapping[Key, None]
        """The order's ``evictable`` mapping, which the hot paths update in place (one
        dict operation per key, no method call)."""
        self._eviction: EvictionOrder
        self._order = LruEviction() if self._policy is Policy.LRU else ArcEviction(capacity)
        self._capacity = capacity
        self._epoch = 0
        self._next_ticket: Ticket = 0
        """The ticket the next accepted plan takes; never reset, so tickets stay fresh."""
        self._storing: dict[Key, int] = {}
        self._slot_jobs: list[Ticket] = []
        """The ticket of the store that last took each slot (index: the slot), one per
        slot handed out since the last reset (``_fresh`` of them): a STORING key's store
        ticket is ``_slot_jobs[_storing[key]]``; entries of other slots are stale."""
        self._ready: dict[Key, int] = {}
        self._readers: dict[Key, Ticket] = {}
        """READY keys with at least one running load: the oldest load's ticket; a READY
        key not here is evictable."""
        self._more_loads: dict[Key, list[Ticket]] = {}
        """READY keys with more than one running load: the later loads' tickets, oldest
        first (rare, so the usual key costs one int, not a list)."""
        self._fresh = 0
        """Slots ``fresh .. capacity - 1`` were never handed out since the last reset."""
        self._free: list[int] = []
        self._store_orphans = Orphans()
        self._load_orphans = Orphans()
        self._stored: set[Key] = set()
        """READY keys the last ``take_events`` did not report as READY (log folded)."""
        self._removed: set[Key] = set()
        """Keys the last ``take_events`` reported READY (or stored) that no longer are
        (log folded)."""
        self._log: list[tuple[bool, Collection[Key]]] | None = [] if net_events else None
        """Changes of the READY set not yet folded into ``_stored`` / ``_removed``, in
        order: ``(True, keys)`` became READY, ``(False, keys)`` left it (keys: a tuple,
        or a frozenset of distinct keys). None with ``net_events=False``: nothing is
        recorded and ``take_events`` reports nothing."""
        self._new_set: tuple[tuple[Key, ...], tuple[bool, frozenset[Key]]] = (
            (), (True, _NONE))
        """The last accepted all-new ``prepare_store``'s keys (the plan's tuple itself)
        and the log entry its completion makes, ``(True, the frozenset its check for
        repeats built)``: when that tuple comes back whole in ``complete_store``, the log
        takes that entry, and ``take_events`` reports the set as it is instead of
        building it again (a memo of one call, never stale: a fact about objects it
        holds)."""
        self._step: list[tuple[bool, Collection[Key]]] = [(False, ()), (True, _NONE)]
        """The log a scheduler step's usual calls leave: the last evicting store's victims
        (``(False, victims)``, as logged), then what its completion logs (``(True,
        keys)``: the plan's keys, as the frozenset above for an all-new call, else as a
        tuple). A log equal to it is one distinct set of keys leaving and one distinct
        set, disjoint from it, coming (a plan's new keys are distinct, and were neither
        READY nor STORING; its victims were READY), so ``take_events`` reports it
        without a fold or a check. Equality, not identity, decides, so it can never be
        stale: a log with the same keys means the same news (the first value, an empty
        change, is such a log too)."""
        self._sole: tuple[Key, ...] = _NO_PLAN
        """The keys of the accepted ``prepare_store`` that found no store in flight (the
        plan's own tuple), else ``_NO_PLAN``. Until the next accepted store with new keys
        (which replaces it), ``_storing`` only loses keys, so while it is as long as this
        tuple it holds exactly these keys, in this order, under that plan's ticket: a
        ``complete_store`` naming this tuple (or an equal tuple) completes the whole dict
        at once (the *whole-dict completion*), with no per-key check."""
        self._sole_load: tuple[Key, ...] = _NO_PLAN
        """The same for loads: the keys of the accepted ``prepare_load`` that found no load
        running and named no key twice, else ``_NO_PLAN``; every ``prepare_load`` that adds
        a reader replaces it. While ``_readers`` is as long as this tuple and no block has
        a later load, it holds exactly these keys, in this order, each with that plan's
        ticket as its only load."""
        self._net_events = net_events

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def policy(self) -> Policy:
        return self._policy

    @property
    def net_events(self) -> bool:
        """Whether ``take_events`` reports the net change of the READY set (the
        default), or nothing (``net_events=False``, for adapters with events of their own)."""
        return self._net_events

    @property
    def pinned_slots(self) -> int:
        """Slots pinned by this epoch's running copies: STORING blocks plus READY blocks
        being read (O(1)). Copies a reset left running are not counted."""
        return len(self._storing) + len(self._readers)

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
        """Pin READY blocks for reading under a fresh ticket (one more reader each); say
        where they are.

        raises: NotReadable
        """
        if (type(keys) is tuple or type(keys) is list) and len(keys) == 1:  # decode's usual call
            key = keys[0]
            slot = self._ready.get(key)
            if slot is not None:
                ticket = self._next_ticket
                self._next_ticket = ticket + 1
                readers = self._readers
                if key in readers:
                    self._more_loads.setdefault(key, []).append(ticket)
                else:
                    readers[key] = ticket
                    del self._evictable[key]
                self._sole_load = _NO_PLAN
                return load_plan((key,), (slot,), self._epoch, ticket)
        if type(keys) is not tuple:
            keys = tuple(keys)
        ready = self._ready
        try:
            slots = tuple(map(ready.__getitem__, keys))
        except KeyError:
            unreadable = tuple(k for k in _distinct(keys) if k not in ready)
            raise NotReadable(
                f"only READY blocks can be loaded; absent or still being stored: "
                f"{list(unreadable)!r}", keys=unreadable) from None
        ticket = self._next_ticket
        self._next_ticket = ticket + 1
        readers, evictable = self._readers, self._evictable
        if readers.keys().isdisjoint(keys):  # no key is being read yet: the usual call
            sole = _NO_PLAN if readers else keys  # then these keys are all of _readers
            try:  # pinned as given, without a deduplication pass first
                for key in keys:
                    readers[key] = ticket
                    del evictable[key]
            except KeyError:  # a key named twice: its first occurrence pinned it
                sole = _NO_PLAN
                keys = _distinct(keys)
                for key in keys:
                    if key not in readers:  # not reached before the repeat
                        readers[key] = ticket
                        del evictable[key]
                slots = tuple(map(ready.__getitem__, keys))
            self._sole_load = sole or _NO_PLAN  # (no memo of an empty call)
            return load_plan(keys, slots, self._epoch, ticket)
        if len(set(keys)) != len(keys):
            keys = _distinct(keys)
            slots = tuple(map(ready.__getitem__, keys))
        self._sole_load = _NO_PLAN
        more = self._more_loads
        for key in keys:  # some blocks are being read already (popular prefixes)
            if key not in readers:
                readers[key] = ticket
                del evictable[key]
            elif key in more:
                more[key].append(ticket)
            else:
                more[key] = [ticket]
        return load_plan(keys, slots, self._epoch, ticket)

    def complete_load(self, keys: Iterable[Key], ticket: Ticket | None = None) -> Completion:
        """A load finished: one reader fewer; the last one leaving makes the block evictable.

        ``ticket=T`` (the ticket form) finishes load T of each key: on its READY block
        (``applied``), else on a copy a reset left running (``released``), else the key
        is ``ignored``. ``ticket=None`` (vLLM's form) finishes the oldest running load of
        the READY block, else of the oldest copy a reset left running; a key with
        neither is misuse.

        raises: UnmatchedCompleteLoad
        """
        readers, sole = self._readers, self._sole_load
        if len(readers) == len(sole) and (keys is sole or (type(keys) is tuple and keys == sole)
                                          ) and (ticket is None or readers[sole[0]] == ticket):
            readers.clear()  # the whole-dict completion: the plan's keys are all the readers
            evictable = self._evictable
            for key in sole:  # evictable in the call's order (a loop: OrderedDict.update
                evictable[key] = None  # builds a pair per key, slower on Python 3.11)
            return completion(keys, (), ())
        more = self._more_loads
        if type(keys) is tuple or type(keys) is list:
            if len(keys) == 1:
                key = keys[0]
                first = readers.get(key)
                if first is not None and (ticket is None or first == ticket) and key not in more:
                    del readers[key]  # decode's usual call: its only reader leaves
                    self._evictable[key] = None
                    return completion((key,), (), ())
            elif ticket is None:  # vLLM's form: the usual call
                finished = self._finish_running_loads(keys)
                if finished is not None:
                    return finished
        keys = _distinct(keys)
        if ticket is not None:
            return self._complete_loads_of_job(keys, ticket)
        if not all(map(readers.__contains__, keys)):
            return self._complete_stale_loads(keys)
        self._finish_loads(keys, None)
        return completion(keys, (), ())

    def _finish_running_loads(self, keys: tuple[Key, ...] | list[Key]) -> Completion | None:
        """``complete_load`` in vLLM's form when each key has a running load on its READY
        block (the usual call): each key's oldest load finishes, and a block whose last
        reader left becomes evictable. None, with nothing changed, otherwise."""
        readers, more, evictable = self._readers, self._more_loads, self._evictable
        if not more or more.keys().isdisjoint(keys):  # no key has a later load
            if not all(map(readers.__contains__, keys)):
                return None
            try:  # each key's only reader leaves
                for key in keys:
                    del readers[key]
                    evictable[key] = None
            except KeyError:  # a key named twice: its first occurrence finished it
                keys = _distinct(keys)
                for key in keys:
                    if key in readers:
                        del readers[key]
                        evictable[key] = None
        elif len(readers.keys() & keys) == len(keys):  # distinct, each with a running load
            self._finish_loads(keys, None)  # some blocks are read by later loads too
        else:
            return None
        return completion(keys if type(keys) is tuple else tuple(keys), (), ())

    def _finish_loads(self, keys: Sequence[Key], ticket: Ticket | None) -> None:
        """Load ``ticket`` (None: the oldest) of each key's READY block finishes (each key
        has it); the blocks whose last reader left become evictable."""
        readers, more, evictable = self._readers, self._more_loads, self._evictable
        for key in keys:
            later = more.get(key)
            if later is None:
                del readers[key]
                evictable[key] = None
                continue
            if ticket is None or readers[key] == ticket:  # the oldest load leaves
                readers[key] = later.pop(0)
            else:
                later.remove(ticket)
            if not later:
                del more[key]

    def _complete_stale_loads(self, keys: tuple[Key, ...]) -> Completion:
        """vLLM's form where some keys have no running load on a READY block: each must
        have a copy a reset left running (its oldest job finishes), else the call is
        rejected and nothing changes.

        raises: UnmatchedCompleteLoad
        """
        readers, orphans = self._readers, self._load_orphans
        stale = tuple(k for k in keys if k not in readers)
        unmatched = [k for k in stale if not orphans.has(k, None)]
        if unmatched:
            raise UnmatchedCompleteLoad(
                f"complete_load needs a matching prepare_load; no load outstanding "
                f"for {unmatched!r}", keys=tuple(unmatched))
        live = tuple(k for k in keys if k in readers)
        self._finish_loads(live, None)
        self._release(orphans, stale, None)
        return completion(live, stale, ())

    def _complete_loads_of_job(self, keys: tuple[Key, ...], ticket: Ticket) -> Completion:
        """The ticket form of ``complete_load``: load ``ticket`` of each key, wherever it runs."""
        readers, more = self._readers, self._more_loads
        applied, rest = [], []
        for key in keys:
            first = readers.get(key)
            if first is not None and (first == ticket or ticket in more.get(key, ())):
                applied.append(key)
            else:
                rest.append(key)
        self._finish_loads(applied, ticket)
        released, ignored = self._release(self._load_orphans, rest, ticket)
        return completion(tuple(applied), released, ignored)

    def _release(self, orphans: Orphans, keys: Sequence[Key], ticket: Ticket | None
                 ) -> tuple[tuple[Key, ...], tuple[Key, ...]]:
        """Job ``ticket`` (None: the oldest) of each key's copy a reset left running
        finishes; a copy whose last job finished frees its slot. Returns the keys
        released and the keys with no such copy (ignored)."""
        if not keys:
            return (), ()
        released, ignored = [], []
        free_list = self._free
        for key in keys:
            found, slot = orphans.release(key, ticket)
            if not found:
                ignored.append(key)
                continue
            released.append(key)
            if slot is not None:
                free_list.append(slot)
        return tuple(released), tuple(ignored)

    def touch(self, keys: Iterable[Key]) -> None:
        """Mark keys as used for the eviction order; absent keys are ignored."""
        if type(keys) is not tuple and type(keys) is not list:
            keys = tuple(keys)
        self._eviction.touched(keys, self._ready)

    def prepare_store(self, keys: Iterable[Key]) -> StorePlan | StoreRejected:
        """Give slots to the keys not yet present under a fresh ticket, evicting exactly
        as many blocks as needed, or reject the whole call and change nothing.

        Keys already STORING or READY are skipped, and protected from eviction.
        """
        if type(keys) is not tuple and type(keys) is not list:
            keys = tuple(keys)
        log = self._log
        if log is not None and len(log) > _LOG_FOLD:  # take_events is not being called
            self._fold_events()
        ready, storing = self._ready, self._storing
        new: tuple[Key, ...]
        new_set: frozenset[Key] | None = None
        if len(keys) == 1:
            key = keys[0]
            new = () if key in ready or key in storing else (key,)
        elif ready.keys().isdisjoint(keys) and (  # all new (no store in flight: no walk)
                not storing or storing.keys().isdisjoint(keys)):
            new_set = frozenset(keys)
            if len(new_set) == len(keys):  # none twice: the usual call
                new = tuple(keys)
            else:
                new_set = None
                new = _distinct(keys)
        else:
            new = tuple(dict.fromkeys([k for k in keys if k not in ready and k not in storing]))
        ticket = self._next_ticket
        if not new:
            self._next_ticket = ticket + 1
            return store_plan((), (), (), self._epoch, ticket)
        count = len(new)
        capacity, free_list, fresh = self._capacity, self._free, self._fresh
        free = len(free_list) + capacity - fresh
        needed = count - free
        protected: Collection[Key] = _NONE
        if needed > 0:
            readers = self._readers
            candidates = len(ready) - len(readers)
            # Call keys that are not new may be READY and evictable: they stay, so they
            # are no candidates. Count them exactly only if that can decide a rejection.
            others = len(keys) - count
            if others:
                protected = set(keys)
                if needed > candidates - others:
                    candidates -= sum(1 for k in protected if k in ready and k not in readers)
            if needed > candidates:
                return StoreRejected(needed=count, available=free + candidates)
        victims = self._eviction.stored(new, free, protected)
        if victims:
            if victims.__class__ is not tuple:
                victims = tuple(victims)
            free_list.extend(map(ready.pop, victims))
            if log is not None:
                left = (False, victims)
                log.append(left)
                if new_set is None:  # completions log the keys as a tuple
                    self._step = [left, (True, new)]
                else:
                    came = (True, new_set)
                    self._new_set = (new, came)
                    self._step = [left, came]
                    new_set = None
        if new_set is not None:
            self._new_set = (new, (True, new_set))
        self._next_ticket = ticket + 1
        # Slots as vLLM hands them out: never-used ones in order, then the free list, LIFO.
        slots: tuple[int, ...]
        slot_jobs = self._slot_jobs
        if fresh == capacity:
            if count == 1:
                slot = free_list.pop()
                slots = (slot,)
                slot_jobs[slot] = ticket
            else:
                slots = tuple(free_list[:-count - 1:-1])
                del free_list[-count:]
                for slot in slots:
                    slot_jobs[slot] = ticket
        else:
            from_fresh = min(count, capacity - fresh)
            self._fresh = fresh + from_fresh
            slot_jobs += repeat(ticket, from_fresh)
            reused = count - from_fresh
            if reused:
                taken = free_list[:-reused - 1:-1]
                del free_list[-reused:]
                for slot in taken:
                    slot_jobs[slot] = ticket
                slots = (*range(fresh, fresh + from_fresh), *taken)
            else:
                slots = tuple(range(fresh, fresh + from_fresh))
        self._sole = _NO_PLAN if storing else new  # then these keys are all of _storing
        if count == 1:
            storing[new[0]] = slots[0]
        else:
            storing.update(zip(new, slots))  # noqa: B905  # same length by construction; strict= parses a keyword per call
        return store_plan(new, slots, victims, self._epoch, ticket)

    def complete_store(
        self, keys: Iterable[Key], success: bool = True, ticket: Ticket | None = None
    ) -> Completion:
        """A store finished: its blocks become READY (success) or ABSENT, slot freed.

        ``ticket=T`` (the ticket form) finishes store T of each key: its STORING block
        (``applied``), else a copy a reset left running (``released``: its slot is
        freed), else the key is ``ignored``. ``ticket=None`` (vLLM's form) finishes the
        key's STORING block whatever its job, else the oldest store a reset left running,
        else the key is ignored.
        """
        storing, slot_jobs, sole = self._storing, self._slot_jobs, self._sole
        if success and len(storing) == len(sole) and (
                keys is sole or (type(keys) is tuple and keys == sole)) and (
                ticket is None or slot_jobs[storing[sole[0]]] == ticket):
            self._ready.update(storing)  # the whole-dict completion: the plan's keys are
            storing.clear()  # all of _storing, in its order (one C-level dict merge)
            evictable = self._evictable
            for key in sole:
                evictable[key] = None
            log = self._log
            if log is not None:  # the plan's own tuple: its entry may be built already
                plan, entry = self._new_set
                log.append(entry if keys is plan else (True, keys))
            return completion(keys, (), ())
        if success and (type(keys) is tuple or type(keys) is list):
            if len(keys) == 1:
                key = keys[0]
                if key in storing and (ticket is None or slot_jobs[storing[key]] == ticket):
                    done: tuple[Key, ...] = (key,)  # decode's usual call: one block READY
                    self._ready[key] = storing.pop(key)  # as _stores_done, without its call
                    self._evictable[key] = None
                    log = self._log
                    if log is not None:
                        log.append((True, done))
                    return completion(done, (), ())
            elif ticket is None:
                pop = storing.pop
                before = len(storing)
                slots = list(map(pop, keys, _NO_SLOTS))
                if before - len(storing) == len(keys):  # all STORING, none twice: the usual call
                    done = keys if isinstance(keys, tuple) else tuple(keys)
                    ready, evictable = self._ready, self._evictable  # as _stores_done, inline
                    for key, slot in zip(done, slots):  # noqa: B905  # same length
                        ready[key] = slot  # type: ignore[assignment]  # None ruled out above
                        evictable[key] = None
                    log = self._log
                    if log is not None:  # the plan's own tuple: its entry is built already
                        plan, entry = self._new_set
                        log.append(entry if done is plan else (True, done))
                    return completion(done, (), ())
                for key, slot in zip(keys, slots):  # noqa: B905  # same length; put back, sorted out below
                    if slot is not None:
                        storing[key] = slot
        pop = storing.pop
        applied: list[Key] = []
        taken: list[int] = []
        missed: list[Key] = []
        for key in keys:
            if ticket is not None and (key not in storing or slot_jobs[storing[key]] != ticket):
                missed.append(key)
                continue
            slot = pop(key, None)
            if slot is None:  # not STORING, or named twice: its first time took it
                missed.append(key)
                continue
            applied.append(key)
            taken.append(slot)
        done = tuple(applied)
        if done and success:
            self._stores_done(done, taken)
        elif done:  # failed: each block is ABSENT again, its slot free
            self._free.extend(taken)
            self._eviction.removed(done)
        if missed:
            finished = set(done)
            released, ignored = self._release(
                self._store_orphans, [k for k in dict.fromkeys(missed) if k not in finished],
                ticket)
            return completion(done, released, ignored)
        return completion(done, (), ())

    def _stores_done(self, keys: tuple[Key, ...], slots: Sequence[int]) -> None:
        """Successful stores of these distinct keys, their slots already taken out of
        ``_storing``: each becomes READY."""
        evictable, ready = self._evictable, self._ready
        for key, slot in zip(keys, slots):  # noqa: B905  # same length; strict= costs a keyword parse
            ready[key] = slot  # each block READY and evictable, in one pass
            evictable[key] = None
        log = self._log
        if log is not None:
            log.append((True, keys))

    def reset_cache(self) -> int:
        """Drop every block and start a new epoch; returns the new epoch.

        Copies still running (stores in flight, loads with readers) keep their slots
        and tickets until their completions arrive, so no new store is given a slot a
        running copy still writes or reads. Tickets are not reused.
        """
        epoch, ready, slot_jobs = self._epoch, self._ready, self._slot_jobs
        for key, slot in self._storing.items():
            self._store_orphans.add(key, epoch, slot, [slot_jobs[slot]])
        for key, loads in self._loads().items():
            self._load_orphans.add(key, epoch, ready[key], list(loads))
        stored, removed = self._fold_events()
        if self._log is not None:
            removed.update(k for k in ready if k not in stored)
        stored.clear()
        self._storing.clear()
        ready.clear()
        self._readers.clear()
        self._more_loads.clear()
        self._order.cleared()
        self._epoch = epoch + 1
        if self._store_orphans or self._load_orphans:
            held = self._store_orphans.slots() | self._load_orphans.slots()
            self._free = [s for s in range(self._capacity - 1, -1, -1) if s not in held]
            self._fresh = self._capacity
            slot_jobs += repeat(0, self._capacity - len(slot_jobs))  # every slot via the free list
        else:
            self._free = []
            self._fresh = 0
            slot_jobs.clear()
        return self._epoch

    def forget_running_copies(self) -> tuple[int, ...]:
        """Declare every copy a reset left running finished; free their slots.

        Not a spec operation: for environments that guarantee it themselves. vLLM's
        scheduler makes its workers flush the jobs in flight at a reset and drops
        their completions, so those completions never reach the manager; without this
        call their slots would stay held for good. After it, a late completion of such
        a copy finds nothing: ignored, except a load in vLLM's form
        (``UnmatchedCompleteLoad``). Returns the slots freed.
        """
        freed = tuple(sorted(self._store_orphans.slots() | self._load_orphans.slots(),
                             reverse=True))
        self._store_orphans.clear()
        self._load_orphans.clear()
        self._free.extend(freed)
        return freed

    def take_events(self) -> Events:
        """The net change of the READY set since the last call (stored / removed keys);
        always empty with ``net_events=False``."""
        log, stored, removed = self._log, self._stored, self._removed
        if log == self._step and not stored and not removed:  # a scheduler step's usual log
            (_, victims), (_, keys) = log
            log.clear()
            return events(frozenset(keys), frozenset(victims))
        if not stored and not removed:  # nothing folded: the log holds all the news
            if not log:  # nothing since the last call, or no net-change view
                return _NO_EVENTS
            if len(log) == 1:  # one call changed the READY set: its keys are the news
                became_ready, keys = log[0]
                log.clear()
                news = frozenset(keys)
                return events(news, _NONE) if became_ready else events(_NONE, news)
            # A key that changed once changed for good; one that changed twice or more
            # (left and came back, or the reverse) needs the fold below.
            if len(log) == 2 and log[0][0] is not log[1][0]:  # evictions and stores
                (first_ready, first), (_, second) = log
                one, other = frozenset(first), frozenset(second)
                if (len(one) == len(first) and len(other) == len(second)
                        and one.isdisjoint(other)):
                    log.clear()
                    return events(one, other) if first_ready else events(other, one)
            came: list[Key] = []
            left: list[Key] = []
            for became_ready, keys in log:
                if became_ready:
                    came += keys
                else:
                    left += keys
            news, gone = frozenset(came), frozenset(left)
            if (len(news) == len(came) and len(gone) == len(left)
                    and news.isdisjoint(gone)):
                log.clear()
                return events(news or _NONE, gone or _NONE)
        self._fold_events()
        taken = events(frozenset(stored) if stored else _NONE,
                       frozenset(removed) if removed else _NONE)
        stored.clear()
        removed.clear()
        return taken

    def _changed(self, became_ready: bool, keys: tuple[Key, ...]) -> None:
        """Log that ``keys`` became READY (or left it); nothing with ``net_events=False``.
        The hot paths append to the log inline."""
        log = self._log
        if log is not None:
            log.append((became_ready, keys))

    def _fold_events(self) -> tuple[set[Key], set[Key]]:
        """Fold the log into ``_stored`` / ``_removed`` (the net change since the last
        ``take_events``) and return those two sets."""
        stored, removed, log = self._stored, self._removed, self._log
        if log:
            _fold(log, stored, removed)
            log.clear()
        return stored, removed

    def _news(self) -> tuple[set[Key], set[Key]]:
        """The net change since the last ``take_events`` (stored, removed), as copies:
        the log stays as it is, so inspecting a manager changes none of its state."""
        stored, removed = set(self._stored), set(self._removed)
        _fold(self._log or (), stored, removed)
        return stored, removed

    @property
    def _order(self) -> EvictionOrder:
        """The eviction order. A fresh one may be assigned (seeded-bug variants do): the
        hot paths then update its ``evictable`` mapping."""
        return self._eviction

    @_order.setter
    def _order(self, order: EvictionOrder) -> None:
        self._eviction = order
        self._evictable = order.evictable

    # --- inspection --------------------------------------------------------------

    def view(self) -> ManagerView:
        """A snapshot of the whole state (O(size); for tests and reports)."""
        stored, removed = self._news()
        return ManagerView(
            epoch=self._epoch,
            storing=tuple(self._storing.items()),
            ready=tuple(self._ready.items()),
            readers=tuple((k, len(loads)) for k, loads in self._loads().items()),
            fresh=self._fresh,
            free=tuple(self._free),
            store_orphans=self._store_orphans.view(),
            load_orphans=self._load_orphans.view(),
            stored=frozenset(stored),
            removed=frozenset(removed),
            order=self._order.view(),
            store_jobs=tuple((k, self._slot_jobs[s]) for k, s in self._storing.items()),
            loads=tuple(self._loads().items()),
            next_ticket=self._next_ticket,
        )

    def _loads(self) -> dict[Key, tuple[Ticket, ...]]:
        """Each READY key with readers: its running loads' tickets, oldest first."""
        more = self._more_loads
        return {k: (first, *more.get(k, ())) for k, first in self._readers.items()}

    def check(self) -> None:
        """Raise :class:`InvariantViolation` if the bookkeeping is inconsistent (O(size)).

        raises: InvariantViolation
        """
        storing, ready, readers = self._storing, self._ready, self._readers
        if storing.keys() & ready.keys():
            raise InvariantViolation("phases_are_live", "a key is both STORING and READY")
        more = self._more_loads
        if not readers.keys() <= ready.keys() or not more.keys() <= readers.keys() or any(
                not later for later in more.values()):
            raise InvariantViolation("readers_only_on_ready_blocks",
                                     "a load runs on a block that is not READY, or a list "
                                     "of later loads is empty")
        store_orphans, load_orphans = self._store_orphans.view(), self._load_orphans.view()
        orphans = (*store_orphans, *load_orphans)
        slot_jobs = self._slot_jobs
        stores = {*(slot_jobs[s] for s in storing.values() if 0 <= s < len(slot_jobs)),
                  *(t for o in store_orphans for t in o.tickets)}
        loads = [*self._loads().values(), *(o.tickets for o in load_orphans)]
        load_tickets = {t for running in loads for t in running}
        if (len(slot_jobs) != self._fresh
                or any(not 0 <= s < len(slot_jobs) for s in storing.values())
                or stores & load_tickets
                or any(len(set(running)) != len(running) for running in loads)
                or any(not 0 <= t < self._next_ticket for t in stores | load_tickets)
                or any(len(o.tickets) != 1 for o in store_orphans)
                or any(not o.tickets for o in load_orphans)):
            raise InvariantViolation(
                "tickets_name_running_jobs",
                "a STORING key has no store ticket (the slots' tickets do not cover the slots "
                "handed out), a ticket names both "
                "a store and a load, a block's loads repeat a ticket, a ticket was never "
                "issued, or a copy a reset left running has a wrong number of jobs")
        used = [*storing.values(), *ready.values(), *(o.slot for o in orphans)]
        free = [*self._free, *range(self._fresh, self._capacity)]
        if len(set(used)) != len(used) or set(used) & set(free) or len(set(free)) != len(free):
            raise InvariantViolation("no_shared_slots",
                                     "a slot is held twice, or both held and free")
        if sorted(used + free) != list(range(self._capacity)):
            raise InvariantViolation("slots_in_range", "slots leak or lie outside the tier")
        stored, removed = self._news()
        if not stored <= ready.keys() or removed & ready.keys():
            raise InvariantViolation("events_replay_to_ready_set",
                                     "pending events disagree with the READY set")
        evictable = ready.keys() - readers.keys()
        self._order.check({**storing, **ready}, evictable)


def _fold(log: Iterable[tuple[bool, Collection[Key]]], stored: set[Key], removed: set[Key]
          ) -> None:
    """Apply logged changes of the READY set, in order, to a net change (``stored``,
    ``removed``)."""
    for became_ready, keys in log:
        came, went = (stored, removed) if became_ready else (removed, stored)
        for key in keys:
            if key in went:  # it had changed the other way since: no news
                went.remove(key)
            else:
                came.add(key)


def _distinct(keys: Iterable[Key]) -> tuple[Key, ...]:
    """The call's keys as a tuple, first occurrence first (a single key costs no dedupe)."""
    if isinstance(keys, (tuple, list)) and len(keys) == 1:
        return (keys[0],)
    return tuple(dict.fromkeys(keys))
