"""One pure transition per operation: ``op(state, ...) -> (new_state, output)``.

Body order, everywhere: preconditions (each raising a typed misuse error and leaving
the state as it was), then the computation, then the new state. Duplicate keys in one
call are dropped, first occurrence wins (decision D2). The decisions cited as ``Dn``
are explained in ``docs/spec.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from .errors import ChoiceNotAllowed, NotReadable, UnknownEpoch, UnmatchedCompleteLoad
from .invariants import broken_invariants  # noqa: F401 - named by the contracts
from .outputs import Completion, Events, LoadPlan, StorePlan, StoreRejected
from .state import Block, CacheState, Orphan
from .vocabulary import CopyKind, Key, LookupResult, Phase, unique

_LOOKUP = {Phase.ABSENT: LookupResult.MISS, Phase.STORING: LookupResult.PENDING,
           Phase.READY: LookupResult.HIT}


def lookup(state: CacheState, key: Key) -> tuple[CacheState, LookupResult]:
    """MISS iff absent, PENDING iff STORING, HIT iff READY; never changes the state (D1).

    pre: not broken_invariants(state)
    post: __return__[0] is state
    """
    return state, _LOOKUP[state.phase(key)]


def prepare_load(state: CacheState, keys: Iterable[Key]) -> tuple[CacheState, LoadPlan]:
    """Pin READY blocks for reading: one more reader each; say where they are (D6).

    pre: not broken_invariants(state)
    post: all(__return__[0].table[k].readers >= 1 for k in __return__[1].keys)
    post: __return__[0].epoch == state.epoch
    raises: NotReadable
    """
    keys = unique(keys)
    unreadable = tuple(k for k in keys if state.phase(k) is not Phase.READY)
    if unreadable:
        raise NotReadable(f"only READY blocks can be loaded; not READY: {unreadable!r}",
                          keys=unreadable)
    first_readers = tuple(k for k in keys if not state.table[k].readers)
    recency = state.recency
    for key in first_readers:
        recency = recency.pinned(key)
    blocks = _with_readers(state, keys, +1)
    slots = tuple(state.table[k].slot for k in keys)
    return replace(state, blocks=blocks, recency=recency), LoadPlan(keys, slots, state.epoch)


def complete_load(
    state: CacheState, keys: Iterable[Key], epoch: int | None = None
) -> tuple[CacheState, Completion]:
    """A load finished: one reader fewer; the last one leaving makes the block evictable.

    ``epoch=None`` is vLLM's form (the current epoch, else the oldest load a reset left
    running); the reset-safe form names the epoch of ``prepare_load`` (D7).

    pre: not broken_invariants(state)
    post: __return__[0].keys_in(Phase.READY) == state.keys_in(Phase.READY)
    post: len(__return__[0].orphans) <= len(state.orphans)
    raises: UnknownEpoch, UnmatchedCompleteLoad
    """
    keys = unique(keys)
    _check_epoch(state, epoch)
    current = tuple(k for k in keys if epoch in (None, state.epoch) and _is_read(state, k))
    stale = tuple(k for k in keys if k not in current)
    unmatched = tuple(k for k in stale if state.orphan(k, CopyKind.LOAD, epoch) is None)
    if unmatched:
        raise UnmatchedCompleteLoad(
            f"complete_load needs a matching prepare_load; no load outstanding for "
            f"{unmatched!r}", keys=unmatched)
    blocks = _with_readers(state, current, -1)
    freed = tuple(k for k in current if state.table[k].readers == 1)
    orphans = _completing(state, stale, CopyKind.LOAD, epoch)
    new = replace(state, blocks=blocks, orphans=orphans, recency=state.recency.evictable(freed))
    return new, Completion(applied=current, released=stale)


def touch(state: CacheState, keys: Iterable[Key]) -> tuple[CacheState, None]:
    """Mark keys as used for the eviction order; absent keys are ignored (D10).

    pre: not broken_invariants(state)
    post: __return__[0].blocks == state.blocks
    """
    ready = state.keys_in(Phase.READY)
    return replace(state, recency=state.recency.touched(unique(keys), ready)), None


def prepare_store(
    state: CacheState,
    keys: Iterable[Key],
    victims: Sequence[Key] | None = None,
    slots: Sequence[int] | None = None,
) -> tuple[CacheState, StorePlan | StoreRejected]:
    """Allocate slots for the keys not yet present, evicting exactly as many blocks as
    needed, or reject the whole call and change nothing (D3, D4).

    Keys already STORING or READY are skipped and protected from eviction. ``victims``
    and ``slots`` are a caller's choices to check (any allowed victim, any free slot);
    left out, the policy's exact victims and the lowest free slots are taken.

    pre: not broken_invariants(state)
    post: __return__[0] == state or isinstance(__return__[1], StorePlan)
    post: not isinstance(__return__[1], StorePlan) or all(__return__[0].phase(k) is Phase.STORING for k in __return__[1].keys)
    post: not isinstance(__return__[1], StorePlan) or all(state.phase(k) is Phase.READY for k in __return__[1].evicted)
    raises: ChoiceNotAllowed
    """
    keys = unique(keys)
    new_keys = tuple(k for k in keys if state.phase(k) is Phase.ABSENT)
    candidates = state.evictable() - frozenset(keys)
    needed = len(new_keys) - len(state.free_slots())
    if needed > len(candidates):
        return state, StoreRejected(needed=len(new_keys),
                                    available=len(state.free_slots()) + len(candidates))
    recency = state.recency
    for key in new_keys:
        recency = recency.adapted(key)
    state, evicted = _evict(replace(state, recency=recency), candidates, max(0, needed), victims)
    chosen = _choose_slots(state, len(new_keys), slots)
    recency = state.recency
    for key in new_keys:
        recency = recency.inserted(key)
    stored = frozenset(Block(k, Phase.STORING, s) for k, s in zip(new_keys, chosen, strict=True))
    state = replace(state, blocks=state.blocks | stored, recency=recency)
    return state, StorePlan(new_keys, chosen, evicted, state.epoch)


def complete_store(
    state: CacheState, keys: Iterable[Key], success: bool = True, epoch: int | None = None
) -> tuple[CacheState, Completion]:
    """A store finished: its blocks become READY (success) or ABSENT, slot freed (D5).

    A key that is not STORING is ignored. ``epoch=None`` is vLLM's form: it completes the
    current STORING block if there is one, else the oldest store a reset left running.
    The reset-safe form names the epoch of ``prepare_store``, so a stale completion only
    releases its old slot (D7).

    pre: not broken_invariants(state)
    post: not any(__return__[0].phase(k) is Phase.STORING for k in __return__[1].applied)
    post: __return__[0].used_slots() <= state.used_slots()
    raises: UnknownEpoch
    """
    keys = unique(keys)
    _check_epoch(state, epoch)
    current = tuple(k for k in keys
                    if epoch in (None, state.epoch) and state.phase(k) is Phase.STORING)
    stale = tuple(k for k in keys if k not in current
                  and state.orphan(k, CopyKind.STORE, epoch) is not None)
    ignored = tuple(k for k in keys if k not in current and k not in stale)
    finished = frozenset(state.table[k] for k in current)
    orphans = _completing(state, stale, CopyKind.STORE, epoch)
    recency = state.recency
    if success:
        ready = frozenset(replace(b, phase=Phase.READY) for b in finished)
        recency = recency.evictable(current)
    else:
        ready = frozenset()
        for key in current:
            recency = recency.removed(key)
    blocks = (state.blocks - finished) | ready
    new = replace(state, blocks=blocks, orphans=orphans, recency=recency)
    return new, Completion(applied=current, released=stale, ignored=ignored)


def reset_cache(state: CacheState) -> tuple[CacheState, int]:
    """Drop every block and start a new epoch; returns the new epoch (D7).

    Copies still running keep their slots as orphans until their completions arrive,
    so no new store is given a slot that a running copy still reads or writes.

    pre: not broken_invariants(state)
    post: not __return__[0].blocks and __return__[1] == state.epoch + 1
    post: __return__[0].used_slots() <= state.used_slots()
    """
    running = frozenset(_orphan_of(b, state.epoch) for b in state.blocks
                        if b.phase is Phase.STORING or b.readers)
    new = replace(state, blocks=frozenset(), orphans=state.orphans | running,
                  recency=state.recency.cleared(), epoch=state.epoch + 1)
    return new, new.epoch


def take_events(state: CacheState) -> tuple[CacheState, Events]:
    """Deliver what changed in the READY set since the last call (D8).

    pre: not broken_invariants(state)
    post: __return__[0].announced == state.keys_in(Phase.READY)
    post: (state.announced | __return__[1].stored) - __return__[1].removed == state.keys_in(Phase.READY)
    """
    ready = state.keys_in(Phase.READY)
    events = Events(stored=ready - state.announced, removed=state.announced - ready)
    return replace(state, announced=ready), events


# --- helpers ---------------------------------------------------------------------


def _check_epoch(state: CacheState, epoch: int | None) -> None:
    if epoch is not None and not 0 <= epoch <= state.epoch:
        raise UnknownEpoch(f"epoch {epoch} has not begun; the current epoch is {state.epoch}")


def _is_read(state: CacheState, key: Key) -> bool:
    block = state.table.get(key)
    return block is not None and block.readers > 0


def _with_readers(state: CacheState, keys: tuple[Key, ...], delta: int) -> frozenset[Block]:
    old = frozenset(state.table[k] for k in keys)
    return (state.blocks - old) | frozenset(replace(b, readers=b.readers + delta) for b in old)


def _orphan_of(block: Block, epoch: int) -> Orphan:
    if block.phase is Phase.STORING:
        return Orphan(block.key, CopyKind.STORE, epoch, block.slot)
    return Orphan(block.key, CopyKind.LOAD, epoch, block.slot, block.readers)


def _completing(
    state: CacheState, keys: tuple[Key, ...], kind: CopyKind, epoch: int | None
) -> frozenset[Orphan]:
    """The orphans after one completion arrived for each key; the last one frees the slot."""
    orphans = state.orphans
    for key in keys:
        found = state.orphan(key, kind, epoch)
        if found is not None:
            orphans = orphans - {found}
            if found.count > 1:
                orphans = orphans | {replace(found, count=found.count - 1)}
    return orphans


def _evict(
    state: CacheState, candidates: frozenset[Key], count: int, chosen: Sequence[Key] | None
) -> tuple[CacheState, tuple[Key, ...]]:
    """Evict ``count`` candidates: the caller's ``chosen`` ones if given, else the policy's."""
    if chosen is not None and (len(chosen) != count or len(set(chosen)) != count
                               or not set(chosen) <= candidates):
        raise ChoiceNotAllowed(
            f"{count} distinct victims must be chosen among the evictable blocks not named "
            f"in the call {sorted(map(repr, candidates))}; got {list(chosen)!r}")
    recency, victims = state.recency, list[Key]()
    for _ in range(count):
        victim = chosen[len(victims)] if chosen is not None else recency.victim(
            candidates - frozenset(victims))
        recency = recency.evicted(victim)
        victims.append(victim)
    gone = frozenset(state.table[k] for k in victims)
    return replace(state, blocks=state.blocks - gone, recency=recency), tuple(victims)


def _choose_slots(state: CacheState, count: int, chosen: Sequence[int] | None) -> tuple[int, ...]:
    free = state.free_slots()
    if chosen is None:
        return free[:count]
    if len(chosen) != count or len(set(chosen)) != count or not set(chosen) <= set(free):
        raise ChoiceNotAllowed(
            f"{count} distinct free slots must be chosen among {list(free)}; got {list(chosen)}")
    return tuple(chosen)
