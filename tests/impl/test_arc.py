"""Unit tests of ``kvoffload.impl.arc``: the spec's ARC with evictable-only orders."""

from __future__ import annotations

import pytest

from kvoffload.impl import OffloadManager
from kvoffload.impl.arc import ArcEviction
from kvoffload.spec import InvariantViolation, StorePlan


def arc_with(capacity: int, *keys: str) -> ArcEviction:
    """An ARC order holding ``keys`` as evictable, inserted in order (all in t1)."""
    arc = ArcEviction(capacity)
    assert arc.stored(keys, capacity, set()) == ()
    arc.evictable.update(dict.fromkeys(keys))
    return arc


def test_new_keys_enter_t1_and_a_touch_promotes_ready_keys_to_t2() -> None:
    arc = arc_with(4, "a", "b", "c")
    arc.touched(("a", "b"), ready={"a", "b", "c"})
    view = arc.view()
    assert (view.t1_evictable, view.t2_evictable) == (("c",), ("b", "a"))
    assert (view.t1_size, view.t2_size) == (1, 2)


def test_touch_of_a_storing_key_keeps_it_in_t1() -> None:
    arc = ArcEviction(2)
    arc.stored(("a",), 2, set())
    arc.touched(("a",), ready=set())
    assert (arc.view().t1_size, arc.view().t2_size) == (1, 0)


def test_victims_come_from_t1_while_it_exceeds_p_else_from_t2() -> None:
    arc = arc_with(4, "a", "b", "c")
    arc.touched(("c",), ready={"a", "b", "c"})
    assert arc.evict(1, set()) == ("a",)  # |t1| = 2 > p = 0: from t1
    arc.p = 1
    assert arc.evict(1, set()) == ("c",)  # |t1| = 1 is not > p = 1: from t2
    assert arc.view().t1_evictable == ("b",)


def test_preference_falls_back_to_the_other_list() -> None:
    arc = arc_with(3, "a", "b")
    arc.touched(("a",), ready={"a", "b"})
    del arc.evictable["a"]  # t2 holds only a pinned key
    arc.p = 3  # prefer t2
    assert arc.evict(1, set()) == ("b",)


def test_ghost_hit_adapts_p_and_enters_t2() -> None:
    arc = arc_with(2, "a", "b")
    assert arc.evict(1, set()) == ("a",)
    assert arc.view().b1 == ("a",)
    assert arc.stored(("a",), 1, set()) == ()  # a slot is free: no eviction
    assert arc.p == 1
    view = arc.view()
    assert (view.t2_size, view.b1) == (1, ())


def test_replace_prefers_t1_for_a_b2_hit_when_t1_is_exactly_p() -> None:
    # issue 10 D: after adaptation t1 = (f,), t2 = (d, c), b2 = (b,), p = 1; storing b
    # evicts f (the paper's REPLACE: x in b2 and |t1| == p), where the rule "t1 only
    # when |t1| > p" took from t2.
    arc = arc_with(3, "d", "c", "f")
    arc.touched(("c", "d"), ready={"c", "d", "f"})  # t2 = (d, c), t1 = (f,)
    arc.b2["b"] = None
    arc.p = 2  # b's hit in b2 lowers it to 1
    assert arc.stored(("b",), 0, set()) == ("f",)
    assert arc.p == 1
    assert arc.view().b1 == ("f",)
    assert arc.view().t2_size == 3  # d, c and b (from b2)


def test_ghosts_are_trimmed_to_arcs_bounds() -> None:
    manager = OffloadManager(2, policy="arc")
    for key in "abcdef":
        plan = manager.prepare_store([key])
        assert isinstance(plan, StorePlan)
        manager.complete_store([key])
    manager.check()
    order = manager.view().order
    assert not isinstance(order, tuple)
    assert order.t1_size + len(order.b1) <= 2


def test_evict_never_walks_past_pinned_blocks() -> None:
    manager = OffloadManager(1002, policy="arc")
    pinned = [f"p{i}" for i in range(1000)]
    manager.prepare_store(["x", *pinned, "y"])
    manager.complete_store(["x", *pinned, "y"])
    manager.prepare_load(pinned)
    probes = 0

    class Counting(set[str]):
        def __contains__(self, key: object) -> bool:
            nonlocal probes
            probes += 1
            return super().__contains__(key)

    order = manager._order
    assert isinstance(order, ArcEviction)
    assert order.evict(2, Counting()) == ("x", "y")
    assert probes == 2


def test_check_finds_a_key_in_no_list() -> None:
    arc = arc_with(2, "a")
    with pytest.raises(InvariantViolation, match="arc_lists_hold_live_blocks"):
        arc.check({"a": 0, "b": 1}, {"a"})
