"""The reference manager's ARC against Megiddo and Modha's, written from the paper.

In the paper's regime (one key per call, every store completed at once, no loads,
failures or resets) the manager's ARC is the paper's with the spec's integer ``p``
(``docs/spec.md`` D10): same hits, same victims, same lists and ``p`` after every
request, on random traces.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import pytest

from kvoffload.impl import OffloadManager
from kvoffload.impl.arc import ArcEviction
from kvoffload.spec import LookupResult, StorePlan
from paper_arc import SHORTEST_DIFFERENCE, PaperArc, random_traces


def manager_request(manager: OffloadManager, key: Hashable) -> tuple[bool, Hashable | None]:
    """One request of the paper: a hit is a ``touch``, a miss a store completed at once."""
    if manager.lookup(key) is LookupResult.HIT:
        manager.touch([key])
        return True, None
    plan = manager.prepare_store([key])
    if not isinstance(plan, StorePlan) or len(plan.evicted) > 1:
        raise AssertionError(f"a single-key store in the paper's regime: {plan!r}")
    manager.complete_store([key], ticket=plan.ticket)
    return False, (plan.evicted[0] if plan.evicted else None)


def mismatches(c: int, requests: Sequence[int]) -> list[str]:
    manager, paper = OffloadManager(c, "arc"), PaperArc(c)
    order = manager._order
    assert isinstance(order, ArcEviction)
    found = []
    for n, key in enumerate(requests):
        got, want = manager_request(manager, key), paper.request(key)
        view = order.view()
        # Every block is evictable in this regime, so the evictable orders are the lists.
        lists = (view.t1_evictable, view.t2_evictable, view.b1, view.b2)
        if got != want or lists != paper.lists() or view.p != paper.p:
            found.append(f"request {n} ({key!r}) at c={c}: manager {got} {lists} p={view.p}; "
                         f"paper {want} {paper.lists()} p={paper.p}")
    return found


def test_manager_arc_is_the_papers_with_integer_p_on_random_traces() -> None:
    assert [m for c, reqs in random_traces(1000, seed=24) for m in mismatches(c, reqs)] == []


@pytest.mark.slow
def test_manager_arc_is_the_papers_with_integer_p_on_4000_random_traces() -> None:
    assert [m for c, reqs in random_traces(4000, seed=2003) for m in mismatches(c, reqs)] == []


def test_manager_follows_integer_p_where_it_differs_from_the_papers_fractional_p() -> None:
    manager, whole = OffloadManager(5, "arc"), PaperArc(5)
    answers = [(manager_request(manager, k), whole.request(k)) for k in SHORTEST_DIFFERENCE]
    assert all(got == want for got, want in answers)
    assert answers[-1][0] == (False, 8)  # the fractional p evicts 4 here
