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
from .vocabulary import CopyKind, Phase, Policy, Ticket


def phases_are_live(state: CacheState) -> bool:
    """Every recorded block is STORING or READY, each key at most once."""
    keys = [b.key for b in state.blocks]
    return len(keys) == len(set(keys)) and all(b.phase is not Phase.ABSENT for b in state.blocks)


def readers_only_on_ready_blocks(state: CacheState) -> bool:
    """Only READY blocks have readers; a block being written is never read."""
    return all(b.phase is Phase.READY or not b.loads for b in state.blocks)


def stores_hold_their_ticket(state: CacheState) -> bool:
    """A STORING block holds its store job's ticket; a READY block holds none (canonical)."""
    return all((b.ticket is not None) == (b.phase is Phase.STORING) for b in state.blocks)


def slots_in_range(state: CacheState) -> bool:
    """Every slot in use lies in ``0 .. capacity - 1``."""
    return all(0 <= s < state.capacity
               for s in chain((b.slot for b in state.blocks), (o.slot for o in state.orphans)))


def no_shared_slots(state: CacheState) -> bool:
    """No two live blocks or running copies share a slot (no use-after-free)."""
    slots = [b.slot for b in state.blocks] + [o.slot for o in state.orphans]
    return len(slots) == len(set(slots))


def epoch_counts_resets(state: CacheState) -> bool:
    """The epoch counts resets from 0, so it is never negative."""
    return state.epoch >= 0


def orphans_are_past_copies(state: CacheState) -> bool:
    """Copies a reset left running come from earlier epochs and still owe a completion."""
    return all(0 <= o.epoch < state.epoch and o.tickets for o in state.orphans)


def store_orphans_owe_one_completion(state: CacheState) -> bool:
    """A store a reset left running is one job: it holds exactly one ticket."""
    return all(o.kind is not CopyKind.STORE or len(o.tickets) == 1 for o in state.orphans)


def one_orphan_per_key_and_epoch(state: CacheState) -> bool:
    """A reset leaves at most one running copy per key (a key had one block), so no two
    orphans share a key and an epoch."""
    copies = [(o.key, o.epoch) for o in state.orphans]
    return len(copies) == len(set(copies))


def tickets_were_issued(state: CacheState) -> bool:
    """Every ticket in the state was issued: ``0 <= ticket < next_ticket``."""
    return all(0 <= ticket < state.next_ticket for ticket, _ in _jobs(state))


def tickets_name_one_job(state: CacheState) -> bool:
    """A ticket names one job: never both a store and a load, never both running live and
    left running by a reset (nor by two resets), never twice on one block or copy."""
    owner: dict[Ticket, tuple[CopyKind, int | None]] = {}
    for ticket, job in _jobs(state):
        if owner.setdefault(ticket, job) != job:
            return False
    return all(len(set(b.loads)) == len(b.loads) for b in state.blocks) and all(
        len(set(o.tickets)) == len(o.tickets) for o in state.orphans)


def _jobs(state: CacheState) -> list[tuple[Ticket, tuple[CopyKind, int | None]]]:
    """Every ticket in the state with its job's kind and epoch (None: running live)."""
    jobs: list[tuple[Ticket, tuple[CopyKind, int | None]]] = []
    store, load = (CopyKind.STORE, None), (CopyKind.LOAD, None)
    for b in state.blocks:
        if b.ticket is not None:
            jobs.append((b.ticket, store))
        for t in b.loads:
            jobs.append((t, load))
    for o in state.orphans:
        job = (o.kind, o.epoch)
        for t in o.tickets:
            jobs.append((t, job))
    return jobs


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


INVARIANTS: tuple[Callable[[CacheState], bool], ...] = (
    phases_are_live,
    readers_only_on_ready_blocks,
    stores_hold_their_ticket,
    slots_in_range,
    no_shared_slots,
    epoch_counts_resets,
    orphans_are_past_copies,
    store_orphans_owe_one_completion,
    one_orphan_per_key_and_epoch,
    tickets_were_issued,
    tickets_name_one_job,
    policy_matches_state,
    lru_queues_evictable_blocks,
    arc_lists_hold_live_blocks,
    arc_sizes_bounded,
)
"""Each fires on a state that breaks it alone (``tests/spec/test_invariants.py``). At
quiescence every slot is free or evictable (D9) follows from ``phases_are_live``,
``slots_in_range`` and ``no_shared_slots``, so it is not listed (``docs/spec.md``)."""


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
