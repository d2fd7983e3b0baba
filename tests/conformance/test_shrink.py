"""The trace shrinker: same property, shorter trace, canonical keys, smallest tier."""

from __future__ import annotations

import pytest

from kvoffload.conformance.config import CheckConfig
from kvoffload.conformance.errors import PropertyViolation
from kvoffload.conformance.judge.lockstep import replay
from kvoffload.conformance.judge.shrink import _tiers, shrink
from kvoffload.conformance.selftest import mutants
from kvoffload.conformance.target.native import NativeAdapter
from kvoffload.spec import Call, Op

PS, CS, L, T, E = Op.PREPARE_STORE, Op.COMPLETE_STORE, Op.LOOKUP, Op.TOUCH, Op.TAKE_EVENTS


def make(capacity: int) -> NativeAdapter:
    return NativeAdapter(mutants.LookupPendingAsMiss(capacity))


def violation_of(calls: list[Call], capacity: int) -> PropertyViolation:
    with pytest.raises(PropertyViolation) as caught:
        replay(make(capacity), CheckConfig(capacity=capacity), calls)
    return caught.value


def test_a_long_trace_shrinks_to_store_then_lookup() -> None:
    noise = [Call(PS, ("x", "y")), Call(CS, ("x", "y")), Call(T, ("y", "x")), Call(E),
             Call(L, ("x",)), Call(CS, ("zz",), success=False)]
    found = violation_of([*noise, Call(PS, ("q", "r")), *noise[2:5], Call(L, ("r",))], 4)
    assert found.prop == "lookup"
    assert len(found.trace) == 11
    best = shrink(make, CheckConfig(capacity=4), found).violation
    assert best.prop == "lookup"
    assert best.trace == (Call(PS, ("a",)), Call(L, ("a",)))
    assert best.capacity == 1


def test_shrinking_keeps_the_property() -> None:
    calls = [Call(PS, ("a",)), Call(CS, ("a",), success=False)]
    with pytest.raises(PropertyViolation) as caught:
        replay(NativeAdapter(mutants.FailedStoreLeaksSlot(2)), CheckConfig(capacity=2), calls,
               drain=True)
    best = shrink(lambda c: NativeAdapter(mutants.FailedStoreLeaksSlot(c)),
                  CheckConfig(capacity=2), caught.value).violation
    assert best.prop == "liveness"
    assert best.in_drain
    assert best.trace[:best.generated] == tuple(calls)


def test_a_wide_tier_trace_with_many_keys_shrinks_to_one_slot() -> None:
    """Regression (fifth session of 3 December): a failure first met on a wide tier,
    with calls naming dozens of keys, stayed on its tier when the budget ran out (every
    candidate was replayed on every smaller tier, keys dropped one at a time)."""
    keys = tuple(f"k{i}" for i in range(40))
    found = violation_of([Call(PS, keys), Call(L, (keys[17],))], 64)
    assert found.capacity == 64
    replays = []

    def counted(capacity: int) -> NativeAdapter:
        replays.append(capacity)
        return make(capacity)

    best = shrink(counted, CheckConfig(capacity=64), found).violation
    assert best.trace == (Call(PS, ("a",)), Call(L, ("a",)))
    assert best.capacity == 1
    assert len(replays) < 300  # 101; 23,320 before (every tier, one key at a time)


def test_candidates_try_small_tiers_then_a_ladder() -> None:
    assert _tiers(1) == [1]
    assert _tiers(4) == [1, 2, 3, 4]
    assert _tiers(21) == [1, 2, 3, 4, 5, 7, 9, 12, 16, 21]
    ladder = _tiers(1024)
    assert ladder[-1] == 1024
    assert len(ladder) < 25
    assert ladder == sorted(set(ladder))


