"""Eviction cost with many blocks that cannot be evicted, against none.

A tier of ``pinned + evictable`` slots is filled in three ways: ``none`` (every block
READY and evictable), ``pinned`` (the first ``pinned`` blocks READY with a reader
each, so the least recent blocks are exactly the ones eviction must skip), and
``in flight`` (the first ``pinned`` blocks still STORING). Then each timed round
stores one new block, which evicts exactly one, and completes it. A manager whose
eviction walks past unevictable blocks pays for all of them on every round.

Rounds are timed in batches of 100 and a cell is the median batch (not the cheapest:
a lucky batch is no more the manager's cost than an unlucky one); the garbage collector is
paused while rounds are timed (a full collection over the fill's objects would cost
more than hundreds of rounds); a manager stops after ``budget_ns`` of CPU time if it
has not finished its rounds by then.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from manager_trace import block_key

MODES = ("none", "pinned", "in flight")


def fill(store: Callable[[list[bytes]], Any], complete: Callable[[list[bytes]], Any],
          load: Callable[[list[bytes]], Any], mode: str, pinned: int, evictable: int) -> None:
    """Fill a tier of ``pinned + evictable`` slots in ``mode`` (see the module doc)."""
    keys = [block_key("fill", i) for i in range(pinned + evictable)]
    for start in range(0, pinned + evictable, 1_000):
        chunk = keys[start:start + 1_000]
        unevictable = start < pinned
        store(chunk)
        if not (unevictable and mode == "in flight"):
            complete(chunk)
        if unevictable and mode == "pinned":
            load(chunk)


def native_round_cost(make: Callable[[int], Any], mode: str, pinned: int, evictable: int,
                      rounds: int) -> float:
    """CPU ns per round (store one block, evicting one; complete it), native API."""
    manager = make(pinned + evictable)
    fill(manager.prepare_store, manager.complete_store, manager.prepare_load, mode,
          pinned, evictable)
    prepare_store, complete_store = manager.prepare_store, manager.complete_store

    def one_round(keys: list[bytes]) -> None:
        prepare_store(keys)
        complete_store(keys)
    return _timed(one_round, rounds)


def vllm_round_cost(make: Callable[[int], Any], context: Any, mode: str, pinned: int,
                    evictable: int, rounds: int) -> float:
    """CPU ns per round through vLLM's API (``context`` is passed to every call)."""
    manager = make(pinned + evictable)
    fill(lambda k: manager.prepare_store(k, context),
          lambda k: manager.complete_store(k, context),
          lambda k: manager.prepare_load(k, context), mode, pinned, evictable)
    prepare_store, complete_store = manager.prepare_store, manager.complete_store

    def one_round(keys: list[bytes]) -> None:
        if prepare_store(keys, context) is None:
            raise RuntimeError(f"{mode}: the store was rejected; the fill is wrong")
        complete_store(keys, context)
    return _timed(one_round, rounds)


def _timed(one_round: Callable[[list[bytes]], None], rounds: int,
           budget_ns: int = 3_000_000_000, batch: int = 100) -> float:
    """CPU ns per round of the median batch, over ``rounds`` rounds or as many as
    ``budget_ns`` allows."""
    fresh = [[block_key("round", i)] for i in range(rounds)]
    gc.collect()
    gc.disable()
    try:
        done, elapsed, costs = 0, 0, []
        while done < rounds and elapsed < budget_ns:
            keys_of_batch = fresh[done:done + batch]
            start = time.process_time_ns()
            for keys in keys_of_batch:
                one_round(keys)
            spent = time.process_time_ns() - start
            elapsed += spent
            done += len(keys_of_batch)
            costs.append(spent / len(keys_of_batch))
    finally:
        gc.enable()
    return statistics.median(costs)
