"""The lockstep driver names the right property for each kind of divergence.

Each case is a buggy target and the shortest trace that shows its bug; the driver
must raise PropertyViolation naming that property (and nothing on the reference).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import pytest
from spec_backed import SpecBackedManager

from kvoffload.conformance.adapter_api import RETRY, Reported
from kvoffload.conformance.config import CheckConfig, Level, Profile
from kvoffload.conformance.errors import PropertyViolation
from kvoffload.conformance.judge.lockstep import Lockstep, lookup_agrees, replay
from kvoffload.conformance.selftest import mutants
from kvoffload.conformance.target.native import NativeAdapter
from kvoffload.impl import OffloadManager
from kvoffload.spec import (
    Call,
    Completion,
    Events,
    Key,
    LoadPlan,
    LookupResult,
    NotReadable,
    Op,
    Policy,
    StorePlan,
    StoreRejected,
)
from kvoffload.spec.calls import send
from kvoffload.spec.scenarios import SCENARIOS, Scenario

MISS, PENDING, HIT = LookupResult.MISS, LookupResult.PENDING, LookupResult.HIT
PS, CS, L = Op.PREPARE_STORE, Op.COMPLETE_STORE, Op.LOOKUP
PL, CL = Op.PREPARE_LOAD, Op.COMPLETE_LOAD
T, R, E = Op.TOUCH, Op.RESET_CACHE, Op.TAKE_EVENTS


def c(op: Op, *keys: Key, **kw: object) -> Call:
    return Call(op, keys, **kw)  # type: ignore[arg-type]  # test shorthand; Call checks its fields


# --- small buggy targets for properties the catalogue does not isolate ------------


class KeysTwiceInPlan(OffloadManager):
    """vLLM's duplicate-key plan: the repeated key is stored twice."""

    def prepare_store(self, keys: Iterable[Key]) -> StorePlan | StoreRejected:
        keys = list(keys)
        plan = super().prepare_store(keys)
        if isinstance(plan, StorePlan) and len(keys) > len(set(keys)):
            return replace(plan, keys=plan.keys * 2, slots=plan.slots * 2)
        return plan


class SlotOutOfRange(OffloadManager):
    def prepare_store(self, keys: Iterable[Key]) -> StorePlan | StoreRejected:
        plan = super().prepare_store(keys)
        if isinstance(plan, StorePlan):
            return replace(plan, slots=tuple(s + self.capacity for s in plan.slots))
        return plan


class SlotShared(OffloadManager):
    def prepare_store(self, keys: Iterable[Key]) -> StorePlan | StoreRejected:
        plan = super().prepare_store(keys)
        if isinstance(plan, StorePlan) and plan.slots:
            return replace(plan, slots=(plan.slots[0],) * len(plan.slots))
        return plan


class LoadReadsOtherSlot(OffloadManager):
    def prepare_load(self, keys: Iterable[Key]) -> LoadPlan:
        plan = super().prepare_load(keys)
        return replace(plan, slots=tuple((s + 1) % self.capacity for s in plan.slots))


class LoadKeysReordered(OffloadManager):
    def prepare_load(self, keys: Iterable[Key]) -> LoadPlan:
        plan = super().prepare_load(keys)
        return replace(plan, keys=plan.keys[::-1], slots=plan.slots[::-1])


class ResetSkipsEpoch(OffloadManager):
    def reset_cache(self) -> int:
        return super().reset_cache() + 1


class WrongMisuseError(OffloadManager):
    def complete_load(self, keys: Iterable[Key], ticket: int | None = None) -> Completion:
        keys = list(keys)
        if any(k not in self._readers for k in keys):
            raise NotReadable("wrong error type", keys=tuple(keys))
        return super().complete_load(keys, ticket)


class RejectsAfterPublishing(OffloadManager):
    """Marks an in-flight block READY, then rejects the load: the rejection is not clean."""

    def prepare_load(self, keys: Iterable[Key]) -> LoadPlan:
        keys = list(keys)
        for key in keys:
            if key in self._storing:
                self._ready[key] = self._storing.pop(key)
                self._evictable[key] = None  # unpinned READY: evictable
                raise NotReadable("too late", keys=(key,))
        return super().prepare_load(keys)


class ReusesTickets(OffloadManager):
    """Names every store plan's job 7: a second job cannot be told apart."""

    def prepare_store(self, keys: Iterable[Key]) -> StorePlan | StoreRejected:
        plan = super().prepare_store(keys)
        return replace(plan, ticket=7) if isinstance(plan, StorePlan) else plan


