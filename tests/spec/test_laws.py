"""The laws, the spec's second statement: every transition satisfies them on random
states, and each law fails on a hand-made wrong step (so none is vacuous)."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spec_strategies import calls as spec_calls

from kvoffload.spec import (
    ArcLists,
    Block,
    CacheState,
    Call,
    Completion,
    CopyKind,
    Events,
    LoadPlan,
    LookupResult,
    LruOrder,
    MisuseError,
    NotReadable,
    Op,
    Orphan,
    Phase,
    Policy,
    StorePlan,
    StoreRejected,
    apply,
    initial_state,
    laws,
    replay,
)
from kvoffload.spec.laws import LAW_NAMES, LAWS, Step, broken_laws


def _answer(state: CacheState, call: Call, slots: tuple[int, ...] | None = None,
            victims: tuple[str, ...] | None = None) -> Step:
    """The spec's own step for ``call`` on ``state``."""
    try:
        after, out = apply(state, call, victims=victims, slots=slots)
    except MisuseError as error:
        return Step(state, call, error, None)
    return Step(state, call, out, after)


DEFAULT_EXAMPLES, FULL_EXAMPLES = 100, 300
"""Random sequences per test in the default tier, and in the wide tier's full-budget
copies. The TINY laws-alone rows (tests/proofs/test_recorded.py) check every law on
every call reachable within their bounds."""

LAW_RUNS = {"policy": st.sampled_from(list(Policy)), "capacity": st.integers(1, 4),
            "sequence": st.lists(spec_calls("abcde", max_keys=4, max_ticket=12), max_size=40),
            "data": st.data()}
VICTIM_RUNS = {"policy": st.sampled_from(list(Policy)), "capacity": st.integers(1, 3),
               "sequence": st.lists(spec_calls("abcd", max_keys=3, max_ticket=8), max_size=30),
               "data": st.data()}


@settings(max_examples=DEFAULT_EXAMPLES, deadline=None)
@given(**LAW_RUNS)
def test_every_transition_satisfies_every_law(
    policy: Policy, capacity: int, sequence: list[Call], data: st.DataObject
) -> None:
    """On random reachable states, the spec's answer to any call breaks no law, whatever
    free slots a store is given."""
    check_every_law(policy, capacity, sequence, data)


@pytest.mark.wide
@settings(max_examples=FULL_EXAMPLES, deadline=None)
@given(**LAW_RUNS)
def test_every_transition_satisfies_every_law_full_budget(
    policy: Policy, capacity: int, sequence: list[Call], data: st.DataObject
) -> None:
    check_every_law(policy, capacity, sequence, data)


def check_every_law(policy: Policy, capacity: int, sequence: list[Call],
                    data: st.DataObject) -> None:
    state = initial_state(capacity, policy)
    for call in sequence:
        slots = None
        if call.op is Op.PREPARE_STORE and data.draw(st.booleans(), label="pick slots"):
            _, plan = apply(state, call)
            if isinstance(plan, StorePlan):
                held = {state.table[k].slot for k in plan.evicted}
                free = sorted(set(state.free_slots()) | held)
                slots = tuple(data.draw(st.permutations(free), label="slots")[:len(plan.keys)])
        step = _answer(state, call, slots)
        assert broken_laws(step.before, call, step.answer, step.after) == ()
        state = step.new


