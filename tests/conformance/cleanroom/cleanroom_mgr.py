"""An offloading manager written from kvoffload's documentation alone.

A helper of session 41 wrote it as an engine developer would, from ``README.md``,
``docs/native-api.md``, ``docs/spec.md`` and ``docs/conformance.md``, without reading
``spec/``, ``impl/`` or ``conformance/`` source, and checked it with ``kvoffload check``
until it conformed (it did at the first run). It offers the native API (eight methods,
the spec's output records and errors) with the lifecycle, the two completion forms, the
net-change events and the eviction policies of docs/spec.md: LRU as D10 defines it (one
queue of evictable blocks) and ARC as D10 defines it (Megiddo and Modha's lists with an
integer ``p``, adapted to blocks that are pinned or being written). Only the spec's
vocabulary (records, enums, errors) is imported, as docs/native-api.md asks: everything
else is computed here. It favours plain code over speed (a victim search walks a list).

Check it::

    kvoffload check tests/conformance/cleanroom/cleanroom_mgr.py:Manager
    kvoffload check tests/conformance/cleanroom/cleanroom_mgr.py:Manager --policy arc --level exact

``tests/conformance/test_cleanroom.py`` does so for both policies.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

from kvoffload.spec.errors import BadCapacity, NotReadable, UnmatchedCompleteLoad
from kvoffload.spec.outputs import Completion, Events, LoadPlan, StorePlan, StoreRejected
from kvoffload.spec.vocabulary import LookupResult

Key = Hashable
Order = OrderedDict[Key, None]
"""An eviction order: keys, least recent first."""


@dataclass
class _Block:
    """A live block: STORING while ``store`` holds its job's ticket, READY once None."""

    slot: int
    store: int | None
    loads: list[int] = field(default_factory=list)  # the running loads' tickets, oldest first

    @property
    def ready(self) -> bool:
        return self.store is None

    @property
    def evictable(self) -> bool:
        """D4: READY and not being read (the caller also protects the keys it names)."""
        return self.store is None and not self.loads


@dataclass
class _Copy:
    """A copy a reset left running (D7): it holds its slot until its last job reports."""

    key: Key
    is_store: bool
    slot: int
    tickets: list[int]  # the jobs still due, oldest first


def _unique(keys: Iterable[Key]) -> list[Key]:
    """The call's keys, duplicates dropped, first occurrence wins (D2)."""
    return list(dict.fromkeys(keys))


