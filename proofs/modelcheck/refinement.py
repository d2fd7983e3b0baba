"""Bounded refinement: the reference manager answers every call as the spec does.

Exhaustive at a bound, not sampled: the model checker first enumerates every node the
spec reaches within the bound (with its shortest trace). Then, for every reachable node,
a fresh manager is driven along the node's trace, comparing every call, and a copy of it
is given each call the environment may make there, its output compared with the spec's.
The manager may issue any fresh tickets: they are mapped to the spec's one to one. The spec
follows the manager's slot choices (any free slot is allowed; the spec checks it), while
victims must be the spec's exact LRU / ARC victims. A call that must raise must raise
the same misuse error and leave the manager's view unchanged.
"""

from __future__ import annotations

import copy
import pickle
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from kvoffload.spec import (
    Assumption,
    CacheState,
    Call,
    Completion,
    Events,
    KvOffloadError,
    LoadPlan,
    LookupResult,
    Output,
    Policy,
    StorePlan,
    StoreRejected,
    apply,
    initial_state,
    send,
)

from .bounds import Bounds
from .explorer import Setup, explore
from .model import SPEC
from .node import Action, Form, Node, Outcome


class NativeManager(Protocol):
    """The native manager API (``docs/native-api.md``)."""

    def lookup(self, key: object) -> LookupResult: ...
    def prepare_load(self, keys: Sequence[object]) -> LoadPlan: ...
    def complete_load(self, keys: Sequence[object], ticket: int | None = None
                      ) -> Completion: ...
    def touch(self, keys: Sequence[object]) -> None: ...
    def prepare_store(self, keys: Sequence[object]) -> StorePlan | StoreRejected: ...
    def complete_store(self, keys: Sequence[object], success: bool = True,
                       ticket: int | None = None) -> Completion: ...
    def reset_cache(self) -> int: ...
    def take_events(self) -> Events: ...


Factory = Callable[[int, Policy], NativeManager]


def reference_manager(capacity: int, policy: Policy) -> NativeManager:
    """``kvoffload.impl.OffloadManager``, imported only when refinement runs."""
    from kvoffload.impl import OffloadManager

    manager: NativeManager = OffloadManager(capacity, policy)
    return manager


@dataclass(frozen=True)
class Divergence:
    """The first call on which the manager and the spec disagree."""

    trace: tuple[Action, ...]
    problem: str


@dataclass(frozen=True)
class RefinementResult:
    verdict: str
    states: int
    comparisons: int
    seconds: float
    divergence: Divergence | None


def call_manager(manager: NativeManager, call: Call) -> Output:
    """Make ``call`` on a native manager, through the spec's one dispatcher."""
    output: Output = send(manager, call)
    return output


def _view(manager: NativeManager) -> object:
    view = getattr(manager, "view", None)
    return view() if callable(view) else None


def _describe(result: Output | BaseException) -> str:
    if isinstance(result, BaseException):
        return f"raises {type(result).__name__}: {result}"
    return repr(result)


UNISSUED = 10**9
"""Spec tickets the manager never issued (a completion of a job never issued, or one
the spec named with a ticket it issued no plan for) are sent as ``UNISSUED + ticket``."""


_UNSEEN = object()
"""``compare(before=...)`` left out: the manager's view is read before the call."""


