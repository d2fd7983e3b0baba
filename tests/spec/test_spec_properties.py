"""Hypothesis: random call sequences on the spec keep every invariant and the rules
that span one call (purity of lookup, atomic rejection and misuse, event replay)."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spec_strategies import calls as spec_calls

from kvoffload.spec import (
    CacheState,
    Call,
    CopyKind,
    Events,
    MisuseError,
    Op,
    Phase,
    Policy,
    StorePlan,
    StoreRejected,
    apply,
    check_invariants,
    initial_state,
)


def calls() -> st.SearchStrategy[Call]:
    return spec_calls("abcde", max_keys=4, max_ticket=12)


def step(state: CacheState, call: Call, random_victims: st.DataObject | None) -> CacheState:
    victims = None
    if random_victims is not None and call.op is Op.PREPARE_STORE:
        new = [k for k in dict.fromkeys(call.keys) if state.phase(k) is Phase.ABSENT]
        need = len(new) - len(state.free_slots())
        candidates = sorted(map(str, state.evictable() - set(call.keys)))
        if 0 < need <= len(candidates):
            victims = random_victims.draw(st.permutations(candidates))[:need]
    try:
        after, output = apply(state, call, victims=victims)
    except MisuseError:
        return state  # frozen states: a rejected call cannot have changed anything
    check_invariants(after)
    if call.op is Op.LOOKUP:
        assert after is state
    if isinstance(output, StoreRejected):
        assert after == state
    if isinstance(output, StorePlan):
        assert set(output.slots) <= set(state.free_slots()) | {
            state.table[k].slot for k in output.evicted}
        assert set(output.evicted) <= state.evictable() - set(call.keys)
    return after


DEFAULT_EXAMPLES, FULL_EXAMPLES = 100, 300
"""Random sequences per test in the default tier, and in the wide tier's full-budget
copies (the TINY model checking of proofs/ reaches every state and call of its bounds)."""

INVARIANT_RUNS = {"policy": st.sampled_from(list(Policy)), "capacity": st.integers(1, 4),
                  "sequence": st.lists(calls(), max_size=40), "data": st.data(),
                  "pick": st.booleans()}
REPLAY_RUNS = {"capacity": st.integers(1, 3), "sequence": st.lists(calls(), max_size=30)}


@settings(max_examples=DEFAULT_EXAMPLES, deadline=None)
@given(**INVARIANT_RUNS)
def test_random_sequences_keep_every_invariant(
    policy: Policy, capacity: int, sequence: list[Call], data: st.DataObject, pick: bool
) -> None:
    check_every_invariant(policy, capacity, sequence, data, pick)


@pytest.mark.wide
@settings(max_examples=FULL_EXAMPLES, deadline=None)
@given(**INVARIANT_RUNS)
def test_random_sequences_keep_every_invariant_full_budget(
    policy: Policy, capacity: int, sequence: list[Call], data: st.DataObject, pick: bool
) -> None:
    check_every_invariant(policy, capacity, sequence, data, pick)


def check_every_invariant(policy: Policy, capacity: int, sequence: list[Call],
                          data: st.DataObject, pick: bool) -> None:
    state = initial_state(capacity, policy)
    for call in sequence:
        state = step(state, call, data if pick else None)
        if call.op is Op.TAKE_EVENTS:
            _, events = apply(state, Call(Op.TAKE_EVENTS))
            assert events == Events()  # just taken: nothing new


@settings(max_examples=DEFAULT_EXAMPLES * 2 // 3, deadline=None)
@given(**REPLAY_RUNS)
def test_events_replay_to_the_ready_set(capacity: int, sequence: list[Call]) -> None:
    check_events_replay(capacity, sequence)


@pytest.mark.wide
@settings(max_examples=FULL_EXAMPLES * 2 // 3, deadline=None)
@given(**REPLAY_RUNS)
def test_events_replay_to_the_ready_set_full_budget(capacity: int, sequence: list[Call]
                                                    ) -> None:
    check_events_replay(capacity, sequence)


def check_events_replay(capacity: int, sequence: list[Call]) -> None:
    state = initial_state(capacity)
    subscriber: set[object] = set()
    for call in [*sequence, Call(Op.TAKE_EVENTS)]:
        try:
            state, output = apply(state, call)
        except MisuseError:
            continue
        if isinstance(output, Events):
            assert not output.stored & output.removed
            subscriber = (subscriber - output.removed) | output.stored
            assert subscriber == state.keys_in(Phase.READY)


@settings(max_examples=DEFAULT_EXAMPLES * 2 // 3, deadline=None)
@given(**REPLAY_RUNS)
def test_draining_every_copy_reaches_a_leak_free_quiescent_state(
    capacity: int, sequence: list[Call]
) -> None:
    """Liveness (D9): deliver every outstanding completion; nothing stays held."""
    check_draining(capacity, sequence)


@pytest.mark.wide
@settings(max_examples=FULL_EXAMPLES * 2 // 3, deadline=None)
@given(**REPLAY_RUNS)
def test_draining_every_copy_reaches_a_leak_free_quiescent_state_full_budget(
    capacity: int, sequence: list[Call]
) -> None:
    check_draining(capacity, sequence)


def check_draining(capacity: int, sequence: list[Call]) -> None:
    state = initial_state(capacity)
    for call in sequence:
        with contextlib.suppress(MisuseError):
            state, _ = apply(state, call)
    for block in state.blocks:
        if block.phase is Phase.STORING:
            state, _ = apply(state, Call(Op.COMPLETE_STORE, (block.key,)))
        for _ in range(block.readers):
            state, _ = apply(state, Call(Op.COMPLETE_LOAD, (block.key,)))
    for orphan in state.orphans:
        op = Op.COMPLETE_STORE if orphan.kind is CopyKind.STORE else Op.COMPLETE_LOAD
        for ticket in orphan.tickets:
            state, _ = apply(state, Call(op, (orphan.key,), ticket=ticket))
    check_invariants(state)
    assert not state.in_flight()
    assert len(state.free_slots()) + len(state.evictable()) == state.capacity