def test_a_candidate_is_replayed_once_per_tier(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each pass starts again from the best trace and proposes candidates tried before;
    their outcome is kept (a hanging target's replays each cost a timeout and a host)."""
    from kvoffload.conformance import shrink as shrinking

    noise = [Call(PS, ("x", "y")), Call(CS, ("x", "y")), Call(T, ("y", "x")), Call(E)]
    found = violation_of([*noise, Call(PS, ("q",)), Call(L, ("q",))], 4)
    seen: list[tuple[tuple[Call, ...], int]] = []
    real = shrinking.attempt

    def counted(make_adapter, config, calls, drain, silenced=frozenset()):  # type: ignore[no-untyped-def]  # the real attempt's signature
        seen.append((tuple(calls), config.capacity))
        return real(make_adapter, config, calls, drain, silenced)

    monkeypatch.setattr(shrinking, "attempt", counted)
    best = shrink(make, CheckConfig(capacity=4), found).violation
    assert best.trace == (Call(PS, ("a",)), Call(L, ("a",)))
    assert seen
    assert len(seen) == len(set(seen))


class _SlowClock:
    """A machine on which every replay takes ``per_replay`` seconds: the shrinker's
    clock (``shrink.time``) reads a time that only replays move."""

    def __init__(self, per_replay: float) -> None:
        self.now = 0.0
        self.per_replay = per_replay

    def perf_counter(self) -> float:
        return self.now


def _on_a_slow_machine(monkeypatch: pytest.MonkeyPatch, per_replay: float) -> list[int]:
    from kvoffload.conformance.judge import shrink as shrinking

    clock = _SlowClock(per_replay)
    replays: list[int] = []
    real = shrinking.attempt

    def slow(make_adapter, config, calls, drain, silenced=frozenset()):  # type: ignore[no-untyped-def]  # the real attempt's signature
        clock.now += clock.per_replay
        replays.append(config.capacity)
        return real(make_adapter, config, calls, drain, silenced)

    monkeypatch.setattr(shrinking, "time", clock)
    monkeypatch.setattr(shrinking, "attempt", slow)
    return replays


def test_a_slower_machine_shrinks_to_the_same_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (session 37): the shrinker stopped at 20 s of wall time, so the same
    seed gave a longer trace on a loaded machine (the self-test's ArcNoAdaptation on 9
    slots instead of 7). Its budget is a count of replays; the clock is only a safety
    net. Here each of the 101 replays takes 0.25 s (25 s in all)."""
    keys = tuple(f"k{i}" for i in range(40))
    found = violation_of([Call(PS, keys), Call(L, (keys[17],))], 64)
    replays = _on_a_slow_machine(monkeypatch, 0.25)
    shrunk = shrink(make, CheckConfig(capacity=64), found)
    assert shrunk.violation.trace == (Call(PS, ("a",)), Call(L, ("a",)))
    assert shrunk.violation.capacity == 1
    assert shrunk.stopped is None
    assert shrunk.replays == len(replays)


def test_a_shrink_cut_by_the_clock_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """The safety net (a replay that hangs until its timeout, a very slow target): the
    shrink ends at the clock and says so, with the best trace it had."""
    keys = tuple(f"k{i}" for i in range(40))
    found = violation_of([Call(PS, keys), Call(L, (keys[17],))], 64)
    replays = _on_a_slow_machine(monkeypatch, 10.0)
    shrunk = shrink(make, CheckConfig(capacity=64), found, budget_s=95.0)
    assert shrunk.stopped == "time"
    assert len(replays) == 10
    assert shrunk.violation.prop == "lookup"
    assert len(shrunk.violation.trace) <= len(found.trace)


def test_a_shrink_cut_by_its_replays_is_the_same_on_any_machine(
        monkeypatch: pytest.MonkeyPatch) -> None:
    keys = tuple(f"k{i}" for i in range(40))
    found = violation_of([Call(PS, keys), Call(L, (keys[17],))], 64)
    fast = shrink(make, CheckConfig(capacity=64), found, max_replays=30)
    replays = _on_a_slow_machine(monkeypatch, 0.5)
    slow = shrink(make, CheckConfig(capacity=64), found, max_replays=30)
    assert fast.stopped == slow.stopped == "replays"
    assert len(replays) == fast.replays == slow.replays == 30
    assert fast.violation.trace == slow.violation.trace
    assert fast.violation.capacity == slow.violation.capacity
