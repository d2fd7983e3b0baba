"""A manager against the spec, one call at a time, for CrossHair.

:func:`difference` drives a fresh manager along the shortest trace of a domain state
(comparing every call, as ``proofs/check.py --refinement`` does), then makes one more
call on it and on the spec. The manager is ``kvoffload.impl.OffloadManager`` or the
class named by ``KVOFFLOAD_CROSSHAIR_MANAGER`` (``module:Class``).
"""

from __future__ import annotations

import importlib
import os

from kvoffload.spec import CacheState, Call, Policy, initial_state
from proofs.modelcheck.refinement import NativeManager, compare

from .domain import BOUNDS, Domain, load

MANAGER = "KVOFFLOAD_CROSSHAIR_MANAGER"
DOMAINS = "KVOFFLOAD_CROSSHAIR_DOMAINS"


def manager(capacity: int, policy: Policy) -> NativeManager:
    name = os.environ.get(MANAGER, "kvoffload.impl:OffloadManager")
    module, _, cls = name.partition(":")
    built: NativeManager = getattr(importlib.import_module(module), cls)(capacity, policy.value)
    return built


def _domains() -> tuple[Domain, ...]:
    """The domains of this run (``KVOFFLOAD_CROSSHAIR_DOMAINS``), else every one."""
    names = [n.strip() for n in os.environ.get(DOMAINS, ",".join(BOUNDS)).split(",")]
    return tuple(load(BOUNDS[n]) for n in names if n)


def difference(state: CacheState, call: Call) -> str:
    """How the manager's answer to ``call`` in ``state`` differs from the spec's ("" if
    it does not): ``state`` must be a state of a domain (its trace is replayed)."""
    trace = next((d.traces[state] for d in _domains() if state in d.traces), None)
    if trace is None:
        return "not a state of any domain"
    driven = manager(state.capacity, state.policy)
    current = initial_state(state.capacity, state.policy)
    tickets: dict[int, int] = {}
    for n, step in enumerate((*trace, call)):
        current_next, problem = compare(current, driven, step, tickets)
        if problem is not None:
            where = "the call" if n == len(trace) else f"trace call {n + 1} ({step})"
            return f"{where}: {problem}"
        if current_next is None:
            return ""  # both raised the same misuse error and the manager is unchanged
        current = current_next
    return ""
