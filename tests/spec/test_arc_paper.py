"""The spec's ARC against Megiddo and Modha's, written from the paper (D10).

In the paper's regime (one key per call, every store completed at once, no loads,
failures or resets) the spec's ARC is the paper's with the integer target ``p`` the spec
decided on (each adaptation step rounded down): zero mismatches on random traces. The
rounding is a decision, not the paper's rule: with the paper's fractional ``p`` the two
part ways, first after 18 requests at capacity 5 (an exhaustive search, below).
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Sequence
from fractions import Fraction
from typing import cast

import pytest

from kvoffload.spec import (
    ArcLists,
    CacheState,
    LookupResult,
    Policy,
    StorePlan,
    complete_store,
    initial_state,
    lookup,
    prepare_store,
    touch,
)
from paper_arc import SHORTEST_DIFFERENCE, PaperArc, random_traces


def spec_request(state: CacheState, key: Hashable) -> tuple[CacheState, bool, Hashable | None]:
    """One request of the paper on the spec: a hit is a ``touch``, a miss a store
    completed at once. Returns the new state, was it a hit, and the victim if any."""
    _, found = lookup(state, key)
    if found is LookupResult.HIT:
        state, _ = touch(state, [key])
        return state, True, None
    state, plan = prepare_store(state, [key])
    if not isinstance(plan, StorePlan) or len(plan.evicted) > 1:
        raise AssertionError(f"a single-key store in the paper's regime: {plan!r}")
    state, _ = complete_store(state, [key], ticket=plan.ticket)
    return state, False, (plan.evicted[0] if plan.evicted else None)


def spec_lists(state: CacheState) -> tuple[tuple[Hashable, ...], ...]:
    arc = state.recency
    assert isinstance(arc, ArcLists)
    return arc.t1, arc.t2, arc.b1, arc.b2


def mismatches(c: int, requests: Sequence[int]) -> list[str]:
    """Every request where the spec and the paper (integer p) differ."""
    state, paper = initial_state(c, Policy.ARC), PaperArc(c)
    found = []
    for n, key in enumerate(requests):
        state, hit, victim = spec_request(state, key)
        want = paper.request(key)
        arc = state.recency
        assert isinstance(arc, ArcLists)
        if (hit, victim) != want or spec_lists(state) != paper.lists() or arc.p != paper.p:
            found.append(f"request {n} ({key!r}) at c={c}: spec {(hit, victim)} "
                         f"{spec_lists(state)} p={arc.p}; paper {want} {paper.lists()} "
                         f"p={paper.p}")
    return found


DEFAULT_TRACES = 100
"""Of the 300 random traces of seed 24, the first ones run in the default tier, the others
in the wide tier (random_traces draws them in order: a prefix of the 300 is the same
traces at any count)."""


def test_spec_arc_is_the_papers_with_integer_p_on_random_traces() -> None:
    found = [m for c, requests in random_traces(DEFAULT_TRACES, seed=24)
             for m in mismatches(c, requests)]
    assert found == []


@pytest.mark.wide
def test_spec_arc_is_the_papers_with_integer_p_on_the_other_random_traces() -> None:
    found = [m for c, requests in random_traces(300, seed=24)[DEFAULT_TRACES:]
             for m in mismatches(c, requests)]
    assert found == []


@pytest.mark.slow
def test_spec_arc_is_the_papers_with_integer_p_on_4000_random_traces() -> None:
    found = [m for c, requests in random_traces(4000, seed=2003)
             for m in mismatches(c, requests)]
    assert found == []


def test_the_paper_arc_of_the_tests_serves_the_papers_cases() -> None:
    """The independent ARC itself, on hand-checked requests: case IV with t1 full drops
    t1's least recent key with no ghost; REPLACE sends t1's to b1; a ghost hit in b1
    (case II) raises p by one and enters t2, the victim coming from t2 once |t1| <= p."""
    arc = PaperArc(2)
    assert [arc.request(k) for k in (0, 1, 2)] == [(False, None), (False, None), (False, 0)]
    assert arc.lists() == ((1, 2), (), (), ())
    assert arc.p == 0
    assert arc.request(1) == (True, None)
    assert arc.request(3) == (False, 2)
    assert arc.lists() == ((3,), (1,), (2,), ())
    assert arc.p == 0
    assert arc.request(2) == (False, 1)
    assert arc.lists() == ((3,), (2,), (), (1,))
    assert arc.p == 1


# --- integer p (the spec's decision) against the paper's fractional p ---------------

def _form(pair: tuple[PaperArc, PaperArc]) -> tuple[object, ...]:
    """Both ARCs' lists and p with keys renamed in order of appearance: keys are
    interchangeable, so equal forms serve every later request alike."""
    names: dict[Hashable, int] = {}
    for arc in pair:
        for lst in arc.lists():
            for key in lst:
                names.setdefault(key, len(names))
    return tuple((tuple(tuple(names[k] for k in lst) for lst in arc.lists()), arc.p)
                 for arc in pair)


def first_difference(c: int, depth: int) -> tuple[tuple[int, ...] | None, bool]:
    """Breadth-first over request sequences of both ARCs side by side (integer and
    fractional p), up to ``depth`` requests, one node per renamed pair of states.
    Returns the shortest sequence after which they answer a request differently (a hit
    or a victim), or None; and whether the search closed (every reachable pair seen, so
    None means they never differ at capacity ``c``)."""
    root = (PaperArc(c), PaperArc(c, fractional=True))
    seen = {_form(root)}
    frontier: list[tuple[tuple[PaperArc, PaperArc], tuple[int, ...]]] = [(root, ())]
    for _ in range(depth):
        grown = []
        for (whole, exact), trace in frontier:
            present = sorted({cast(int, k) for arc in (whole, exact) for lst in arc.lists()
                              for k in lst})
            for key in (*present, max(present, default=-1) + 1):
                pair = (copy.deepcopy(whole), copy.deepcopy(exact))
                if pair[0].request(key) != pair[1].request(key):
                    return (*trace, key), False
                form = _form(pair)
                if form not in seen:
                    seen.add(form)
                    grown.append((pair, (*trace, key)))
        frontier = grown
        if not frontier:
            return None, True
    return None, False


def test_integer_and_fractional_p_never_differ_up_to_capacity_4() -> None:
    for c in (1, 2, 3, 4):
        assert first_difference(c, depth=200) == (None, True)


def test_integer_and_fractional_p_first_differ_after_18_requests_at_capacity_5() -> None:
    assert first_difference(5, depth=18) == (SHORTEST_DIFFERENCE, False)
    whole, exact = PaperArc(5), PaperArc(5, fractional=True)
    answers = [(whole.request(k), exact.request(k)) for k in SHORTEST_DIFFERENCE]
    assert all(a == b for a, b in answers[:-1])
    # Request 17 (key 6, a ghost of b1 with |b1| = 2, |b2| = 3) raises p by 3 // 2 = 1
    # to 3, or by 3/2 to 7/2; request 18 (key 0, in b2) lowers it by 1 to 2, or to 5/2.
    # REPLACE then sees |t1| == p == 2 with the key in b2 and takes t1's least recent key
    # (8); with p = 5/2 neither test holds and t2's least recent key (4) goes.
    assert answers[-1] == ((False, 8), (False, 4))
    assert (whole.p, exact.p) == (Fraction(2), Fraction(5, 2))


def test_the_spec_follows_integer_p_where_the_two_differ() -> None:
    state, whole, exact = initial_state(5, Policy.ARC), PaperArc(5), PaperArc(5, fractional=True)
    for key in SHORTEST_DIFFERENCE:
        state, hit, victim = spec_request(state, key)
        want, other = whole.request(key), exact.request(key)
    assert (hit, victim) == want != other
