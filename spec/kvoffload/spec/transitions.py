"""One pure transition per operation: ``op(state, ...) -> (new_state, output)``.

Body order, everywhere: preconditions (each raising a typed misuse error and leaving
the state as it was), then the computation, then the new state. Duplicate keys in one
call are dropped, first occurrence wins (decision D2). The decisions cited as ``Dn``
are explained in ``docs/spec.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import MappingProxyType

from .errors import ChoiceNotAllowed, NotEvictable, NotReadable, UnmatchedCompleteLoad
from .invariants import broken_invariants  # noqa: F401 - named by the contracts (pre:)
from .outputs import Completion, Events, LoadPlan, StorePlan, StoreRejected
from .recency import ArcLists, LruOrder
from .state import Block, CacheState, Orphan, changed
from .vocabulary import CopyKind, Key, LookupResult, Phase, Ticket, unique

_LOOKUP = MappingProxyType({Phase.ABSENT: LookupResult.MISS, Phase.STORING: LookupResult.PENDING,
                            Phase.READY: LookupResult.HIT})


def lookup(state: CacheState, key: Key) -> tuple[CacheState, LookupResult]:
    """MISS iff absent, PENDING iff STORING, HIT iff READY; never changes the state (D1).

    pre: not broken_invariants(state)
    post: __return__[0] is state
    """
    return state, _LOOKUP[state.phase(key)]


def prepare_load(state: CacheState, keys: Iterable[Key]) -> tuple[CacheState, LoadPlan]:
    """Pin READY blocks for reading under a fresh ticket: one more reader each; say
    where they are (D6, D7).

    pre: not broken_invariants(state)
    post: all(__return__[0].table[k].loads[-1] == __return__[1].ticket for k in __return__[1].keys)
    post: __return__[0].epoch == state.epoch
    post: __return__[0].next_ticket == state.next_ticket + 1
    raises: NotReadable
    """
    keys = unique(keys)
    table = state.table
    unreadable = tuple(k for k in keys if k not in table or table[k].phase is not Phase.READY)
    if unreadable:
        raise NotReadable(f"only READY blocks can be loaded; not READY: {unreadable!r}",
                          keys=unreadable)
    ticket = state.next_ticket
    recency = state.recency
    for key in keys:
        if not table[key].loads:
            recency = recency.pinned(key)
    old = frozenset(table[k] for k in keys)
    pinned = frozenset(Block(key=b.key, phase=b.phase, slot=b.slot, ticket=b.ticket,
                             loads=(*b.loads, ticket)) for b in old)
    slots = tuple(table[k].slot for k in keys)
    new = changed(state, blocks=(state.blocks - old) | pinned, recency=recency,
                  next_ticket=ticket + 1)
    return new, LoadPlan(keys, slots, state.epoch, ticket)


def complete_load(
    state: CacheState, keys: Iterable[Key], ticket: Ticket | None = None
) -> tuple[CacheState, Completion]:
    """A load finished: one reader fewer; the last one leaving makes the block evictable.

    ``ticket=T`` (the ticket form) finishes job T wherever it runs: on a live block
    (``applied``), on a copy a reset left running (``released``), else the key is
    ``ignored``. ``ticket=None`` is vLLM's form: the oldest running load of the live
    block, else of the oldest copy a reset left running; a key with neither is misuse
    and changes nothing (D5, D7).

    pre: not broken_invariants(state)
    post: __return__[0].keys_in(Phase.READY) == state.keys_in(Phase.READY)
    post: len(__return__[0].orphans) <= len(state.orphans)
    raises: UnmatchedCompleteLoad
    """
    keys = unique(keys)
    jobs = {k: _match(state, k, CopyKind.LOAD, ticket) for k in keys}
    if ticket is None:
        unmatched = tuple(k for k, (outcome, _) in jobs.items() if outcome == IGNORED)
        if unmatched:
            raise UnmatchedCompleteLoad(
                f"complete_load needs a matching prepare_load; no load outstanding for "
                f"{unmatched!r}", keys=unmatched)
    applied, released, ignored = _sorted_out(keys, jobs)
    if not applied and not released:
        return state, Completion(ignored=ignored)  # no job finished: nothing changes
    old = frozenset(state.table[k] for k in applied)
    read = frozenset(Block(key=b.key, phase=b.phase, slot=b.slot, ticket=b.ticket,
                           loads=_without(b.loads, jobs[b.key][1])) for b in old)
    freed = tuple(k for k in applied if state.table[k].readers == 1)
    orphans = _finishing(state, {k: jobs[k][1] for k in released}, CopyKind.LOAD)
    new = changed(state, blocks=(state.blocks - old) | read, orphans=orphans,
                  recency=state.recency.evictable(freed))
    return new, Completion(applied=applied, released=released, ignored=ignored)


def touch(state: CacheState, keys: Iterable[Key]) -> tuple[CacheState, None]:
    """Mark keys as used for the eviction order; absent keys are ignored (D10).

    pre: not broken_invariants(state)
    post: __return__[0].blocks == state.blocks
    """
    recency = state.recency.touched(unique(keys), state.keys_in(Phase.READY))
    if recency is state.recency or recency == state.recency:
        return state, None  # the order is as it was: nothing changes
    return changed(state, recency=recency), None


def prepare_store(
    state: CacheState,
    keys: Iterable[Key],
    victims: Sequence[Key] | None = None,
    slots: Sequence[int] | None = None,
) -> tuple[CacheState, StorePlan | StoreRejected]:
    """Allocate slots for the keys not yet present under a fresh ticket, evicting exactly
    as many blocks as needed, or reject the whole call and change nothing (D3, D4, D7).

    Keys already STORING or READY are skipped and protected from eviction. Each new key
    is one request of the eviction policy, in call order: adapt, evict if no slot is
    free for it, insert (D10). ``victims`` and ``slots`` are a caller's choices to check
    (any allowed victims, any free slots); left out, the policy's exact victims and the
    lowest free slots are taken.

    pre: not broken_invariants(state)
    post: __return__[0] == state or isinstance(__return__[1], StorePlan)
    post: not isinstance(__return__[1], StorePlan) or all(__return__[0].phase(k) is Phase.STORING for k in __return__[1].keys)
    post: not isinstance(__return__[1], StorePlan) or all(state.phase(k) is Phase.READY for k in __return__[1].evicted)
    post: not isinstance(__return__[1], StorePlan) or __return__[1].ticket == state.next_ticket
    raises: ChoiceNotAllowed
    """
    keys = unique(keys)
    table = state.table
    new_keys = tuple(k for k in keys if k not in table)  # ABSENT: no live block
    candidates = state.evictable() - frozenset(keys)
    free = len(state.free_slots())
    needed = max(0, len(new_keys) - free)
    if needed > len(candidates):
        return state, StoreRejected(needed=len(new_keys), available=free + len(candidates))
    _check_victims(candidates, needed, victims)
    recency, evicted = _requests(state.recency, new_keys, free, candidates, victims)
    if evicted:
        blocks = state.blocks - frozenset(table[k] for k in evicted)
        open_slots = tuple(sorted({*state.free_slots(), *(table[k].slot for k in evicted)}))
    else:  # the free slots as they are, lowest first
        blocks, open_slots = state.blocks, state.free_slots()
    chosen = _choose_slots(open_slots, len(new_keys), slots)
    ticket = state.next_ticket
    stored = frozenset(Block(k, Phase.STORING, s, ticket)
                       for k, s in zip(new_keys, chosen, strict=True))
    new = changed(state, blocks=blocks | stored, recency=recency, next_ticket=ticket + 1)
    return new, StorePlan(new_keys, chosen, evicted, state.epoch, ticket)


def complete_store(
    state: CacheState, keys: Iterable[Key], success: bool = True, ticket: Ticket | None = None
) -> tuple[CacheState, Completion]:
    """A store finished: its blocks become READY (success) or ABSENT, slot freed (D5).

    ``ticket=T`` (the ticket form) finishes job T wherever it runs: a STORING block of
    that job (``applied``), a store a reset left running (``released``: its slot is
    freed), else the key is ``ignored``. ``ticket=None`` is vLLM's form: the STORING
    block of the key whatever its job, else the oldest store a reset left running, else
    ignored (D7).

    pre: not broken_invariants(state)
    post: not any(__return__[0].phase(k) is Phase.STORING for k in __return__[1].applied)
    post: __return__[0].used_slots() <= state.used_slots()
    post: __return__[0].next_ticket == state.next_ticket
    """
    keys = unique(keys)
    jobs = {k: _match(state, k, CopyKind.STORE, ticket) for k in keys}
    applied, released, ignored = _sorted_out(keys, jobs)
    if not applied and not released:
        return state, Completion(ignored=ignored)  # no job finished: nothing changes
    finished = frozenset(state.table[k] for k in applied)
    orphans = _finishing(state, {k: jobs[k][1] for k in released}, CopyKind.STORE)
    recency = state.recency
    if success:
        ready = frozenset(Block(key=b.key, phase=Phase.READY, slot=b.slot, ticket=None,
                                loads=b.loads) for b in finished)
        recency = recency.evictable(applied)
    else:
        ready = frozenset()
        for key in applied:
            recency = recency.removed(key)
    blocks = (state.blocks - finished) | ready
    new = changed(state, blocks=blocks, orphans=orphans, recency=recency)
    return new, Completion(applied=applied, released=released, ignored=ignored)


def reset_cache(state: CacheState) -> tuple[CacheState, int]:
    """Drop every block and start a new epoch; returns the new epoch (D7).

    Copies still running keep their slots as orphans, with their tickets, until their
    completions arrive, so no new store is given a slot that a running copy still reads
    or writes. Tickets are not reused: ``next_ticket`` carries on.

    pre: not broken_invariants(state)
    post: not __return__[0].blocks and __return__[1] == state.epoch + 1
    post: __return__[0].used_slots() <= state.used_slots()
    post: __return__[0].next_ticket == state.next_ticket
    """
    running = frozenset(_orphan_of(b, state.epoch) for b in state.blocks
                        if b.phase is Phase.STORING or b.loads)
    new = changed(state, blocks=frozenset(), orphans=state.orphans | running,
                  recency=state.recency.cleared(), epoch=state.epoch + 1)
    return new, new.epoch


def take_events(state: CacheState) -> tuple[CacheState, Events]:
    """Deliver what changed in the READY set since the last call (D8).

    pre: not broken_invariants(state)
    post: __return__[0].announced == state.keys_in(Phase.READY)
    post: (state.announced | __return__[1].stored) - __return__[1].removed == state.keys_in(Phase.READY)
    """
    ready = state.keys_in(Phase.READY)
    if ready == state.announced:
        return state, Events()  # nothing to deliver: nothing changes
    events = Events(stored=ready - state.announced, removed=state.announced - ready)
    return changed(state, announced=ready), events


def evict_in_background(state: CacheState, keys: Iterable[Key]) -> tuple[CacheState, None]:
    """The environment's transition, not a call of the API: the tier drops READY blocks
    with no readers on its own, between calls (D14). Allowed only under the opt-in
    ``Eviction.BACKGROUND`` setting (a distributed store whose master evicts in a thread
    of its own); each key is evicted as ``prepare_store`` evicts a victim (its slot
    freed, out of the eviction order, an ARC ghost), and subscribers learn of it at the
    next ``take_events``. A key that is not READY with no readers (absent, STORING,
    being read) raises ``NotEvictable`` for the whole call and nothing changes.

    pre: not broken_invariants(state)
    post: __return__[0].next_ticket == state.next_ticket
    post: __return__[0].orphans == state.orphans
    post: all(__return__[0].phase(k) is Phase.ABSENT for k in keys)
    raises: NotEvictable
    """
    keys = unique(keys)
    pinned = tuple(k for k in keys if k not in state.evictable())
    if pinned:
        raise NotEvictable(f"only READY blocks with no readers may be evicted in the "
                           f"background; not evictable: {pinned!r}", keys=pinned)
    recency = state.recency
    for key in keys:
        recency = recency.evicted(key)
    gone = frozenset(state.table[k] for k in keys)
    return changed(state, blocks=state.blocks - gone, recency=recency), None


def fail_node(state: CacheState) -> tuple[CacheState, None]:
    """The environment's transition, not a call of the API: the node holding the tier
    fails and is replaced, and every block is lost, in every phase (D15). A READY block
    (read or not) is gone; a STORING one too. The copies running on them end with the
    node (its memory went with it; the replacement's is new, and no running copy
    touches it), so their slots are free at once and a completion that arrives for one
    later belongs to no running job. Copies a reset left running keep their slots,
    the epoch and the tickets carry on; subscribers learn of the loss at the next
    ``take_events``.

    pre: not broken_invariants(state)
    post: not __return__[0].blocks
    post: __return__[0].orphans == state.orphans and __return__[0].epoch == state.epoch
    post: __return__[0].next_ticket == state.next_ticket
    """
    return changed(state, blocks=frozenset(), recency=state.recency.cleared()), None


# --- helpers ---------------------------------------------------------------------

APPLIED, RELEASED, IGNORED = "applied", "released", "ignored"
"""Where a completion lands for one key: the :class:`Completion` field that lists it."""

Match = tuple[str, Ticket | None]
"""Where a completion lands for one key, and the ticket of the job it finishes there."""


def _running(block: Block | None, kind: CopyKind) -> tuple[Ticket, ...]:
    """The tickets of the live block's running jobs of ``kind``, oldest first."""
    if block is None:
        return ()
    if kind is CopyKind.LOAD:
        return block.loads
    return (block.ticket,) if block.phase is Phase.STORING and block.ticket is not None else ()