class Manager:
    """A KV-block offloading tier of ``capacity`` slots, evicting by LRU or ARC."""

    def __init__(self, capacity: int, policy: str = "lru") -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise BadCapacity(f"capacity must be a positive int, got {capacity!r}")
        if policy not in ("lru", "arc"):
            raise ValueError(f"policy must be 'lru' or 'arc', got {policy!r}")
        self._capacity = capacity
        self._arc = policy == "arc"
        self._blocks: dict[Key, _Block] = {}
        self._copies: list[_Copy] = []  # in the order the resets left them: oldest first
        self._free: set[int] = set(range(capacity))
        self._epoch = 0
        self._next_ticket = 0
        self._announced: set[Key] = set()  # the READY set as the last take_events left it
        self._queue: Order = OrderedDict()  # LRU: the evictable blocks
        self._t1: Order = OrderedDict()  # ARC: live blocks used once,
        self._t2: Order = OrderedDict()  # used again,
        self._b1: Order = OrderedDict()  # and the ghosts of the keys evicted from each
        self._b2: Order = OrderedDict()
        self._p = 0  # ARC: the target size of t1

    # -- the native API (docs/native-api.md) ------------------------------------------

    def lookup(self, key: Key) -> LookupResult:
        """D1: MISS if absent, PENDING while its store runs, HIT once READY."""
        block = self._blocks.get(key)
        if block is None:
            return LookupResult.MISS
        return LookupResult.HIT if block.ready else LookupResult.PENDING

    def prepare_load(self, keys: Iterable[Key]) -> LoadPlan:
        """Pin every key (all READY, else nothing changes: D6) under a fresh ticket."""
        wanted = _unique(keys)
        bad = tuple(k for k in wanted if k not in self._blocks or not self._blocks[k].ready)
        if bad:
            raise NotReadable(f"not READY: {list(bad)!r}", keys=bad)
        ticket = self._issue()
        for key in wanted:
            block = self._blocks[key]
            if not block.loads:
                self._queue.pop(key, None)  # pinned: out of the LRU queue (ARC keeps it)
            block.loads.append(ticket)
        slots = tuple(self._blocks[k].slot for k in wanted)
        return LoadPlan(tuple(wanted), slots, self._epoch, ticket)

    def complete_load(self, keys: Iterable[Key], ticket: int | None = None) -> Completion:
        """One reader fewer per key: the job ``ticket`` names, or (vLLM's form) the oldest."""
        wanted = _unique(keys)
        if ticket is None:
            return self._complete_untagged_loads(wanted)
        applied: list[Key] = []
        released: list[Key] = []
        ignored: list[Key] = []
        for key in wanted:
            block = self._blocks.get(key)
            copy = self._copy_holding(key, False, ticket)
            if block is not None and ticket in block.loads:
                self._end_load(key, block, ticket)
                applied.append(key)
            elif copy is not None:
                self._end_copy_job(copy, ticket)
                released.append(key)
            else:
                ignored.append(key)  # a late, duplicate or unknown report: no change
        return Completion(tuple(applied), tuple(released), tuple(ignored))

    def touch(self, keys: Iterable[Key]) -> None:
        """Uses: walked backwards, so the call's first key ends most recent (D10)."""
        for key in reversed(_unique(keys)):
            block = self._blocks.get(key)
            if block is None:
                continue  # absent keys are ignored
            if not self._arc:
                if block.evictable:
                    self._queue.move_to_end(key)
            elif block.ready:  # ARC: a READY key goes to the most-recent end of t2
                self._t1.pop(key, None)
                self._t2.pop(key, None)
                self._t2[key] = None
            else:  # ARC: a STORING key moves to the most-recent end of its own list
                (self._t1 if key in self._t1 else self._t2).move_to_end(key)

    def prepare_store(self, keys: Iterable[Key]) -> StorePlan | StoreRejected:
        """Start storing the call's absent keys, evicting exactly what is needed (D3, D4,
        D13), or reject the whole call and change nothing."""
        named = _unique(keys)
        protected = set(named)
        new = [k for k in named if k not in self._blocks]  # present keys are skipped
        shortfall = len(new) - len(self._free)
        if shortfall > 0:
            candidates = sum(
                1 for k, b in self._blocks.items() if b.evictable and k not in protected
            )
            if candidates < shortfall:
                return StoreRejected(len(new), len(self._free) + candidates)
        ticket = self._issue()
        evicted: list[Key] = []
        if not self._arc:
            for _ in range(max(0, shortfall)):
                victim = next(k for k in self._queue if k not in protected)
                self._evict(victim)
                evicted.append(victim)
        slots: list[int] = []
        for key in new:
            if self._arc:
                evicted.extend(self._arc_request(key, protected))
            slot = min(self._free)  # any free slot would do (D12); the lowest is simplest
            self._free.remove(slot)
            self._blocks[key] = _Block(slot, ticket)
            slots.append(slot)
        return StorePlan(tuple(new), tuple(slots), tuple(evicted), self._epoch, ticket)

    def complete_store(
        self, keys: Iterable[Key], success: bool = True, ticket: int | None = None
    ) -> Completion:
        """Per key, first match wins: the live STORING block (whose job is ``ticket``, or
        whatever its job in vLLM's form), else a store a reset left running, else ignored."""
        applied: list[Key] = []
        released: list[Key] = []
        ignored: list[Key] = []
        for key in _unique(keys):
            block = self._blocks.get(key)
            copy = (
                self._oldest_copy(key, True)
                if ticket is None
                else self._copy_holding(key, True, ticket)
            )
            if block is not None and not block.ready and ticket in (None, block.store):
                self._finish_store(key, block, success)
                applied.append(key)
            elif copy is not None:
                self._end_copy_job(copy, copy.tickets[0])
                released.append(key)
            else:
                ignored.append(key)
        return Completion(tuple(applied), tuple(released), tuple(ignored))

    def reset_cache(self) -> int:
        """Drop every block; running copies keep their slots as copies (D7). The eviction
        order is emptied: LRU's queue, and ARC's four lists with ``p`` back to 0."""
        for key, block in self._blocks.items():
            if block.store is not None:
                self._copies.append(_Copy(key, True, block.slot, [block.store]))
            elif block.loads:
                self._copies.append(_Copy(key, False, block.slot, list(block.loads)))
            else:
                self._free.add(block.slot)
        self._blocks.clear()
        for order in (self._queue, self._t1, self._t2, self._b1, self._b2):
            order.clear()
        self._p = 0
        self._epoch += 1
        return self._epoch

    def take_events(self) -> Events:
        """D8: the net change of the READY set since the last call."""
        ready = {k for k, b in self._blocks.items() if b.ready}
        events = Events(frozenset(ready - self._announced), frozenset(self._announced - ready))
        self._announced = ready
        return events

    # -- helpers ------------------------------------------------------------------------

    def _issue(self) -> int:
        """A fresh ticket: never issued before by this manager, resets included."""
        ticket = self._next_ticket
        self._next_ticket += 1
        return ticket

    def _complete_untagged_loads(self, wanted: list[Key]) -> Completion:
        """vLLM's form: the live block's oldest load, else the oldest copy a reset left
        running; a key with neither fails the whole call before anything changes."""
        live: list[tuple[Key, _Block]] = []
        copies: list[tuple[Key, _Copy]] = []
        unmatched: list[Key] = []
        for key in wanted:
            block = self._blocks.get(key)
            copy = self._oldest_copy(key, False)
            if block is not None and block.loads:
                live.append((key, block))
            elif copy is not None:
                copies.append((key, copy))
            else:
                unmatched.append(key)
        if unmatched:
            raise UnmatchedCompleteLoad(
                f"no load outstanding: {unmatched!r}", keys=tuple(unmatched)
            )
        for key, block in live:
            self._end_load(key, block, block.loads[0])
        for _, copy in copies:
            self._end_copy_job(copy, copy.tickets[0])
        return Completion(tuple(k for k, _ in live), tuple(k for k, _ in copies), ())

    def _oldest_copy(self, key: Key, is_store: bool) -> _Copy | None:
        return next((c for c in self._copies if c.key == key and c.is_store == is_store), None)

    def _copy_holding(self, key: Key, is_store: bool, ticket: int) -> _Copy | None:
        return next(
            (c for c in self._copies
             if c.key == key and c.is_store == is_store and ticket in c.tickets),
            None,
        )

    def _end_copy_job(self, copy: _Copy, ticket: int) -> None:
        copy.tickets.remove(ticket)
        if not copy.tickets:  # its last job: the slot is free
            self._copies.remove(copy)
            self._free.add(copy.slot)

    def _end_load(self, key: Key, block: _Block, ticket: int) -> None:
        block.loads.remove(ticket)
        if not block.loads:
            self._now_evictable(key)

    def _finish_store(self, key: Key, block: _Block, success: bool) -> None:
        if success:
            block.store = None
            self._now_evictable(key)
        else:  # D5: ABSENT, its slot free at once, no ghost
            del self._blocks[key]
            self._free.add(block.slot)
            self._t1.pop(key, None)
            self._t2.pop(key, None)

    def _now_evictable(self, key: Key) -> None:
        """A block became evictable: to the most-recent end (of its own list, under ARC)."""
        if not self._arc:
            self._queue[key] = None
        else:
            (self._t1 if key in self._t1 else self._t2).move_to_end(key)

    def _evict(self, key: Key) -> None:
        block = self._blocks.pop(key)
        self._free.add(block.slot)
        self._queue.pop(key, None)

    def _arc_request(self, key: Key, protected: set[Key]) -> list[Key]:
        """One request of the paper for a new key (D10): adapt ``p``, REPLACE when no slot
        is free, insert, trim the ghosts. Returns the victim, if any, as a list."""
        c = self._capacity
        if key in self._b1:
            self._p = min(c, self._p + max(1, len(self._b2) // len(self._b1)))
        elif key in self._b2:
            self._p = max(0, self._p - max(1, len(self._b1) // len(self._b2)))
        victims = [] if self._free else [self._arc_replace(key, protected)]
        if key in self._b1 or key in self._b2:  # a ghost hit enters t2
            self._b1.pop(key, None)
            self._b2.pop(key, None)
            self._t2[key] = None
        else:
            self._t1[key] = None
        while self._b1 and len(self._t1) + len(self._b1) > c:
            self._b1.popitem(last=False)
        while len(self._t1) + len(self._t2) + len(self._b1) + len(self._b2) > 2 * c:
            (self._b2 if self._b2 else self._b1).popitem(last=False)
        return victims

    def _arc_replace(self, key: Key, protected: set[Key]) -> Key:
        """REPLACE(x, p): the least recent evictable key of the preferred list, else of
        the other; it becomes the most recent ghost of its list."""
        prefer_t1 = len(self._t1) > self._p or (key in self._b2 and len(self._t1) == self._p)
        lists = [(self._t1, self._b1), (self._t2, self._b2)]
        for live, ghosts in lists if prefer_t1 else reversed(lists):
            for candidate in live:
                if self._blocks[candidate].evictable and candidate not in protected:
                    del live[candidate]
                    ghosts[candidate] = None
                    self._evict(candidate)
                    return candidate
        raise RuntimeError("no evictable block: prepare_store counted one")  # unreachable
