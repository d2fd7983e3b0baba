"""Tickets are compared only for equality: renumbering them changes no answer (D7, D11)."""

from __future__ import annotations

import contextlib
from collections import deque
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spec_strategies import calls as spec_calls

from kvoffload.spec import (
    Block,
    CacheState,
    Call,
    CopyKind,
    LoadPlan,
    LruOrder,
    MisuseError,
    Op,
    Orphan,
    Output,
    Phase,
    Policy,
    StorePlan,
    apply,
    broken_invariants,
    initial_state,
    renumbered,
)


def calls() -> st.SearchStrategy[Call]:
    return spec_calls("abc", max_keys=3, max_ticket=15)


def _untagged(output: Output) -> Output:
    if isinstance(output, (StorePlan, LoadPlan)):
        return replace(output, ticket=0)
    return output


HISTORIES = st.lists(calls(), max_size=20)


@settings(max_examples=30, deadline=None)
@given(before=HISTORIES, after=HISTORIES, policy=st.sampled_from(list(Policy)))
def test_a_renumbered_state_answers_as_the_original(
    before: list[Call], after: list[Call], policy: Policy
) -> None:
    check_renumbered_answers(before, after, policy)


@pytest.mark.wide
@settings(max_examples=200, deadline=None)
@given(before=HISTORIES, after=HISTORIES, policy=st.sampled_from(list(Policy)))
def test_a_renumbered_state_answers_as_the_original_full_budget(
    before: list[Call], after: list[Call], policy: Policy
) -> None:
    check_renumbered_answers(before, after, policy)


def check_renumbered_answers(before: list[Call], after: list[Call], policy: Policy) -> None:
    state = initial_state(2, policy)
    for call in before:
        with contextlib.suppress(MisuseError):
            state, _ = apply(state, call)
    twin, names = renumbered(state)
    assert broken_invariants(twin) == ()
    for call in after:
        told = call.ticket
        mapped = replace(call, ticket=None if told is None else names.get(told, -1 - told))
        try:
            state, output = apply(state, call)
        except MisuseError as error:
            with pytest.raises(type(error)):
                apply(twin, mapped)
            continue
        twin, twin_output = apply(twin, mapped)
        assert _untagged(output) == _untagged(twin_output)
        if isinstance(output, (StorePlan, LoadPlan)):
            assert isinstance(twin_output, (StorePlan, LoadPlan))
            names[output.ticket] = twin_output.ticket
        assert renumbered(state)[0] == renumbered(twin)[0]


def test_states_differing_only_in_ticket_numbers_renumber_equal() -> None:
    def state(store: int, loads: tuple[int, ...], orphan: int, next_ticket: int) -> CacheState:
        blocks = frozenset({Block("a", Phase.STORING, 0, ticket=store),
                            Block("b", Phase.READY, 1, loads=loads)})
        orphans = frozenset({Orphan("c", CopyKind.STORE, 0, 2, (orphan,))})
        return CacheState(3, Policy.LRU, LruOrder(), blocks, orphans, epoch=1,
                          next_ticket=next_ticket)
    one, _ = renumbered(state(7, (3, 9), 1, 10))
    two, _ = renumbered(state(2, (5, 0), 4, 6))
    assert one == two
    assert one.next_ticket == 4
    assert renumbered(state(7, (3, 9), 1, 10), held=(8,))[1][8] == 4


def test_renumbering_bounds_the_reachable_states() -> None:
    """Plans issue tickets for ever, yet renumbered, a small tier has few states."""
    start = initial_state(1)
    seen, queue = {start}, deque([start])
    while queue:
        state = queue.popleft()
        for call in (Call(Op.PREPARE_STORE, ("a",)), Call(Op.COMPLETE_STORE, ("a",)),
                     Call(Op.PREPARE_LOAD, ("a",)), Call(Op.COMPLETE_LOAD, ("a",))):
            with contextlib.suppress(MisuseError):
                after, _ = apply(state, call)
                if after.table.get("a") is not None and after.table["a"].readers > 2:
                    continue
                after, _ = renumbered(after)
                if after not in seen:
                    seen.add(after)
                    queue.append(after)
    assert len(seen) == 5  # empty, STORING, READY, READY with 1 and with 2 readers
