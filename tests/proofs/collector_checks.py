"""What a search leaves the cyclic garbage collector, checked in a fresh python.

test_explorer.py runs each check here as ``python collector_checks.py NAME`` (with the
test session's ``sys.path``): both freeze the heap, and ``explore()`` then walks the
frozen values (``gc.get_freeze_count()`` counts them one by one; a caller's frozen
values must stay frozen). A fresh interpreter's heap holds tens of thousands of values;
the default tier's test process, when it gets there, millions: three walks of it made
each check cost about 0.75 s of CPU in that process, against about 0.1 s for the whole
fresh one. Standard library and the project only: no pytest (importing it costs more
than the checks).
"""

from __future__ import annotations

import gc
import sys
from dataclasses import replace

from proofs.modelcheck.bounds import Bounds
from proofs.modelcheck.checks import CHECKS_BY_NAME
from proofs.modelcheck.explorer import Setup, explore
from proofs.modelcheck.model import SPEC
from proofs.modelcheck.node import Form

from kvoffload.spec import Eviction, Policy

ONE_KEY = Bounds("one-key", capacity=1, keys=("a",), resets=1, readers=1, width=1)
"""One key, one slot: the smallest bounds (test_explorer.py's too)."""
LRU = Setup(SPEC, Form.TICKET, Policy.LRU)
"""The spec under LRU in the ticket form, every property (test_explorer.py's too)."""


def a_search_leaves_nothing_in_a_reference_cycle() -> None:
    """explore() pauses the cyclic collector and counts on reference counting alone to
    free what the search drops: a misuse error kept as a call's answer held, by its
    traceback's frames, the search's own frame (the last answer it read, or the spec's
    answer a mutant's is compared with), and with it every node the search met, in a
    cycle only the collector frees (hundreds of values at ONE_KEY, 458,000 after
    spec-arc+background-eviction's TINY search). The heap is frozen first, so the one
    collection goes over what the three searches left alone."""
    enabled = gc.isenabled()
    gc.disable()
    gc.freeze()
    try:
        for setup in (replace(LRU, eviction=Eviction.BACKGROUND),  # misuse last
                      CHECKS_BY_NAME["mutant:CompleteLoadCountsDuplicates+unique-keys"].setup,
                      CHECKS_BY_NAME["mutant:CompleteLoadCountsDuplicates"].setup):  # violated
            explore(setup, ONE_KEY)
        assert gc.collect() == 0
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()


def what_a_search_kept_joins_the_oldest_generation() -> None:
    """No young collection goes over what a search kept (its result here): it is in the
    oldest generation when explore() returns. Values the caller froze stay frozen, and
    the collector is left enabled or not as it was."""
    result = explore(LRU, ONE_KEY)
    young = gc.get_objects(0) + gc.get_objects(1)  # small lists, unlike the oldest's
    assert gc.is_tracked(result)
    assert not any(value is result for value in young)
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        gc.disable()
        explore(LRU, ONE_KEY)
        assert (gc.get_freeze_count(), gc.isenabled()) == (frozen, False)
    finally:
        gc.enable()
        gc.unfreeze()


CHECKS = {check.__name__: check for check in (
    a_search_leaves_nothing_in_a_reference_cycle,
    what_a_search_kept_joins_the_oldest_generation)}


if __name__ == "__main__":
    CHECKS[sys.argv[1]]()