class TouchCrashes(OffloadManager):
    def touch(self, keys: Iterable[Key]) -> None:
        raise RuntimeError("touch is broken")


class ReturnsBoolLookup(OffloadManager):
    def lookup(self, key: Key) -> LookupResult:
        return super().lookup(key) is HIT  # type: ignore[return-value]  # the bug under test: a bool


class TwoWayEvents(OffloadManager):
    def take_events(self) -> Events:
        events = super().take_events()
        return Events(events.stored | events.removed, events.removed | events.stored)


CASES = [
    ("lookup", mutants.LookupPendingAsMiss, {}, [c(PS, "a"), c(L, "a")]),
    ("lookup", ReturnsBoolLookup, {}, [c(L, "a")]),
    ("store-plan", KeysTwiceInPlan, {}, [c(PS, "a", "a")]),
    ("rejection", mutants.EvictsStoringBlock, {"capacity": 1}, [c(PS, "a"), c(PS, "b")]),
    ("rejection", mutants.ArcRejectsWithEvictable, {"capacity": 2, "policy": Policy.ARC},
     [c(PS, "a", "b"), c(CS, "a", "b"), c(T, "a"), c(PS, "c"), c(CS, "c"), c(PL, "a"),
      c(PS, "b")]),
    ("eviction-choice", mutants.EvictsPinnedBlock, {"capacity": 2},
     [c(PS, "a", "b"), c(CS, "a", "b"), c(PL, "a"), c(T, "b"), c(PS, "c")]),
    ("eviction-choice", mutants.EvictsMoreThanNeeded, {"capacity": 2},
     [c(PS, "a", "b"), c(CS, "a", "b"), c(PS, "c")]),
    ("eviction-choice", mutants.TouchIgnored, {"capacity": 2, "level": Level.EXACT},
     [c(PS, "a", "b"), c(CS, "a", "b"), c(T, "a"), c(PS, "c")]),
    ("eviction-choice", mutants.TouchForwardOrder, {"capacity": 2, "level": Level.EXACT},
     [c(PS, "a", "b"), c(CS, "a", "b"), c(T, "a", "b"), c(PS, "c")]),
    ("slots", SlotOutOfRange, {}, [c(PS, "a")]),
    ("slots", SlotShared, {}, [c(PS, "a", "b")]),
    ("slots", LoadReadsOtherSlot, {"capacity": 2}, [c(PS, "a"), c(CS, "a"), c(PL, "a")]),
    ("slots", mutants.ResetFreesRunningSlots, {"capacity": 2},
     [c(PS, "a"), c(R), c(PS, "b")]),
    ("load-plan", LoadKeysReordered, {}, [c(PS, "a", "b"), c(CS, "a", "b"), c(PL, "a", "b")]),
    ("completion", mutants.StaleCompletionMarksReady, {"capacity": 2},
     [c(PS, "a"), c(R), c(PS, "a"), c(CS, "a", ticket=0)]),
    ("completion", mutants.IgnoresTicket, {"capacity": 2},
     [c(PS, "a"), c(CS, "a", success=False), c(PS, "a"), c(CS, "a", ticket=0)]),
    ("tickets", ReusesTickets, {}, [c(PS, "a"), c(PS, "b")]),
    ("epochs", ResetSkipsEpoch, {}, [c(R)]),
    ("events", mutants.MissingRemovalEvent, {"capacity": 1},
     [c(PS, "a"), c(CS, "a"), c(E), c(PS, "b"), c(E)]),
    ("events", mutants.AnnouncesBeforeReady, {}, [c(PS, "a"), c(E)]),
    ("events", TwoWayEvents, {}, [c(PS, "a"), c(CS, "a"), c(E)]),
    ("misuse", mutants.UnmatchedCompleteLoadAccepted, {},
     [c(PS, "a"), c(CS, "a"), c(CL, "a")]),
    ("misuse", WrongMisuseError, {}, [c(CL, "a")]),
    ("misuse", RejectsAfterPublishing, {}, [c(PS, "a"), c(PL, "a")]),
    ("crash", TouchCrashes, {}, [c(T, "a")]),
]


over_cases = pytest.mark.parametrize(("prop", "cls", "options", "calls"), CASES,
                                     ids=[f"{p}-{k.__name__}" for p, k, _, _ in CASES])


