"""With zero latency, at a capacity no smaller than the largest request, the driver's LRU
figures are those of a plain prefix cache written here on its own (issue 25, item 1):
request by request, count the leading blocks present, then refresh every block the
request names in its order (its last block ends most recent) and insert the missing ones,
evicting the least recently used. The final orders are compared too, least recent first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from functools import cache

import pytest

from kvoffload.conformance.traffic import Lookup, Request, Timing, load, simulate

trace_of = cache(load)
"""Each trace read once per session."""


def plain_prefix_cache(requests: Sequence[Request], capacity: int
                       ) -> tuple[int, int, int, list[Hashable]]:
    """(hit blocks, hit tokens, evictions, final order least recent first)."""
    cache: OrderedDict[Hashable, None] = OrderedDict()
    hits = hit_tokens = evictions = 0
    for request in requests:
        leading = 0
        while leading < len(request.blocks) and request.blocks[leading] in cache:
            leading += 1
        hits += leading
        hit_tokens += sum(request.block_tokens(i) for i in range(leading))
        for block in request.blocks:  # the present ones first, so none is evicted below
            if block in cache:
                cache.move_to_end(block)
        for block in request.blocks:
            if block not in cache:
                if len(cache) == capacity:
                    cache.popitem(last=False)
                    evictions += 1
                cache[block] = None
        for block in request.blocks:  # the request's order, its last block most recent
            cache.move_to_end(block)
    return hits, hit_tokens, evictions, list(cache)


def driver(requests: Sequence[Request], capacity: int
           ) -> tuple[int, int, int, list[Hashable]]:
    run = simulate(requests, capacity, "lru", Lookup.TRI_STATE, Timing())
    assert run.manager is not None
    order = run.manager.view().order
    assert isinstance(order, tuple)
    c = run.counters
    return c.hit_blocks, c.hit_tokens, c.evictions, list(order)


@pytest.mark.parametrize(("trace", "limit", "capacity"), [
    # the conversation trace's first 4,000 requests in the wide tier: the same driver and
    # the same comparison as on the whole synthetic trace (the default tier's), at the
    # capacity of the trace's largest request too
    pytest.param("conversation", 4_000, 247, marks=pytest.mark.wide),
    ("synthetic", None, 374)])
def test_zero_latency_lru_is_the_plain_prefix_cache(trace: str, limit: int | None,
                                                    capacity: int) -> None:
    requests = trace_of(trace)[:limit]
    expected = plain_prefix_cache(requests, capacity)
    assert expected[0] > 0
    assert expected[2] > 0
    assert driver(requests, capacity) == expected


@pytest.mark.slow
@pytest.mark.parametrize("capacity", [None, 1_000, 5_859, 19_531, 97_656])
@pytest.mark.parametrize("trace", ["conversation", "synthetic"])
def test_zero_latency_lru_is_the_plain_prefix_cache_everywhere(trace: str,
                                                               capacity: int | None) -> None:
    """The whole traces, from the largest request's size (None) up to 5e7 tokens."""
    requests = trace_of(trace)
    if capacity is None:
        capacity = max(len(r.blocks) for r in requests)
    assert driver(requests, capacity) == plain_prefix_cache(requests, capacity)