def _match(state: CacheState, key: Key, kind: CopyKind, ticket: Ticket | None) -> Match:
    """The job a completion of ``kind`` for ``key`` finishes, first match wins (D7).

    Ticket form: job ``ticket`` on the live block, else on a copy a reset left running,
    else nothing. vLLM's form (``ticket=None``): the live block's oldest running job,
    else the oldest job of the oldest copy a reset left running, else nothing.
    """
    live = _running(state.table.get(key), kind)
    if live and (ticket is None or ticket in live):
        return APPLIED, live[0] if ticket is None else ticket
    orphan = (state.oldest_orphan(key, kind) if ticket is None
              else state.orphan_of_job(key, kind, ticket))
    if orphan is not None:
        return RELEASED, orphan.tickets[0] if ticket is None else ticket
    return IGNORED, None


def _sorted_out(
    keys: tuple[Key, ...], jobs: dict[Key, Match]
) -> tuple[tuple[Key, ...], tuple[Key, ...], tuple[Key, ...]]:
    """The keys by where their completion landed: (applied, released, ignored)."""
    landed: dict[str, list[Key]] = {APPLIED: [], RELEASED: [], IGNORED: []}
    for key in keys:
        landed[jobs[key][0]].append(key)
    return tuple(landed[APPLIED]), tuple(landed[RELEASED]), tuple(landed[IGNORED])


