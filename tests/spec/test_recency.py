"""ARC is Megiddo and Modha's REPLACE, adapted only where blocks cannot be evicted (D10)."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvoffload.spec import (
    ArcLists,
    Block,
    CacheState,
    Call,
    MisuseError,
    Op,
    Phase,
    Policy,
    StorePlan,
    apply,
    broken_invariants,
    initial_state,
    prepare_store,
)

READY = Phase.READY


def arc_state(lists: ArcLists, *, pinned: tuple[str, ...] = ()) -> CacheState:
    """READY blocks for every key of t1 and t2, slot by position; ``pinned`` ones read."""
    keys = lists.t1 + lists.t2
    blocks = frozenset(Block(k, READY, slot, loads=(slot,) if k in pinned else ())
                       for slot, k in enumerate(keys))
    state = CacheState(lists.capacity, Policy.ARC, lists, blocks, next_ticket=len(keys))
    assert broken_invariants(state) == ()
    return state


def victims(state: CacheState, key: str) -> tuple[object, ...]:
    _, plan = prepare_store(state, [key])
    assert isinstance(plan, StorePlan)
    return plan.evicted


def test_issue_10_d_a_b2_hit_with_t1_at_target_evicts_from_t1() -> None:
    """After adaptation t1=('f',) t2=('d','c') b2=('b',) p=1: the paper evicts f."""
    lists = ArcLists(3, t1=("f",), t2=("d", "c"), b2=("b",), p=2)  # b in b2: p becomes 1
    assert victims(arc_state(lists), "b") == ("f",)
    assert victims(arc_state(lists, pinned=("d",)), "b") == ("f",)  # the spec took c


def test_a_new_key_not_in_b2_with_t1_at_target_evicts_from_t2() -> None:
    lists = ArcLists(3, t1=("f",), t2=("d", "c"), b1=("x",), p=0)  # x in b1: p becomes 1
    assert victims(arc_state(lists), "x") == ("d",)
    assert victims(arc_state(lists), "y") == ("f",)  # p stays 0 < |t1| = 1


def test_when_the_preferred_list_has_nothing_evictable_the_other_gives_the_victim() -> None:
    lists = ArcLists(3, t1=("f",), t2=("d", "c"), b2=("b",), p=2)
    assert victims(arc_state(lists, pinned=("f",)), "b") == ("d",)
    assert victims(arc_state(lists, pinned=("d", "c")), "y") == ("f",)


KEYS = st.sampled_from("abcdef")


@st.composite
def arc_histories(draw: st.DrawFn) -> list[Call]:
    calls = []
    for _ in range(draw(st.integers(0, 30))):
        op = draw(st.sampled_from([Op.PREPARE_STORE, Op.COMPLETE_STORE, Op.TOUCH,
                                   Op.PREPARE_LOAD, Op.COMPLETE_LOAD]))
        calls.append(Call(op, (draw(KEYS),)))
    return calls


PAIRS = st.lists(KEYS, min_size=2, max_size=2, unique=True)


@settings(max_examples=40, deadline=None)
@given(history=arc_histories(), pair=PAIRS)
def test_one_call_is_its_new_keys_as_requests_in_call_order(
    history: list[Call], pair: list[str]
) -> None:
    """prepare_store([x, y]) of two absent keys evicts and orders as x's request, then y's."""
    check_one_call_is_its_new_keys_as_requests(history, pair)


@pytest.mark.wide
@settings(max_examples=300, deadline=None)
@given(history=arc_histories(), pair=PAIRS)
def test_one_call_is_its_new_keys_as_requests_full_budget(
    history: list[Call], pair: list[str]
) -> None:
    check_one_call_is_its_new_keys_as_requests(history, pair)


def check_one_call_is_its_new_keys_as_requests(history: list[Call], pair: list[str]) -> None:
    state = initial_state(3, Policy.ARC)
    for call in history:
        with contextlib.suppress(MisuseError):
            state, _ = apply(state, call)
    if any(state.phase(k) is not Phase.ABSENT for k in pair):
        return
    both, plan = prepare_store(state, pair)
    one, first = prepare_store(state, pair[:1])
    two, second = prepare_store(one, pair[1:])
    if isinstance(plan, StorePlan):
        assert isinstance(first, StorePlan)
        assert isinstance(second, StorePlan)
        assert plan.evicted == first.evicted + second.evicted
        assert both.recency == two.recency