@over_cases
def test_the_divergence_names_its_property(
    prop: str, cls: type, options: dict[str, object], calls: list[Call]
) -> None:
    config = CheckConfig(**options)  # type: ignore[arg-type]  # options: CheckConfig fields
    with pytest.raises(PropertyViolation) as caught:
        replay(NativeAdapter(cls(config.capacity, policy=config.policy.value)), config, calls)
    violation = caught.value
    assert violation.prop == prop, str(violation)
    assert violation.step == len(calls)
    assert violation.trace == tuple(calls)
    assert violation.rows, "a violation carries the spec-versus-target table"
    assert not isinstance(violation, AssertionError)


@over_cases
def test_the_reference_passes_every_case_trace(
    prop: str, cls: type, options: dict[str, object], calls: list[Call]
) -> None:
    config = CheckConfig(**options)  # type: ignore[arg-type]  # options: CheckConfig fields
    replay(NativeAdapter(OffloadManager(config.capacity, policy=config.policy.value)), config,
           calls, drain=True)


def test_a_leak_shows_in_the_final_drain_as_liveness() -> None:
    config = CheckConfig(capacity=1)
    calls = [c(PS, "a"), c(CS, "a", success=False)]
    with pytest.raises(PropertyViolation) as caught:
        replay(NativeAdapter(mutants.FailedStoreLeaksSlot(1)), config, calls, drain=True)
    assert caught.value.prop == "liveness"
    assert caught.value.in_drain
    assert caught.value.trace[:2] == tuple(calls)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
@pytest.mark.parametrize("manager", [OffloadManager, SpecBackedManager])
def test_the_spec_scenarios_replay_in_lockstep(scenario: Scenario, manager: type) -> None:
    config = CheckConfig(capacity=scenario.capacity, policy=scenario.policy,
                         level=Level.EXACT)
    calls = [step.call for step in scenario.steps]
    adapter = NativeAdapter(manager(config.capacity, policy=config.policy.value))
    replay(adapter, config, calls, drain=True)


@pytest.mark.parametrize(("profile", "spec", "got", "agrees"), [
    (Profile.STRICT, PENDING, PENDING, True),
    (Profile.STRICT, PENDING, RETRY, True),
    (Profile.STRICT, PENDING, MISS, False),
    (Profile.STRICT, PENDING, HIT, False),
    (Profile.STRICT, MISS, RETRY, False),
    (Profile.STRICT, HIT, RETRY, False),
    (Profile.SAFE, PENDING, MISS, True),
    (Profile.SAFE, PENDING, RETRY, True),
    (Profile.SAFE, PENDING, HIT, False),
    (Profile.SAFE, MISS, HIT, False),
    (Profile.SAFE, HIT, MISS, False),
    (Profile.SAFE, HIT, RETRY, False),
])
def test_lookup_profiles(profile: Profile, spec: LookupResult, got: Reported,
                         agrees: bool) -> None:
    assert lookup_agrees(profile, spec, got) is agrees


# --- a host's adapter: calls sent without waiting, answers read later (issue 22) ---------


class Deferring:
    """A NativeAdapter behind the interface of a host's adapter (post, flush, collect),
    in process: each call is made when posted, its answer handed out at collect. Records
    the order, so a test can count round trips (a collect after a flush waits for the
    host)."""

    times_itself = True

    def __init__(self, manager: OffloadManager) -> None:
        self.inner = NativeAdapter(manager)
        self.log: list[str] = []
        self.answers: list[tuple[object, BaseException | None]] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def post(self, call: Call, now: bool = True) -> None:
        self.log.append(f"post {call.op.value}")
        try:
            self.answers.append((send(self.inner, call), None))
        except Exception as error:  # the target's answer
            self.answers.append((None, error))

    def flush(self) -> None:
        self.log.append("flush")

    def collect(self, op: Op) -> object:
        self.log.append("collect")
        value, error = self.answers.pop(0)
        if error is not None:
            raise error
        return value


def _waits(log: list[str]) -> int:
    """Round trips: the times the judge reads an answer after sending something new."""
    waits, sent = 0, False
    for entry in log:
        if entry.startswith("post"):
            sent = True
        elif entry == "collect" and sent:
            waits, sent = waits + 1, False
    return waits