def _without(tickets: tuple[Ticket, ...], ticket: Ticket | None) -> tuple[Ticket, ...]:
    """``tickets`` less the first occurrence of ``ticket`` (a job finishes once)."""
    at = tickets.index(ticket) if ticket in tickets else len(tickets)
    return tickets[:at] + tickets[at + 1:]


def _orphan_of(block: Block, epoch: int) -> Orphan:
    if block.phase is Phase.STORING:
        return Orphan(block.key, CopyKind.STORE, epoch, block.slot, _running(block, CopyKind.STORE))
    return Orphan(block.key, CopyKind.LOAD, epoch, block.slot, block.loads)


def _finishing(
    state: CacheState, jobs: dict[Key, Ticket | None], kind: CopyKind
) -> frozenset[Orphan]:
    """The orphans after job ``jobs[key]`` finished on each key's copy; a copy whose last
    job finished is gone, and its slot with it."""
    orphans = state.orphans
    for key, ticket in jobs.items():
        found = None if ticket is None else state.orphan_of_job(key, kind, ticket)
        if found is not None:
            orphans = orphans - {found}
            if found.count > 1:
                orphans = orphans | {Orphan(key=found.key, kind=found.kind, epoch=found.epoch,
                                            slot=found.slot,
                                            tickets=_without(found.tickets, ticket))}
    return orphans


