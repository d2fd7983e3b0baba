"""Every named invariant carries weight: for each, a state that breaks it and no other."""

from __future__ import annotations

import pytest

from kvoffload.spec import (
    INVARIANTS,
    ArcLists,
    Block,
    CacheState,
    CopyKind,
    InvariantViolation,
    LruOrder,
    Orphan,
    Phase,
    Policy,
    broken_invariants,
    check_invariants,
    initial_state,
)

READY, STORING = Phase.READY, Phase.STORING
LOAD, STORE = CopyKind.LOAD, CopyKind.STORE


def lru(*blocks: Block, order: tuple[str, ...] = (), orphans: tuple[Orphan, ...] = (),
        epoch: int = 0, next_ticket: int = 4, capacity: int = 3) -> CacheState:
    return CacheState(capacity, Policy.LRU, LruOrder(order), frozenset(blocks),
                      frozenset(orphans), epoch, next_ticket=next_ticket)


def arc(*blocks: Block, lists: ArcLists) -> CacheState:
    return CacheState(3, Policy.ARC, lists, frozenset(blocks), next_ticket=4)


BREAKS_ONLY: dict[str, CacheState] = {
    "phases_are_live": lru(Block("a", READY, 0), Block("a", READY, 1), order=("a",)),
    "readers_only_on_ready_blocks": lru(Block("a", STORING, 0, ticket=0, loads=(1,))),
    "stores_hold_their_ticket": lru(Block("a", STORING, 0)),
    "slots_in_range": lru(Block("a", READY, 3), order=("a",)),
    "no_shared_slots": lru(Block("a", READY, 0), Block("b", READY, 0), order=("a", "b")),
    "epoch_counts_resets": lru(epoch=-1),
    "orphans_are_past_copies": lru(orphans=(Orphan("a", STORE, 0, 0, (0,)),)),
    "store_orphans_owe_one_completion": lru(
        orphans=(Orphan("a", STORE, 0, 0, (0, 1)),), epoch=1),
    "one_orphan_per_key_and_epoch": lru(
        orphans=(Orphan("a", LOAD, 0, 0, (0,)), Orphan("a", LOAD, 0, 1, (1,))), epoch=1),
    "tickets_were_issued": lru(Block("a", READY, 0, loads=(4,))),
    "tickets_name_one_job": lru(Block("a", READY, 0, loads=(1, 1))),
    "policy_matches_state": CacheState(3, Policy.LRU, ArcLists(3)),
    "lru_queues_evictable_blocks": lru(Block("a", READY, 0)),
    "arc_lists_hold_live_blocks": arc(Block("a", READY, 0), lists=ArcLists(3)),
    "arc_sizes_bounded": arc(lists=ArcLists(3, p=4)),
}


def test_every_invariant_has_a_state_breaking_it_alone() -> None:
    assert set(BREAKS_ONLY) == {inv.__name__ for inv in INVARIANTS}


@pytest.mark.parametrize("name", list(BREAKS_ONLY))
def test_invariant_fires_on_its_own_mutation(name: str) -> None:
    state = BREAKS_ONLY[name]
    assert broken_invariants(state) == (name,)
    with pytest.raises(InvariantViolation) as caught:
        check_invariants(state)
    assert caught.value.invariant == name


@pytest.mark.parametrize(("orphans", "blocks"), [
    ((Orphan("a", STORE, 0, 0, (1,)),), (Block("b", STORING, 1, ticket=1),)),   # live and orphaned
    ((Orphan("a", STORE, 0, 0, (1,)), Orphan("b", LOAD, 0, 1, (1,))), ()),      # store and load
    ((Orphan("a", LOAD, 0, 0, (1,)), Orphan("b", LOAD, 1, 1, (1,))), ()),       # two resets
])
def test_a_ticket_names_one_job(orphans: tuple[Orphan, ...], blocks: tuple[Block, ...]) -> None:
    assert broken_invariants(lru(*blocks, orphans=orphans, epoch=2)) == ("tickets_name_one_job",)


def test_one_plan_may_name_several_keys() -> None:
    state = lru(Block("a", STORING, 0, ticket=1), Block("b", STORING, 1, ticket=1),
                orphans=(Orphan("c", LOAD, 0, 2, (2,)), Orphan("d", LOAD, 0, 3, (2,))),
                epoch=1, capacity=4)
    assert broken_invariants(state) == ()


def test_quiescent_slots_reclaimable_was_redundant() -> None:
    """The dropped invariant (at quiescence every slot is free or evictable, D9) holds in
    every state that breaks none of the listed ones: blocks of every phase (ABSENT too),
    slot (out of range too) and shape (a key twice, a slot shared), capacity 2."""
    candidates = [Block(key, phase, slot, ticket=0 if phase is STORING else None)
                  for key in "ab" for phase in Phase for slot in range(3)]
    checked = 0
    for first in range(len(candidates)):
        for second in range(first, len(candidates) + 1):
            blocks = frozenset(candidates[first:first + 1] + candidates[second:second + 1])
            ready = tuple(sorted(str(b.key) for b in blocks if b.phase is READY))
            state = CacheState(2, Policy.LRU, LruOrder(ready), blocks, next_ticket=1)
            if state.in_flight() or broken_invariants(state):
                continue
            checked += 1
            assert len(state.free_slots()) + len(state.evictable()) == state.capacity
    assert checked >= 7  # the empty tier, one READY block, two in distinct slots


def test_initial_states_are_valid() -> None:
    for policy in Policy:
        assert broken_invariants(initial_state(2, policy)) == ()