@settings(max_examples=DEFAULT_EXAMPLES // 2, deadline=None)
@given(**VICTIM_RUNS)
def test_any_allowed_victim_satisfies_the_lifecycle_laws(
    policy: Policy, capacity: int, sequence: list[Call], data: st.DataObject
) -> None:
    """A caller's own choice of allowed victims breaks no lifecycle law (``--level
    any``); the policy laws are the ones that demand the exact victim."""
    check_any_allowed_victim(policy, capacity, sequence, data)


@pytest.mark.wide
@settings(max_examples=FULL_EXAMPLES // 2, deadline=None)
@given(**VICTIM_RUNS)
def test_any_allowed_victim_satisfies_the_lifecycle_laws_full_budget(
    policy: Policy, capacity: int, sequence: list[Call], data: st.DataObject
) -> None:
    check_any_allowed_victim(policy, capacity, sequence, data)


def check_any_allowed_victim(policy: Policy, capacity: int, sequence: list[Call],
                             data: st.DataObject) -> None:
    state = initial_state(capacity, policy)
    for call in sequence:
        victims = None
        if call.op is Op.PREPARE_STORE:
            new = [k for k in dict.fromkeys(call.keys) if state.phase(k) is Phase.ABSENT]
            need = len(new) - len(state.free_slots())
            candidates = sorted(map(str, state.evictable() - set(call.keys)))
            if 0 < need <= len(candidates):
                victims = tuple(data.draw(st.permutations(candidates))[:need])
        step = _answer(state, call, victims=victims)
        assert broken_laws(step.before, call, step.answer, step.after, exact=False) == ()
        state = step.new


def test_laws_never_call_a_transition() -> None:
    """The laws are a second statement: no transition, no dispatcher, no recency method."""
    source = inspect.getsource(laws)
    tree = ast.parse(source)
    forbidden = {"transitions", "apply", "replay", "send", "adapted", "inserted", "evictable",
                 "pinned", "touched", "removed", "evicted", "victim", "cleared", "free_slots",
                 "keys_in", "phase", "in_flight"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.module not in {"transitions", "kvoffload.spec.transitions"}
            assert not {a.name for a in node.names} & forbidden
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            assert name not in forbidden, f"laws.py calls {name}"


def test_every_law_cites_its_rule() -> None:
    assert len(set(LAW_NAMES)) == len(LAWS)
    for law in LAWS:
        doc = law.__doc__ or ""
        assert doc.startswith(("D", "The model")), law.__name__


# --- each law fails on a hand-made wrong step ---------------------------------------


def _state(*calls: Call, policy: Policy = Policy.LRU) -> CacheState:
    """The state ``calls`` reach from an empty tier of two slots."""
    state, _ = replay(initial_state(2, policy), calls)
    return state


def _store(*keys: str) -> Call:
    return Call(Op.PREPARE_STORE, keys)


def _done(*keys: str, success: bool = True, ticket: int | None = None) -> Call:
    return Call(Op.COMPLETE_STORE, keys, success=success, ticket=ticket)


def _load(*keys: str) -> Call:
    return Call(Op.PREPARE_LOAD, keys)


def _unload(*keys: str, ticket: int | None = None) -> Call:
    return Call(Op.COMPLETE_LOAD, keys, ticket=ticket)


def _evict(*keys: str) -> Call:
    return Call(Op.EVICT_IN_BACKGROUND, keys)


STORING_A = (_store("a"),)
READY_A = (_store("a"), _done("a"))
READY_AB = (_store("a", "b"), _done("a"), _done("b"))
PINNED_A = (*READY_A, _load("a"))


def _wrong(calls: tuple[Call, ...], call: Call, *, policy: Policy = Policy.LRU,
           answer: Any = None,
           after: Callable[[CacheState, CacheState], CacheState] | None = None,
           output: Callable[[Any], Any] | None = None) -> tuple[Step, Step]:
    """The spec's step for ``call`` after ``calls``, and a wrong one made from it by hand:
    ``answer`` replaces the answer, ``output(answer)`` rewrites it, ``after(before,
    after)`` rewrites the state after."""
    right = _answer(_state(*calls, policy=policy), call)
    out: Any = right.answer
    if answer is not None:
        out = answer
    if output is not None:
        out = output(out)
    new = right.after
    if after is not None:
        new = after(right.before, right.new)
    return right, Step(right.before, call, out, new)


def _blocks(state: CacheState, *blocks: Block) -> CacheState:
    keys = {b.key for b in blocks}
    return replace(state, blocks=frozenset(b for b in state.blocks if b.key not in keys)
                   | frozenset(blocks))


def _arc(calls: tuple[Call, ...], call: Call, *, answer: Any = None,
         after: Callable[[CacheState, CacheState], CacheState] | None = None,
         output: Callable[[Any], Any] | None = None) -> tuple[Step, Step]:
    return _wrong(calls, call, policy=Policy.ARC, answer=answer, after=after, output=output)


# ARC, capacity 2: a and b READY, b touched into t2; c evicts a (|t1| > p = 0), which
# becomes a ghost in b1; storing a again then hits b1 and raises p.
ARC_GHOST = (*READY_AB, Call(Op.TOUCH, ("b",)), _store("c"), _done("c"))

def _with_p(recency: LruOrder | ArcLists, p: int) -> ArcLists:
    """ARC lists with another target size ``p`` (the ARC store law's wrong step)."""
    if not isinstance(recency, ArcLists):
        raise TypeError("an ARC step was expected")
    return replace(recency, p=p)


def _no_ghosts(recency: LruOrder | ArcLists) -> ArcLists:
    """ARC lists with their ghosts forgotten (the background eviction law's wrong step)."""
    if not isinstance(recency, ArcLists):
        raise TypeError("an ARC step was expected")
    return replace(recency, b1=(), b2=())


WRONG: dict[str, Callable[[], tuple[Step, Step]]] = {
    "errors_are_named_misuse": lambda: _wrong(
        READY_A, Call(Op.LOOKUP, ("a",)), answer=NotReadable("no"), after=lambda b, a: b),
    "misuse_changes_nothing": lambda: _wrong(
        STORING_A, _load("a"), after=lambda b, a: replace(b, next_ticket=b.next_ticket + 1)),
    "each_operation_changes_only_its_fields": lambda: _wrong(
        READY_A, Call(Op.TOUCH, ("a",)), after=lambda b, a: replace(a, announced=frozenset({"a"}))),
    "lookup_answers_the_phase": lambda: _wrong(
        STORING_A, Call(Op.LOOKUP, ("a",)), answer=LookupResult.MISS),
    "lookup_is_pure": lambda: _wrong(
        READY_AB, Call(Op.LOOKUP, ("a",)),
        after=lambda b, a: replace(a, recency=LruOrder(("b", "a")))),
    "prepare_load_needs_ready_blocks": lambda: _wrong(
        STORING_A, _load("a"), answer=LoadPlan(("a",), (0,), 0, 1),
        after=lambda b, a: _blocks(b, Block("a", Phase.READY, 0, None, (1,)))),
    "load_plan_reads_each_key_once": lambda: _wrong(
        READY_A, _load("a", "a"), output=lambda p: replace(p, keys=("a", "a"), slots=(0, 0))),
    "prepare_load_adds_one_reader": lambda: _wrong(
        READY_A, _load("a", "a"),
        after=lambda b, a: _blocks(a, Block("a", Phase.READY, 0, None, (1, 1)))),
    "plans_issue_a_fresh_ticket": lambda: _wrong(
        READY_A, _load("a"), output=lambda p: replace(p, ticket=0)),
    "completions_sort_keys_by_job": lambda: _wrong(
        STORING_A, _done("a", ticket=7), answer=Completion(applied=("a",)),
        after=lambda b, a: _blocks(b, Block("a", Phase.READY, 0))),
    "complete_load_needs_a_load": lambda: _wrong(
        READY_A, _unload("a"), answer=Completion(), after=lambda b, a: b),
    "complete_load_removes_the_finished_reader": lambda: _wrong(
        PINNED_A, _unload("a", ticket=1), after=lambda b, a: replace(a, blocks=b.blocks)),
    "complete_store_applies_the_outcome": lambda: _wrong(
        STORING_A, _done("a", success=False, ticket=0),
        after=lambda b, a: replace(a, blocks=b.blocks)),
    "completions_release_orphan_jobs": lambda: _wrong(
        (*STORING_A, Call(Op.RESET_CACHE)), _done("a", ticket=0),
        after=lambda b, a: replace(a, orphans=b.orphans)),
    "store_rejects_only_when_unavoidable": lambda: _wrong(
        STORING_A, _store("a", "b"), answer=StoreRejected(1, 1), after=lambda b, a: b),
    "rejection_changes_nothing": lambda: _wrong(
        (_store("a"), _done("a"), _store("b")), _store("c", "d"),
        after=lambda b, a: replace(b, blocks=frozenset(x for x in b.blocks if x.key != "a"),
                                   recency=LruOrder())),
    "store_plan_names_the_absent_keys": lambda: _wrong(
        STORING_A, _store("a", "b"), output=lambda p: replace(p, keys=("a", "b"),
                                                               slots=(1, 1))),
    "store_evicts_exactly_what_is_needed": lambda: _wrong(
        READY_AB, _store("c"), output=lambda p: replace(p, evicted=("a", "b")),
        after=lambda b, a: replace(a, blocks=a.blocks - {Block("b", Phase.READY, 1)},
                                   recency=LruOrder())),
    "store_evicts_only_allowed_blocks": lambda: _wrong(
        (*READY_AB, _load("b")), _store("c"), output=lambda p: replace(p, evicted=("b",))),
    "store_uses_free_slots": lambda: _wrong(
        STORING_A, _store("b"), output=lambda p: replace(p, slots=(0,)),
        after=lambda b, a: _blocks(a, Block("b", Phase.STORING, 0, 1))),
    "prepare_store_starts_the_stores": lambda: _wrong(
        STORING_A, _store("b"), after=lambda b, a: _blocks(a, Block("b", Phase.READY, 1))),
    "reset_drops_every_block": lambda: _wrong(
        READY_A, Call(Op.RESET_CACHE), answer=0),
    "reset_holds_running_copies": lambda: _wrong(
        STORING_A, Call(Op.RESET_CACHE), after=lambda b, a: replace(a, orphans=frozenset())),
    "events_are_the_net_change": lambda: _wrong(
        (*READY_A, Call(Op.TAKE_EVENTS), Call(Op.RESET_CACHE)), Call(Op.TAKE_EVENTS),
        answer=Events()),
    "subscribers_learn_the_ready_set": lambda: _wrong(
        READY_A, Call(Op.TAKE_EVENTS), after=lambda b, a: b),
    "background_eviction_needs_evictable_blocks": lambda: _wrong(
        PINNED_A, _evict("a"), output=lambda error: None,
        after=lambda b, a: replace(b, blocks=frozenset())),
    "background_eviction_drops_the_blocks": lambda: _wrong(
        READY_AB, _evict("a"), after=lambda b, a: replace(a, blocks=b.blocks)),
    "node_failure_loses_every_block": lambda: _wrong(
        PINNED_A, Call(Op.FAIL_NODE), after=lambda b, a: replace(
            a, orphans=frozenset({Orphan("a", CopyKind.LOAD, 0, 0, (1,))}))),
    "reset_forgets_the_order": lambda: _arc(
        READY_A, Call(Op.RESET_CACHE), after=lambda b, a: replace(a, recency=b.recency)),
    "lru_queue_follows_evictability": lambda: _wrong(
        (_store("a", "b"), _done("b")), _done("a"),
        after=lambda b, a: replace(a, recency=LruOrder(("a", "b")))),
    "lru_touch_moves_keys_to_the_recent_end": lambda: _wrong(
        READY_AB, Call(Op.TOUCH, ("a",)), after=lambda b, a: b),
    "lru_evicts_the_least_recent": lambda: _wrong(
        READY_AB, _store("c"), output=lambda p: replace(p, evicted=("b",), slots=(1,)),
        after=lambda b, a: replace(b, blocks=frozenset({Block("a", Phase.READY, 0),
                                                        Block("c", Phase.STORING, 1, 2)}),
                                   recency=LruOrder(("a",)), next_ticket=3)),
    "arc_lists_follow_evictability": lambda: _arc(
        (_store("a", "b"), _done("b")), _done("a"),
        after=lambda b, a: replace(a, recency=b.recency)),
    "arc_touch_moves_keys_to_the_recent_end": lambda: _arc(
        READY_AB, Call(Op.TOUCH, ("a",)), after=lambda b, a: b),
    "arc_evicts_the_replace_victim": lambda: _arc(
        READY_AB, _store("c"), output=lambda p: replace(p, evicted=("b",))),
    "arc_background_eviction_makes_ghosts": lambda: _arc(
        READY_AB, _evict("a"), after=lambda b, a: replace(a, recency=_no_ghosts(a.recency))),
    "arc_store_updates_the_lists": lambda: _arc(
        ARC_GHOST, _store("a"),
        after=lambda b, a: replace(a, recency=_with_p(a.recency, 0))),
}


def test_every_law_has_a_wrong_step() -> None:
    assert set(WRONG) == set(LAW_NAMES)


@pytest.mark.parametrize("name", LAW_NAMES)
def test_each_law_fails_on_a_wrong_step(name: str) -> None:
    """The spec's own step breaks no law; the wrong step made from it breaks this one."""
    right, wrong = WRONG[name]()
    assert broken_laws(right.before, right.call, right.answer, right.after) == ()
    assert wrong != right
    assert name in broken_laws(wrong.before, wrong.call, wrong.answer, wrong.after)


def test_the_arc_ghost_case_adapts_p() -> None:
    """The state the ARC store law's wrong step starts from does hit a ghost (so the law
    is tested where ``p`` moves, not where it stays)."""
    state = _state(*ARC_GHOST, policy=Policy.ARC)
    assert isinstance(state.recency, ArcLists)
    assert "a" in state.recency.b1
    after = _answer(state, _store("a")).new
    assert isinstance(after.recency, ArcLists)
    assert after.recency.p > state.recency.p


def test_docs_link_every_law_to_its_rule() -> None:
    """docs/spec.md's table of laws names every law, each beside the rule it states."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "spec.md").read_text()
    section = text.split("## Laws: the spec stated twice", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| D") or
            line.startswith("| the model")]
    for name in LAW_NAMES:
        assert any(f"`{name}`" in row for row in rows), name


def test_laws_are_total_on_a_load_plan_for_an_absent_key() -> None:
    """A wrong step naming a key the state does not hold breaks laws; it raises nothing."""
    state = initial_state(2)
    wrong = Step(state, _load("a"), LoadPlan(("a",), (0,), 0, 0),
                 replace(state, next_ticket=1))
    broken = broken_laws(wrong.before, wrong.call, wrong.answer, wrong.after)
    assert {"prepare_load_needs_ready_blocks", "prepare_load_adds_one_reader"} <= set(broken)
