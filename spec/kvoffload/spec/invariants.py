"""Named invariants: total, pure predicates over a state, one guarantee each.

:func:`check_invariants` runs them all and raises :class:`InvariantViolation` naming
the first one broken; :data:`INVARIANTS` lists them for reports and the model checker.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain

from .errors import InvariantViolation
from .recency import ArcLists, LruOrder
from .state import CacheState
from .vocabulary import Phase, Policy


def phases_are_live(state: CacheState) -> bool:
    """Every recorded block is STORING or READY, each key at most once."""
    keys = [b.key for b in state.blocks]
    return len(keys) == len(set(keys)) and all(b.phase is not Phase.ABSENT for b in state.blocks)


def readers_only_on_ready_blocks(state: CacheState) -> bool:
    """Only READY blocks have readers; a block being written is never read."""
    return all(b.readers >= 0 and (b.phase is Phase.READY or not b.readers) for b in state.blocks)


def slots_in_range(state: CacheState) -> bool:
    """Every slot in use lies in ``0 .. capacity - 1``."""
    return all(0 <= s < state.capacity
               for s in chain((b.slot for b in state.blocks), (o.slot for o in state.orphans)))


def no_shared_slots(state: CacheState) -> bool:
    """No two live blocks or running copies share a slot (no use-after-free)."""
    slots = [b.slot for b in state.blocks] + [o.slot for o in state.orphans]
    return len(slots) == len(set(slots))


def orphans_are_past_copies(state: CacheState) -> bool:
    """Copies a reset left running come from earlier epochs and still owe a completion."""
    return all(0 <= o.epoch < state.epoch and o.count >= 1 for o in state.orphans)


def lru_queues_evictable_blocks(state: CacheState) -> bool:
    """Under LRU the queue holds exactly the evictable blocks, each once."""
    if not isinstance(state.recency, LruOrder):
        return True
    order = state.recency.order
    return len(order) == len(set(order)) and set(order) == state.evictable()


def arc_lists_hold_live_blocks(state: CacheState) -> bool:
    """Under ARC, t1 and t2 partition the live blocks; ghosts are disjoint and not live."""
    arc = state.recency
    if not isinstance(arc, ArcLists):
        return True
    lists = arc.t1 + arc.t2 + arc.b1 + arc.b2
    live = frozenset(state.table)
    return (len(lists) == len(set(lists)) and set(arc.t1 + arc.t2) == live
            and not live & set(arc.b1 + arc.b2))


def arc_sizes_bounded(state: CacheState) -> bool:
    """ARC's bounds: |t1|+|b1| <= c, |t1|+|t2|+|b1|+|b2| <= 2c, 0 <= p <= c."""
    arc = state.recency
    if not isinstance(arc, ArcLists):
        return True
    c = state.capacity
    return (arc.capacity == c and len(arc.t1) + len(arc.b1) <= c and 0 <= arc.p <= c
            and len(arc.t1) + len(arc.t2) + len(arc.b1) + len(arc.b2) <= 2 * c)


def policy_matches_state(state: CacheState) -> bool:
    """The recency model is the one the policy names."""
    expected = LruOrder if state.policy is Policy.LRU else ArcLists
    return isinstance(state.recency, expected)


def is_quiescent(state: CacheState) -> bool:
    """No copy is running: no store in flight, no reader, no orphan (liveness, D9)."""
    return not state.in_flight()


def quiescent_slots_reclaimable(state: CacheState) -> bool:
    """At quiescence every slot is free or holds an evictable block: nothing leaks (D9)."""
    if not is_quiescent(state):
        return True
    return len(state.free_slots()) + len(state.evictable()) == state.capacity


INVARIANTS: tuple[Callable[[CacheState], bool], ...] = (
    phases_are_live,
    readers_only_on_ready_blocks,
    slots_in_range,
    no_shared_slots,
    orphans_are_past_copies,
    policy_matches_state,
    lru_queues_evictable_blocks,
    arc_lists_hold_live_blocks,
    arc_sizes_bounded,
    quiescent_slots_reclaimable,
)


def broken_invariants(state: CacheState) -> tuple[str, ...]:
    """The names of the invariants ``state`` breaks, in :data:`INVARIANTS` order."""
    return tuple(inv.__name__ for inv in INVARIANTS if not inv(state))


def check_invariants(state: CacheState) -> None:
    """Raise :class:`InvariantViolation` naming the first invariant ``state`` breaks.

    raises: InvariantViolation
    """
    for invariant in INVARIANTS:
        if not invariant(state):
            raise InvariantViolation(invariant.__name__, (invariant.__doc__ or "").strip())
