"""The state of an offloading tier: a frozen, hashable, canonical value.

Everything an observer can learn through the API is a function of this value: which
keys exist in which phase, the jobs (tickets) running on them and their slots, the
eviction order, the reset epoch, the copies a reset left running, the next ticket, and
what subscribers have been told. Sets are frozensets and sequences are tuples whose
order means something (recency, oldest job first), so two states that no sequence of
calls can tell apart compare equal. Derived views are read-only, so frozen means frozen:
two equal states answer every question the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, Generic, TypeVar, overload

from .errors import BadCapacity
from .recency import ArcLists, LruOrder
from .vocabulary import CopyKind, Key, Phase, Policy, Ticket

_T = TypeVar("_T")


class derived(Generic[_T]):  # noqa: N801  # a decorator, named as cached_property is
    """A view derived from a state's fields, computed at its first read and kept in the
    instance's ``__dict__``, where every later read finds it without coming here:
    ``functools.cached_property`` without its lock, which on Python 3.11 made a first
    read cost three times as much (1.8 against 0.6 us; the judge and the model checker
    read a few views of every new state). A state is a value, so two threads reading
    one at once store equal views."""

    def __init__(self, func: Callable[[Any], _T]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> derived[_T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> _T: ...

    def __get__(self, instance: object, owner: type | None = None) -> _T | derived[_T]:
        if instance is None:
            return self
        value: _T = self.func(instance)
        instance.__dict__[self.name] = value
        return value


@dataclass(frozen=True)
class Block:
    """A live block: its key, phase (STORING or READY), slot and running jobs.

    ``ticket`` names the running store while STORING and is None once READY; ``loads``
    names the running loads (readers), oldest first.
    """

    key: Key
    phase: Phase
    slot: int
    ticket: Ticket | None = None
    loads: tuple[Ticket, ...] = ()

    @property
    def readers(self) -> int:
        """How many loads are reading the block."""
        return len(self.loads)


@dataclass(frozen=True)
class Orphan:
    """A copy that ``reset_cache`` left running: its slot stays held until it completes.

    ``tickets`` names the copy's jobs still due, oldest first (a store: exactly one; a
    load: one per reader); ``epoch`` is the epoch the jobs started in.
    """

    key: Key
    kind: CopyKind
    epoch: int
    slot: int
    tickets: tuple[Ticket, ...]

    @property
    def count(self) -> int:
        """How many completions are still due."""
        return len(self.tickets)


@dataclass(frozen=True)
class CacheState:
    """One offloading tier of ``capacity`` slots, numbered ``0 .. capacity - 1``."""

    capacity: int
    policy: Policy
    recency: LruOrder | ArcLists
    blocks: frozenset[Block] = frozenset()
    orphans: frozenset[Orphan] = frozenset()
    epoch: int = 0
    announced: frozenset[Key] = frozenset()
    """The READY set a subscriber has rebuilt from the events taken so far."""
    next_ticket: Ticket = 0
    """The ticket the next accepted plan issues; every ticket in the state is below it."""

    @derived
    def table(self) -> Mapping[Key, Block]:
        """The live blocks by key: derived from ``blocks``, read-only, not part of equality."""
        return MappingProxyType({block.key: block for block in self.blocks})

    def __getstate__(self) -> dict[str, Any]:
        """Copies and pickles carry the fields only; derived views are rebuilt on demand."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def phase(self, key: Key) -> Phase:
        block = self.table.get(key)
        return Phase.ABSENT if block is None else block.phase

    def keys_in(self, phase: Phase) -> frozenset[Key]:
        if phase is Phase.READY:
            return self._ready
        return frozenset(b.key for b in self.blocks if b.phase is phase)

    @derived
    def _ready(self) -> frozenset[Key]:
        """``keys_in(Phase.READY)``, derived once per state (each ``touch`` asks, and a
        model checker touches one state with every sequence of keys)."""
        return frozenset(b.key for b in self.blocks if b.phase is Phase.READY)

    def evictable(self) -> frozenset[Key]:
        """READY blocks with no readers: the only ones eviction may take (decision D4)."""
        return self._evictable

    @derived
    def _evictable(self) -> frozenset[Key]:
        """:meth:`evictable`, derived once per state (a store and the invariants ask)."""
        return frozenset(b.key for b in self.blocks if b.phase is Phase.READY and not b.loads)

    def used_slots(self) -> frozenset[int]:
        return self._used_slots

    @derived
    def _used_slots(self) -> frozenset[int]:
        """:meth:`used_slots`, derived once per state."""
        return frozenset(b.slot for b in self.blocks) | frozenset(o.slot for o in self.orphans)

    def free_slots(self) -> tuple[int, ...]:
        """Slots held by no live block and no running copy, lowest first."""
        return self._free_slots

    @derived
    def _free_slots(self) -> tuple[int, ...]:
        """:meth:`free_slots`, derived once per state."""
        return tuple(sorted(set(range(self.capacity)) - self.used_slots()))

    def in_flight(self) -> bool:
        """Is any copy running: a store (STORING), a load (readers), or an orphan?"""
        return bool(self.orphans) or any(
            b.phase is Phase.STORING or b.loads for b in self.blocks
        )

    def oldest_orphan(self, key: Key, kind: CopyKind) -> Orphan | None:
        """The copy of ``key`` and ``kind`` a reset left running first (lowest epoch):
        the one vLLM's completion form, which names no job, releases."""
        found = [o for o in self.orphans if o.key == key and o.kind is kind]
        return min(found, key=lambda o: o.epoch, default=None)

    def orphan_of_job(self, key: Key, kind: CopyKind, ticket: Ticket) -> Orphan | None:
        """The copy of ``key`` and ``kind`` a reset left running that job ``ticket`` owns."""
        for o in self.orphans:
            if o.key == key and o.kind is kind and ticket in o.tickets:
                return o
        return None