def _requests(
    recency: LruOrder | ArcLists, new_keys: tuple[Key, ...], free: int,
    candidates: frozenset[Key], chosen: Sequence[Key] | None,
) -> tuple[LruOrder | ArcLists, tuple[Key, ...]]:
    """Each new key as one request of the policy, in call order: adapt, evict if none of
    the ``free`` slots is left for it (the caller's ``chosen`` victims in order, else the
    policy's), insert (D10). Returns the recency model and the victims."""
    victims: list[Key] = []
    left = set(candidates)
    for number, key in enumerate(new_keys):
        recency = recency.adapted(key)
        if number >= free:
            victim = chosen[len(victims)] if chosen is not None else recency.victim(left, key)
            recency = recency.evicted(victim)
            victims.append(victim)
            left.discard(victim)
        recency = recency.inserted(key)
    return recency, tuple(victims)


def _check_victims(candidates: frozenset[Key], count: int, chosen: Sequence[Key] | None) -> None:
    """A caller's victims must be ``count`` distinct candidates."""
    if chosen is not None and (len(chosen) != count or len(set(chosen)) != count
                               or not set(chosen) <= candidates):
        raise ChoiceNotAllowed(
            f"{count} distinct victims must be chosen among the evictable blocks not named "
            f"in the call {sorted(map(repr, candidates))}; got {list(chosen)!r}")


def _choose_slots(free: tuple[int, ...], count: int,
                  chosen: Sequence[int] | None) -> tuple[int, ...]:
    """``count`` of the ``free`` slots (lowest first): the lowest, or the caller's."""
    if chosen is None:
        return free[:count]
    if len(chosen) != count or len(set(chosen)) != count or not set(chosen) <= set(free):
        raise ChoiceNotAllowed(
            f"{count} distinct free slots must be chosen among {list(free)}; got {list(chosen)}")
    return tuple(chosen)
