"""``kvoffload check --trace``: a request trace as the lockstep's workload.

A pass plays the trace's call stream (:mod:`.calls`) on one fresh target and the spec,
in lockstep: the same judge, properties and reports as the random runs. A trace is far
too long for one Hypothesis example, so nothing here goes through Hypothesis: the
delays come from the seed, and a failure is shrunk in two stages:

1. **the shortest failing window of requests**: the failure happened while request
   ``b`` was served (or in the drain after the last one); windows ``[a, b]`` of the
   trace are replayed from an empty tier, and a bisection on ``a`` finds the latest
   start that still fails the same property (each request's delays depend on the seed
   and its index only, so a window replays them unchanged);
2. the suite's shrinker (:func:`~kvoffload.conformance.judge.shrink.shrink`) on that window's
   calls: chunks deleted, calls simplified, keys renamed, smaller tiers tried first,
   with its budget of replays (the same shrunk trace on every machine).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..adapter_api import Adapter, Capabilities
from ..config import CheckConfig
from ..errors import PropertyViolation
from ..judge.lockstep import Lockstep, construct
from ..judge.shrink import Shrunk, shrink
from ..options import split_trace
from .calls import Tally, TraceCalls
from .traces import Request, load


def load_trace(text: str) -> list[Request]:
    """The requests ``--trace`` names: ``NAME`` or ``NAME:N`` (its first N).

    raises: TraceError
    """
    name, count = split_trace(text)
    return load(name, limit=count)


def trace_alphabet(caps: Capabilities, trace: str) -> dict[str, str]:
    """The calls a trace run makes, for the report's header."""
    return {
        "lookup, prepare_load, prepare_store, complete_store, complete_load":
            f"the trace {trace}'s call stream: per request, lookups of its blocks up to the "
            f"first that is not a HIT, a load of the leading hits, a store of the rest; "
            f"jobs end after delays drawn from the seed",
        "touch": "each request's blocks at its arrival, last first" if caps.touch
        else "not made: the target has no touch",
        "take_events": "every 64 requests" if caps.events else "not made: no take_events",
        "completion forms": "the ticket form and vLLM's, one job in two each"
        if caps.completion_tickets else "vLLM's form (no ticket)",
        "reset_cache, duplicate keys, misuse, stale completions":
            "not made: a trace has none",
    }


@dataclass
class Pass:
    """One pass over (a window of) the trace: what it did and where it failed."""

    tally: Tally
    violation: PropertyViolation | None = None
    request: int = 0
    """The trace's request (0-based) during which the violation happened."""


def play(make_adapter: Callable[[int], Adapter], caps: Capabilities, config: CheckConfig,
         requests: Sequence[Request], first: int = 0, last: int | None = None,
         silenced: frozenset[str] = frozenset(),
         on_request: Callable[[Tally], None] | None = None) -> Pass:
    """Requests ``first .. last`` (default: to the end) in lockstep on a fresh target."""
    end = len(requests) - 1 if last is None else last
    run = Lockstep(construct(make_adapter, config.capacity, config.call_timeout), config,
                   silenced=silenced)
    calls = TraceCalls(run, config, caps, on_request)
    try:
        calls.play(requests[first:end + 1], first)
    except PropertyViolation as violation:
        return Pass(calls.tally, violation, first + calls.request_of(violation.step))
    return Pass(calls.tally)


def shortest_window(make_adapter: Callable[[int], Adapter], caps: Capabilities,
                    config: CheckConfig, requests: Sequence[Request], found: Pass,
                    silenced: frozenset[str] = frozenset()) -> tuple[int, Pass]:
    """The latest start ``a`` such that requests ``a .. found.request`` still fail
    ``found``'s property, by bisection (stage 1), and that window's pass."""
    if found.violation is None:
        raise ValueError("shortest_window needs a pass that failed")
    prop, end = found.violation.prop, found.request
    best_start, best = 0, found
    low, high = 0, end
    while low < high:
        middle = (low + high + 1) // 2
        window = play(make_adapter, caps, config, requests, middle, end, silenced)
        if window.violation is not None and window.violation.prop == prop:
            low, best_start, best = middle, middle, window
        else:
            high = middle - 1
    return best_start, best


def shrink_trace_failure(make_adapter: Callable[[int], Adapter], caps: Capabilities,
                         config: CheckConfig, requests: Sequence[Request], found: Pass,
                         silenced: frozenset[str] = frozenset()
                         ) -> tuple[Shrunk, dict[str, object]]:
    """Both stages: the shrunk violation, and what the window stage found."""
    started = time.perf_counter()
    start, window = shortest_window(make_adapter, caps, config, requests, found, silenced)
    if window.violation is None:
        raise ValueError("shortest_window returned a pass that did not fail")
    cut = time.perf_counter()
    shrunk = shrink(make_adapter, config, window.violation, silenced=silenced)
    facts: dict[str, object] = {
        "failing_request": found.request, "window": [start, found.request],
        "window_requests": found.request - start + 1,
        "window_calls": len(window.violation.trace),
        "window_s": round(cut - started, 3),
        "shrink_s": round(time.perf_counter() - cut, 3),
        "shrunk_calls": len(shrunk.violation.trace),
        "shrunk_capacity": shrunk.violation.capacity,
        "shrink_replays": shrunk.replays, "shrink_stopped": shrunk.stopped,
    }
    return shrunk, facts