def changed(
    state: CacheState, *, recency: LruOrder | ArcLists | None = None,
    blocks: frozenset[Block] | None = None, orphans: frozenset[Orphan] | None = None,
    epoch: int | None = None, announced: frozenset[Key] | None = None,
    next_ticket: Ticket | None = None,
) -> CacheState:
    """``state`` with the fields given (None: as they are), a new value.

    What ``dataclasses.replace`` returns, built as the constructor builds it: a new
    instance whose ``__dict__`` holds the eight fields (and no derived view). Not by
    ``replace``, which looks the class's fields up again on every call, nor by the
    constructor, whose frozen ``__init__`` sets each field by a call of
    ``object.__setattr__`` (2.5 against 1.2 us): a model checker's exploration makes half
    a million transitions (none of these fields is ever None).
    """
    new = object.__new__(CacheState)
    new.__dict__.update(
        capacity=state.capacity, policy=state.policy,
        recency=state.recency if recency is None else recency,
        blocks=state.blocks if blocks is None else blocks,
        orphans=state.orphans if orphans is None else orphans,
        epoch=state.epoch if epoch is None else epoch,
        announced=state.announced if announced is None else announced,
        next_ticket=state.next_ticket if next_ticket is None else next_ticket,
    )
    return new


def renumbered(
    state: CacheState, held: tuple[Ticket, ...] = ()
) -> tuple[CacheState, dict[Ticket, Ticket]]:
    """``state`` with its tickets renumbered ``0, 1, ...`` in a canonical order, and the map.

    Transitions compare tickets only for equality, so renaming them by a bijection changes
    no answer (D7, D11): a bounded search keeps one state per renaming class. The order
    is the holders' slots (unique by ``no_shared_slots``), each holder's tickets in its
    own order; ``held`` names tickets the environment keeps besides (a finished job's,
    to report late), numbered after the state's. ``next_ticket`` becomes the next unused
    number. Two states that differ only in their tickets' numbers renumber equal.
    """
    holders: list[tuple[int, tuple[Ticket, ...]]] = [
        (b.slot, (() if b.ticket is None else (b.ticket,)) + b.loads) for b in state.blocks]
    holders += [(o.slot, o.tickets) for o in state.orphans]
    names: dict[Ticket, Ticket] = {}
    for _, tickets in sorted(holders, key=lambda holder: holder[0]):
        for ticket in tickets:
            names.setdefault(ticket, len(names))
    for ticket in held:
        names.setdefault(ticket, len(names))
    blocks = frozenset(Block(b.key, b.phase, b.slot, None if b.ticket is None else names[b.ticket],
                             tuple(names[t] for t in b.loads)) for b in state.blocks)
    orphans = frozenset(Orphan(o.key, o.kind, o.epoch, o.slot, tuple(names[t] for t in o.tickets))
                        for o in state.orphans)
    return changed(state, blocks=blocks, orphans=orphans, next_ticket=len(names)), names


def initial_state(capacity: int, policy: Policy = Policy.LRU) -> CacheState:
    """An empty tier.

    raises: BadCapacity
    """
    if capacity < 1:
        raise BadCapacity(f"a tier needs at least one slot, got capacity={capacity}")
    recency: LruOrder | ArcLists = LruOrder() if policy is Policy.LRU else ArcLists(capacity)
    return CacheState(capacity=capacity, policy=policy, recency=recency)
