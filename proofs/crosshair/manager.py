"""A manager against the spec, one call at a time, for CrossHair.

:func:`difference` drives a fresh manager along the shortest trace of a domain state
(comparing every call, as ``proofs/check.py --refinement`` does), then makes one more
call on it and on the spec. The manager is ``kvoffload.impl.OffloadManager`` or the
class named by ``KVOFFLOAD_CROSSHAIR_MANAGER`` (``module:Class``).
"""

from __future__ import annotations

import importlib
import os

from kvoffload.spec import CacheState, Call, Op, Policy, initial_state
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


def difference(state: CacheState, *calls: Call) -> str:
    """How the manager's answers to ``calls`` in ``state`` differ from the spec's ("" if
    they do not), then its lookup of every key: ``state`` must be a state of a domain
    (its trace is replayed). The lookups show a block a call left or dropped behind the
    answers' back; a later call shows a slot it leaked."""
    domains = _domains()
    trace = next((d.traces[state] for d in domains if state in d.traces), None)
    if trace is None:
        return "not a state of any domain"
    keys = tuple(dict.fromkeys(k for d in domains for k in d.keys))
    driven = manager(state.capacity, state.policy)
    current = initial_state(state.capacity, state.policy)
    tickets: dict[int, int] = {}
    probes = tuple(Call(Op.LOOKUP, (key,)) for key in keys)
    for n, step in enumerate((*trace, *calls, *probes)):
        after, problem = compare(current, driven, step, tickets)
        if problem is not None:
            where = f"trace call {n + 1} ({step})" if n < len(trace) else f"{step}"
            return f"{where}: {problem}"
        if after is not None:  # None: both raised the same misuse error, nothing changed
            current = after
    return ""
