"""The stateful machine: what it generates, under each assumption and capability."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from kvoffload.conformance.command.runner import run_check
from kvoffload.conformance.config import CheckConfig
from kvoffload.conformance.judge.lockstep import Lockstep, assumed_away
from kvoffload.impl import OffloadManager
from kvoffload.spec import (
    API_OPS,
    ASSUMPTIONS,
    COMPLETIONS,
    CacheState,
    Call,
    Key,
    MisuseError,
    Op,
    apply,
)

BUDGET = {"max_examples": 10, "steps": 60, "seed": 7}
"""Enough for every kind of call (5 examples are, at this seed), and for calls each
assumption excludes: :func:`test_without_assumptions_every_kind_of_call_is_generated`
shows both, so a run under an assumption that makes none of those calls shows the
assumption at work."""


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[tuple[CacheState, Call]]:
    """Every call the machine makes, with the spec's state just before it. The target
    runs in process: the judge's calls are the subject, not the host (a host costs a
    Python start per run)."""
    monkeypatch.setenv("KVOFFLOAD_IN_PROCESS", "1")
    calls: list[tuple[CacheState, Call]] = []
    step = Lockstep.step

    def recording(self: Lockstep, call: Call) -> object:
        calls.append((self.state, call))
        return step(self, call)

    monkeypatch.setattr(Lockstep, "step", recording)
    return calls


def is_misuse(state: CacheState, call: Call) -> bool:
    try:
        apply(state, call)
    except MisuseError:
        return True
    return False


def running(state: CacheState) -> set[int]:
    """The tickets of the jobs running on live blocks."""
    return {b.ticket for b in state.blocks if b.ticket is not None} | {
        t for b in state.blocks for t in b.loads}


def kinds(calls: list[tuple[CacheState, Call]]) -> set[str]:
    found = {call.op.value for _, call in calls}
    for state, call in calls:
        if len(set(call.keys)) < len(call.keys):
            found.add("duplicate keys")
        if is_misuse(state, call):
            found.add("misuse")
        job = call.job_ticket
        if call.op in COMPLETIONS and job is not None and job not in running(state):
            late = ("pre-reset completion" if job in {t for o in state.orphans
                                                      for t in o.tickets}
                    else "finished-job completion")
            found.add("stale completion")
            found.add(f"{late} {'with' if call.ticket is not None else 'without'} ticket")
        if call.op is Op.RESET_CACHE and state.in_flight():
            found.add("reset in flight")
        if call.op is Op.COMPLETE_STORE and not call.success:
            found.add("failed store")
    return found


def test_without_assumptions_every_kind_of_call_is_generated(
    seen: list[tuple[CacheState, Call]],
) -> None:
    result = run_check("kvoffload.impl:OffloadManager", CheckConfig(**BUDGET))  # type: ignore[arg-type]  # BUDGET: int fields only
    assert result.verdict == "conforms"
    assert kinds(seen) >= {op.value for op in API_OPS} | {
        "duplicate keys", "misuse", "reset in flight", "failed store",
        "pre-reset completion with ticket", "pre-reset completion without ticket",
        "finished-job completion with ticket", "finished-job completion without ticket"}
    excluded = {name: [call for state, call in seen if assumption.excludes(state, call)]
                for name, assumption in ASSUMPTIONS.items()}
    assert all(excluded.values()), [name for name, calls in excluded.items() if not calls]
    # The generator's reading of each assumption (no-misuse through the lockstep's kept
    # transition) rules out what the spec's does, on every call of the run.
    for name, assumption in ASSUMPTIONS.items():
        assert [call for state, call in seen
                if assumed_away(state, call, (assumption,))] == excluded[name], name


@pytest.mark.parametrize("name", sorted(ASSUMPTIONS))
def test_an_assumption_stops_the_calls_it_excludes(
    name: str, seen: list[tuple[CacheState, Call]]
) -> None:
    result = run_check("kvoffload.impl:OffloadManager",
                       CheckConfig(assume=(name,), **BUDGET))  # type: ignore[arg-type]  # BUDGET: int fields only
    assert result.verdict == "conforms"
    assert seen
    assumption = ASSUMPTIONS[name]
    assert not [call for state, call in seen if assumption.excludes(state, call)]


def test_all_four_assumptions_together(seen: list[tuple[CacheState, Call]]) -> None:
    config = CheckConfig(assume=tuple(ASSUMPTIONS), **BUDGET)  # type: ignore[arg-type]  # BUDGET: int fields only
    assert run_check("kvoffload.impl:OffloadManager", config).verdict == "conforms"
    assert not kinds(seen) & {"duplicate keys", "misuse", "stale completion",
                              "reset in flight"}
    assert "failed store" in kinds(seen)


class NoTouchNoReset:
    """A native manager without touch and reset_cache (both optional)."""

    def __init__(self, capacity: int, policy: str = "lru") -> None:
        self.inner = OffloadManager(capacity, policy)

    def lookup(self, key: Key) -> object:
        return self.inner.lookup(key)

    def prepare_load(self, keys: Iterable[Key]) -> object:
        return self.inner.prepare_load(keys)

    def complete_load(self, keys: Iterable[Key], ticket: int | None = None) -> object:
        return self.inner.complete_load(keys, ticket)

    def prepare_store(self, keys: Iterable[Key]) -> object:
        return self.inner.prepare_store(keys)

    def complete_store(self, keys: Iterable[Key], success: bool = True,
                       ticket: int | None = None) -> object:
        return self.inner.complete_store(keys, success, ticket)

    def take_events(self) -> object:
        return self.inner.take_events()


def test_calls_the_target_lacks_are_never_generated(
    seen: list[tuple[CacheState, Call]],
) -> None:
    result = run_check("test:NoTouchNoReset", CheckConfig(**BUDGET), obj=NoTouchNoReset)  # type: ignore[arg-type]  # BUDGET: int fields only
    assert result.verdict == "conforms", result.violation
    ops = {call.op for _, call in seen}
    assert Op.TOUCH not in ops
    assert Op.RESET_CACHE not in ops
    assert not [k for k in kinds(seen) if k.startswith("pre-reset")]  # no reset, no orphan
    assert result.alphabet["touch"].startswith("not generated")


def test_every_example_gets_a_fresh_target() -> None:
    built: list[OffloadManager] = []

    def factory(capacity: int, policy: str = "lru") -> OffloadManager:
        built.append(OffloadManager(capacity, policy))
        return built[-1]

    result = run_check("test:factory", CheckConfig(**BUDGET), obj=factory)  # type: ignore[arg-type]  # BUDGET: int fields only
    assert result.verdict == "conforms"
    assert len({id(m) for m in built}) == len(built) >= result.examples


def test_examples_use_tiers_from_one_slot_to_the_capacity() -> None:
    capacities: set[int] = set()

    def factory(capacity: int, policy: str = "lru") -> OffloadManager:
        capacities.add(capacity)
        return OffloadManager(capacity, policy)

    run_check("test:factory", CheckConfig(capacity=3, **BUDGET), obj=factory)  # type: ignore[arg-type]  # BUDGET: int fields only
    assert capacities == {1, 2, 3}


def test_a_burst_picks_each_operation_as_random_choices_does() -> None:
    """The generator draws each call's operation itself (bisecting one ``random()`` into
    the cumulative weights) for speed: the same operation ``rng.choices`` gives, so a
    seed makes the calls it made before, on this Python as on any other."""
    import random

    from kvoffload.conformance.adapter_api import Capabilities
    from kvoffload.conformance.judge.generator import BURST, CallGenerator, Rules
    from kvoffload.spec import Policy, initial_state

    class Spec:
        state = initial_state(4, Policy.LRU)

        def make(self, call: Call) -> object:
            return None

    for mix in range(20):
        calls = CallGenerator(Rules.of(CheckConfig(), Capabilities()), Spec())
        calls.begin(4, mix)
        picked: list[str] = []
        for name, _, _ in calls.enabled:  # each operation only says it was picked
            setattr(calls, name, lambda rng, name=name, picked=picked: picked.append(name))
        expected: list[str] = []
        for x in range(50):
            calls.burst(x)
            rng = random.Random(x)
            names, cumulative, _ = calls._choices()
            expected += [rng.choices(names, cum_weights=cumulative)[0] for _ in range(BURST)]
        assert picked == expected, mix
