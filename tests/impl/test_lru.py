"""Unit tests of ``kvoffload.impl.lru``: vLLM 0.24's LRU order over evictable keys."""

from __future__ import annotations

import pytest

from kvoffload.impl import OffloadManager
from kvoffload.impl.lru import LruEviction
from kvoffload.spec import InvariantViolation


class CountingSet(set[str]):
    """A set that counts membership tests, to see what eviction walks past."""

    probes = 0

    def __contains__(self, key: object) -> bool:
        self.probes += 1
        return super().__contains__(key)


def test_evictable_keys_queue_in_order_and_touch_walks_backwards() -> None:
    lru = LruEviction()
    lru.evictable.update(dict.fromkeys(["a", "b", "c", "d"]))
    lru.touched(["c", "a", "zz"], ready=set())
    assert lru.view() == ("b", "d", "a", "c")  # the touch's first key ends most recent


def test_pinned_keys_leave_the_queue_and_return_at_the_recent_end() -> None:
    lru = LruEviction()
    lru.evictable.update(dict.fromkeys(["a", "b", "c"]))
    del lru.evictable["a"]
    lru.touched(["a"], ready={"a"})  # not evictable: no effect
    assert lru.view() == ("b", "c")
    lru.evictable.update(dict.fromkeys(["a"]))
    assert lru.view() == ("b", "c", "a")


def test_evict_skips_protected_keys_and_keeps_them_in_place() -> None:
    lru = LruEviction()
    lru.evictable.update(dict.fromkeys(["a", "b", "c", "d"]))
    assert lru.evict(2, {"a", "c"}) == ("b", "d")
    assert lru.view() == ("a", "c")


def test_evict_never_walks_past_pinned_blocks() -> None:
    manager = OffloadManager(1002)
    pinned = [f"p{i}" for i in range(1000)]
    manager.prepare_store([*pinned, "x", "y"])
    manager.complete_store([*pinned, "x", "y"])
    manager.prepare_load(pinned)
    protected = CountingSet({"y"})
    order = manager._order
    assert isinstance(order, LruEviction)
    assert order.evict(1, protected) == ("x",)
    assert protected.probes == 1  # only x was looked at, none of the 1,000 pinned blocks


def test_evict_more_than_available_is_an_invariant_violation() -> None:
    lru = LruEviction()
    lru.evictable.update(dict.fromkeys(["a"]))
    with pytest.raises(InvariantViolation):
        lru.evict(2, set())
    assert lru.view() == ("a",)


def test_check_compares_with_the_evictable_set() -> None:
    lru = LruEviction()
    lru.evictable.update(dict.fromkeys(["a"]))
    lru.check({"a": 0}, {"a"})
    with pytest.raises(InvariantViolation, match="lru_queues_evictable_blocks"):
        lru.check({"a": 0, "b": 1}, {"a", "b"})


def test_touch_skips_keys_that_are_not_evictable_and_walks_on() -> None:
    lru = LruEviction()
    lru.evictable.update(dict.fromkeys(["a", "b", "c", "d"]))
    lru.touched(["c", "zz", "a", "q", "b"], ready={"zz"})  # zz READY but pinned, q absent
    assert lru.view() == ("d", "b", "a", "c")


@pytest.mark.parametrize("keys", [["a", "b", "a"], ["b", "a", "b", "b"], ["c", "c"]])
def test_touch_with_a_repeat_orders_as_the_deduplicated_call(keys: list[str]) -> None:
    repeated, deduplicated = LruEviction(), LruEviction()
    for lru in (repeated, deduplicated):
        lru.evictable.update(dict.fromkeys(["a", "b", "c", "d"]))
    repeated.touched(keys, ready=set())
    deduplicated.touched(list(dict.fromkeys(keys)), ready=set())
    assert repeated.view() == deduplicated.view()
