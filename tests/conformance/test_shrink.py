"""The trace shrinker: same property, shorter trace, canonical keys, smallest tier."""

from __future__ import annotations

import pytest

from kvoffload.conformance import mutants
from kvoffload.conformance.config import CheckConfig
from kvoffload.conformance.errors import PropertyViolation
from kvoffload.conformance.lockstep import replay
from kvoffload.conformance.native import NativeAdapter
from kvoffload.conformance.shrink import shrink
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
    best = shrink(make, CheckConfig(capacity=4), found)
    assert best.prop == "lookup"
    assert best.trace == (Call(PS, ("a",)), Call(L, ("a",)))
    assert best.capacity == 1


def test_shrinking_keeps_the_property() -> None:
    calls = [Call(PS, ("a",)), Call(CS, ("a",), success=False)]
    with pytest.raises(PropertyViolation) as caught:
        replay(NativeAdapter(mutants.FailedStoreLeaksSlot(2)), CheckConfig(capacity=2), calls,
               drain=True)
    best = shrink(lambda c: NativeAdapter(mutants.FailedStoreLeaksSlot(c)),
                  CheckConfig(capacity=2), caught.value)
    assert best.prop == "liveness"
    assert best.in_drain
    assert best.trace[:best.generated] == tuple(calls)