def compare(state: CacheState, manager: NativeManager, call: Call,
            tickets: dict[int, int], before: object = _UNSEEN
            ) -> tuple[CacheState | None, str | None]:
    """Make ``call`` on both; the spec's next state, or the disagreement in words.

    The manager may issue any fresh tickets: ``tickets`` maps the spec's to the
    manager's, one to one, and is extended by each plan (as the suite maps slots).
    ``before``: the manager's view before the call, if the caller read it already.
    """
    if before is _UNSEEN:
        before = _view(manager)
    sent = call if call.ticket is None else replace(
        call, ticket=tickets.get(call.ticket, UNISSUED + call.ticket))
    try:
        got: Output | BaseException = call_manager(manager, sent)
    except KvOffloadError as error:
        got = error
    slots = got.slots if isinstance(got, StorePlan) else None
    try:
        new, want = apply(state, call, slots=slots)
        expected: Output | BaseException = want
    except KvOffloadError as error:
        new, expected = None, error
    if isinstance(expected, BaseException) or isinstance(got, BaseException):
        same = type(expected) is type(got)
        if same and isinstance(got, BaseException) and _view(manager) != before:
            return None, f"{_describe(got)} but its state changed"
    elif isinstance(expected, (StorePlan, LoadPlan)) and isinstance(got, (StorePlan, LoadPlan)) \
            and type(got) is type(expected):
        if got.ticket in tickets.values():
            return None, f"manager: {_describe(got)} reuses ticket {got.ticket}"
        tickets[expected.ticket] = got.ticket
        same = replace(got, ticket=expected.ticket) == expected
    else:
        same = expected == got
    if not same:
        return None, f"spec: {_describe(expected)}; manager: {_describe(got)}"
    return new, None


def _lockstep(factory: Factory, bounds: Bounds, policy: Policy, trace: Sequence[Action]
              ) -> tuple[CacheState, NativeManager, dict[int, int], Divergence | None]:
    """Drive a fresh manager and the spec along ``trace``, comparing every call."""
    manager = factory(bounds.capacity, policy)
    state = initial_state(bounds.capacity, policy)
    tickets: dict[int, int] = {}
    for n, action in enumerate(trace):
        new, problem = compare(state, manager, action.call, tickets)
        if problem is not None or new is None:
            divergence = Divergence(tuple(trace[:n + 1]), problem or "the call raised")
            return state, manager, tickets, divergence
        state = new
    return state, manager, tickets, None


def _copier(manager: NativeManager) -> Callable[[], NativeManager]:
    """Independent copies of ``manager``, one per call: unpickled from one pickle of it
    (a fifth of ``copy.deepcopy``'s time, which walks the object graph afresh for each
    copy), or deep copies where the manager cannot be pickled."""
    try:
        frozen = pickle.dumps(manager, pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return lambda: copy.deepcopy(manager)

    def thawed() -> NativeManager:
        fresh: NativeManager = pickle.loads(frozen)
        return fresh

    return thawed


def refine(bounds: Bounds, policy: Policy, form: Form, factory: Factory = reference_manager,
           assumptions: tuple[Assumption, ...] = ()) -> RefinementResult:
    """Compare the manager with the spec on every reachable node x every call (the calls
    ``assumptions`` exclude are neither made nor compared)."""
    start = time.perf_counter()
    calls: dict[int, list[Action]] = {}

    def visit(i: int, node: Node, action: Action, outcome: Outcome) -> None:
        calls.setdefault(i, []).append(action)

    explored = explore(Setup(SPEC, form, policy, assumptions, properties=frozenset(),
                             liveness=False), bounds, visit=visit)
    tree = explored.tree
    if tree is None:  # pragma: no cover - explore always returns its tree
        raise RuntimeError("the exploration kept no tree")
    comparisons = 0

    def result(divergence: Divergence | None) -> RefinementResult:
        return RefinementResult("holds" if divergence is None else "violated",
                                explored.states, comparisons, time.perf_counter() - start,
                                divergence)

    for i in range(explored.states):
        trace = tree.trace(i)
        state, driven, driven_tickets, divergence = _lockstep(factory, bounds, policy, trace)
        comparisons += len(trace)
        if divergence is not None:
            return result(divergence)
        actions = calls.get(i, ())
        if not actions:
            continue
        copies = _copier(driven)  # a pickle of the manager: only for a node with calls
        before: object = _UNSEEN
        for action in actions:
            manager, tickets = copies(), dict(driven_tickets)
            if before is _UNSEEN:
                # every copy is made from the same pickle (or deep copy) of one manager:
                # their views before a call are the same, read on the first
                before = _view(manager)
            _, problem = compare(state, manager, action.call, tickets, before)
            comparisons += 1
            if problem is not None:
                return result(Divergence((*trace, action), problem))
    return result(None)