def test_a_store_goes_with_the_calls_pending_in_one_round_trip() -> None:
    adapter = Deferring(OffloadManager(2))
    run = Lockstep(adapter, CheckConfig(capacity=2))  # type: ignore[arg-type]  # a host's adapter, in process
    for call in [c(PS, "a"), c(L, "a"), c(T, "a"), c(CS, "a", ticket=0), c(PS, "b")]:
        run.step(call)
    run.settle()
    assert _waits(adapter.log) == 2  # the first store; the three calls with the second
    assert adapter.log == ["post prepare_store", "collect",
                           "post lookup", "post touch", "post complete_store",
                           "post prepare_store", "collect", "collect", "collect", "collect"]


def test_a_rejected_call_and_its_probes_wait_for_no_answer() -> None:
    adapter = Deferring(OffloadManager(2))
    run = Lockstep(adapter, CheckConfig(capacity=2))  # type: ignore[arg-type]  # a host's adapter, in process
    for call in [c(PS, "a"), c(L, "a"), c(PL, "a")]:  # a is still being stored: misuse
        run.step(call)
    assert adapter.log == ["post prepare_store", "collect", "post lookup",
                           "post lookup", "post prepare_load", "post lookup"]
    run.settle()
    assert adapter.log[-4:] == ["collect"] * 4
    assert _waits(adapter.log) == 2


class AcceptsALoadOfABlockBeingStored(OffloadManager):
    """Answers a load of a key still being stored with a plan (the spec rejects it)."""

    def prepare_load(self, keys: Iterable[Key]) -> LoadPlan:
        try:
            return super().prepare_load(keys)
        except NotReadable:
            return LoadPlan(keys=tuple(keys), slots=(0,), epoch=0, ticket=98)


def test_a_misuse_accepted_is_reported_at_its_own_call_when_judged_later() -> None:
    adapter = Deferring(AcceptsALoadOfABlockBeingStored(2))
    run = Lockstep(adapter, CheckConfig(capacity=2))  # type: ignore[arg-type]  # a host's adapter, in process
    trace = [c(PS, "a"), c(PL, "a")]
    for call in trace:
        run.step(call)
    with pytest.raises(PropertyViolation) as raised:
        run.step(c(PS, "b"))  # the store waits: the rejection is judged first
    assert raised.value.prop == "misuse"
    assert raised.value.trace == tuple(trace)


def test_a_wrong_answer_pending_before_a_store_is_reported_at_its_own_call() -> None:
    adapter = Deferring(mutants.LookupPendingAsMiss(2))
    run = Lockstep(adapter, CheckConfig(capacity=2))  # type: ignore[arg-type]  # a host's adapter, in process
    run.step(c(PS, "a"))
    run.step(c(L, "a"))  # MISS for a block being stored: compared at the next store
    with pytest.raises(PropertyViolation) as raised:
        run.step(c(PS, "b"))
    assert raised.value.prop == "lookup"
    assert raised.value.trace == (c(PS, "a"), c(L, "a"))


def test_a_store_the_spec_rejects_waits_for_no_answer() -> None:
    adapter = Deferring(OffloadManager(1))
    run = Lockstep(adapter, CheckConfig(capacity=1))  # type: ignore[arg-type]  # a host's adapter, in process
    for call in [c(PS, "a"), c(PS, "b")]:  # b cannot fit while a is being stored
        run.step(call)
    assert adapter.log == ["post prepare_store", "collect", "post prepare_store"]
    run.settle()
    assert adapter.log[-1] == "collect"


class AcceptsWhenFull(OffloadManager):
    """Accepts a store that cannot fit (a plan into slot 0, evicting nothing)."""

    def prepare_store(self, keys: Iterable[Key]) -> StorePlan | StoreRejected:
        keys = list(keys)
        plan = super().prepare_store(keys)
        if isinstance(plan, StoreRejected):
            return StorePlan(keys=tuple(keys), slots=(0,) * len(keys), evicted=(), epoch=0,
                             ticket=99)
        return plan


def test_a_store_accepted_that_the_spec_rejects_is_reported_at_its_own_call() -> None:
    adapter = Deferring(AcceptsWhenFull(1))
    run = Lockstep(adapter, CheckConfig(capacity=1))  # type: ignore[arg-type]  # a host's adapter, in process
    trace = [c(PS, "a"), c(PS, "b")]  # b cannot fit while a is being stored
    for call in trace:
        run.step(call)
    run.step(c(L, "a"))
    with pytest.raises(PropertyViolation) as raised:
        run.settle()
    assert raised.value.prop == "rejection"
    assert raised.value.trace == tuple(trace)
