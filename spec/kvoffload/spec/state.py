"""The state of an offloading tier: a frozen, hashable, canonical value.

Everything an observer can learn through the API is a function of this value: which
keys exist in which phase, their readers and slots, the eviction order, the reset
epoch, the copies a reset left running, and what subscribers have been told. Sets are
frozensets and sequences are tuples whose order means something (recency), so two
states that no sequence of calls can tell apart compare equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from .errors import BadCapacity
from .recency import ArcLists, LruOrder
from .vocabulary import CopyKind, Key, Phase, Policy


@dataclass(frozen=True)
class Block:
    """A live block: its key, phase (STORING or READY), slot and number of readers."""

    key: Key
    phase: Phase
    slot: int
    readers: int = 0


@dataclass(frozen=True)
class Orphan:
    """A copy that ``reset_cache`` left running: its slot stays held until it completes.

    ``count`` is the number of completions still due (a store: 1; a load: its readers).
    """

    key: Key
    kind: CopyKind
    epoch: int
    slot: int
    count: int = 1


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

    @cached_property
    def table(self) -> Mapping[Key, Block]:
        """The live blocks by key (derived; not part of equality)."""
        return {block.key: block for block in self.blocks}

    def phase(self, key: Key) -> Phase:
        block = self.table.get(key)
        return Phase.ABSENT if block is None else block.phase

    def keys_in(self, phase: Phase) -> frozenset[Key]:
        return frozenset(b.key for b in self.blocks if b.phase is phase)

    def evictable(self) -> frozenset[Key]:
        """READY blocks with no readers: the only ones eviction may take (decision D4)."""
        return frozenset(b.key for b in self.blocks if b.phase is Phase.READY and not b.readers)

    def used_slots(self) -> frozenset[int]:
        return frozenset(b.slot for b in self.blocks) | frozenset(o.slot for o in self.orphans)

    def free_slots(self) -> tuple[int, ...]:
        """Slots held by no live block and no running copy, lowest first."""
        used = self.used_slots()
        return tuple(s for s in range(self.capacity) if s not in used)

    def in_flight(self) -> bool:
        """Is any copy running: a store (STORING), a load (readers), or an orphan?"""
        return bool(self.orphans) or any(
            b.phase is Phase.STORING or b.readers for b in self.blocks
        )

    def orphan(self, key: Key, kind: CopyKind, epoch: int | None) -> Orphan | None:
        """The running copy a stale completion refers to; the oldest when ``epoch`` is None."""
        found = [
            o for o in self.orphans
            if o.key == key and o.kind is kind and epoch in (None, o.epoch)
        ]
        return min(found, key=lambda o: o.epoch, default=None)


def initial_state(capacity: int, policy: Policy = Policy.LRU) -> CacheState:
    """An empty tier.

    raises: BadCapacity
    """
    if capacity < 1:
        raise BadCapacity(f"a tier needs at least one slot, got capacity={capacity}")
    recency: LruOrder | ArcLists = LruOrder() if policy is Policy.LRU else ArcLists(capacity)
    return CacheState(capacity=capacity, policy=policy, recency=recency)
