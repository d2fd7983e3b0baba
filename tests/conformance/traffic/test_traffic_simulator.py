"""The simulation on hand-made traces with known answers, and its invariants on a real one."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from kvoffload.conformance.traffic import Lookup, Request, Timing, load, simulate
from kvoffload.conformance.traffic.simulator import Counters, Run, Touch, default_touch
from kvoffload.spec.errors import BadCapacity
from kvoffload.spec.vocabulary import LookupResult

TRI, TWO = Lookup.TRI_STATE, Lookup.TWO_STATE
SLOW = Timing(10.0, 1.0, block_bytes=1000)
"""Stores take 10 ms a block, loads 1 ms; 1,000-byte blocks."""

# r1 stores a and b (one job of 2 blocks: in flight from 0 to 20 ms); r2 arrives at 1 ms
# and names them first, then c (its last block holds 276 tokens).
MEETS_IN_FLIGHT = [Request(0.0, ("a", "b"), 1024), Request(1.0, ("a", "b", "c"), 1300)]


def both(requests: list[Request], capacity: int, timing: Timing) -> tuple[Counters, Counters]:
    tri = simulate(requests, capacity, "lru", TRI, timing)
    two = simulate(requests, capacity, "lru", TWO, timing)
    return tri.counters, two.counters


def test_tri_state_waits_for_the_store_and_loads() -> None:
    tri, _ = both(MEETS_IN_FLIGHT, 10, SLOW)
    assert (tri.met_in_flight_requests, tri.met_in_flight_blocks) == (1, 2)
    assert (tri.waits, tri.wait_ms) == (1, 19.0)  # from 1 ms until the store ends at 20 ms
    assert (tri.hit_blocks, tri.hit_tokens, tri.loaded_blocks) == (2, 1024, 2)
    assert (tri.computed_blocks, tri.computed_tokens) == (3, 1024 + 276)
    assert (tri.recomputed_blocks, tri.duplicate_stores, tri.stored_blocks) == (0, 0, 3)
    assert tri.end_ms == 20.0 + 10.0  # r2 loads a, b (2 ms) and stores c from 20 ms


def test_two_state_computes_the_in_flight_blocks_again() -> None:
    tri, two = both(MEETS_IN_FLIGHT, 10, SLOW)
    assert (two.met_in_flight_requests, two.met_in_flight_blocks) == (1, 2)
    assert (two.waits, two.wait_ms, two.hit_blocks, two.hit_tokens) == (0, 0.0, 0, 0)
    assert (two.computed_blocks, two.computed_tokens) == (2 + 3, 1024 + 1300)
    assert (two.recomputed_blocks, two.recomputed_tokens) == (2, 1024)
    assert (two.duplicate_stores, two.stored_blocks) == (2, 3)  # the tier stores a, b once
    assert two.computed_blocks - tri.computed_blocks == 2


def test_a_block_in_flight_after_a_miss_is_computed_again_by_both() -> None:
    """Behind a MISS the prefix has ended: the tri-state lookup cannot save that block."""
    requests = [Request(0.0, ("x", "y"), 1024), Request(1.0, ("z", "y"), 600)]
    tri, two = both(requests, 10, SLOW)
    for c in (tri, two):
        assert (c.met_in_flight_requests, c.waits, c.hit_blocks) == (0, 0, 0)
        assert (c.recomputed_blocks, c.recomputed_tokens, c.duplicate_stores) == (1, 88, 1)
    assert asdict(tri) == asdict(two)


def test_a_tri_state_request_can_wait_twice() -> None:
    """After its wait, the lookup is made again: a block stored meanwhile by another
    request may now be in flight too."""
    requests = [Request(0.0, ("a",), 512), Request(1.0, ("a", "b"), 1024),
                Request(5.0, ("b",), 512)]
    tri = simulate(requests, 10, "lru", TRI, Timing(10.0, 0.0)).counters
    # r2 waits for a (ends 10 ms); r3 stores b from 5 to 15 ms; r2 finds b in flight
    assert (tri.waits, tri.wait_ms, tri.met_in_flight_requests) == (2, 9.0 + 5.0, 1)
    assert (tri.hit_blocks, tri.computed_blocks, tri.recomputed_blocks) == (2, 2, 0)


def test_zero_latency_nothing_is_ever_in_flight() -> None:
    requests = load("synthetic", limit=400)
    tri, two = both(requests, 500, Timing())
    assert asdict(tri) == asdict(two)
    assert tri.met_in_flight_requests == tri.waits == tri.recomputed_blocks == 0
    assert tri.hit_blocks > 0


def test_a_request_larger_than_the_tier_is_rejected() -> None:
    requests = [Request(0.0, (1, 2, 3), 1536), Request(1.0, (1, 2, 3), 1536)]
    c = simulate(requests, 2, "lru", TRI, Timing()).counters
    assert (c.rejections, c.rejected_blocks, c.stored_blocks, c.hit_blocks) == (2, 6, 0, 0)


def test_blocks_in_flight_are_not_evicted_a_full_tier_rejects() -> None:
    requests = [Request(0.0, ("a", "b"), 1024), Request(1.0, ("c",), 512),
                Request(30.0, ("d",), 512)]
    run = simulate(requests, 2, "lru", TRI, SLOW)
    c = run.counters
    assert (c.rejections, c.rejected_blocks) == (1, 1)  # c: a and b are still being written
    assert (c.evictions, c.stored_blocks) == (1, 3)  # d evicts a, the least recent
    assert run.manager is not None
    assert run.manager.lookup("a") is LookupResult.MISS
    assert run.manager.lookup("b") is LookupResult.HIT


@pytest.mark.parametrize(("lookup", "policy"), [
    (TRI, "arc"), (TWO, "lru"),
    # the other pairs: each lookup and each policy is one of the two above already
    pytest.param(TRI, "lru", marks=pytest.mark.wide),
    pytest.param(TWO, "arc", marks=pytest.mark.wide),
], ids=lambda value: str(value))
def test_invariants_on_real_traffic(lookup: Lookup, policy: str) -> None:
    """On 1,500 conversation requests, 300 blocks, 50 ms a block: the tier ends
    quiescent and consistent, and the counters add up."""
    requests = load("conversation", limit=1500)
    seen: list[int] = []
    run = simulate(requests, 300, policy, lookup, Timing(50.0, 5.0), progress=seen.append)
    c, manager = run.counters, run.manager
    assert manager is not None
    manager.check()
    view = manager.view()
    assert view.storing == ()
    assert view.readers == ()
    assert manager.pinned_slots == 0
    assert c.requests == len(requests) == seen[-1]
    assert seen == sorted(seen)
    assert len(seen) >= 2
    assert c.blocks == sum(len(r.blocks) for r in requests)
    assert c.tokens == sum(r.tokens for r in requests)
    assert c.hit_blocks + c.computed_blocks == c.blocks
    assert c.hit_tokens + c.computed_tokens == c.tokens
    assert c.loaded_blocks == c.hit_blocks
    assert c.stored_blocks - c.evictions == len(view.ready) <= 300
    assert c.duplicate_stores <= c.recomputed_blocks <= c.computed_blocks
    assert c.met_in_flight_requests > 0  # 50 ms a block: requests do meet stores in flight
    assert (c.waits > 0) == (lookup is TRI)


def test_defaults_and_bad_capacity() -> None:
    assert default_touch("lru") is Touch.DONE
    assert default_touch("arc") is Touch.ARRIVAL
    run: Run = simulate(MEETS_IN_FLIGHT, 10, "arc")
    assert (run.touch, run.policy, run.capacity_tokens) == (Touch.ARRIVAL, "arc", 5120)
    with pytest.raises(BadCapacity):
        simulate(MEETS_IN_FLIGHT, 0)
