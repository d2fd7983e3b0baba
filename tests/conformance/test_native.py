"""The native adapter reads every answer strictly (hostile targets found on
3 December): keys of the exact type the suite sent, integers through
``operator.index``, the caller's list left alone, answers that stay as returned."""

from __future__ import annotations

from typing import Any

import pytest
from hostile_targets import (
    AnnouncesAgain,
    ClearsItsArgument,
    FloatSlots,
    LiarKeys,
    ListsAndSets,
    LyingResetEpoch,
    NarrowSlotIndex,
    NoEpoch,
    RemovesUnannounced,
    ReusesOneBuffer,
    WrongLoadEpoch,
    ZeroTickets,
)

from kvoffload.conformance.config import CheckConfig, Level
from kvoffload.conformance.runner import run_check
from kvoffload.spec import Policy

BUDGET = {"max_examples": 60, "steps": 60, "seed": 3}


def failed(target: type, **options: Any) -> list[str]:
    result = run_check(f"test:{target.__name__}", CheckConfig(**{**BUDGET, **options}),
                       obj=target)
    return sorted(v.prop for v in result.violations)


@pytest.mark.parametrize(("target", "prop"), [
    (LiarKeys, "store-plan"),
    (ZeroTickets, "tickets"),
    (FloatSlots, "slots"),
    (NoEpoch, "epochs"),
    (LyingResetEpoch, "epochs"),
    (WrongLoadEpoch, "epochs"),
    (ClearsItsArgument, "arguments"),
    (ReusesOneBuffer, "arguments"),
    (AnnouncesAgain, "events"),
    (RemovesUnannounced, "events"),
])
def test_a_hostile_answer_fails_its_property_and_no_other(target: type, prop: str) -> None:
    assert failed(target) == [prop]


def test_lists_in_fresh_answers_conform() -> None:
    assert failed(ListsAndSets) == []
    assert failed(ListsAndSets, level=Level.EXACT, policy=Policy.ARC) == []


def test_a_bug_past_the_small_tiers_is_met_on_a_wide_one() -> None:
    """Regression (fifth session of 3 December): every example drew a tier of 1..4
    slots, so a manager that goes wrong only past 8 slots conformed. One example in ten
    now draws a wider tier (up to ``--capacity``, 64 by default)."""
    assert failed(NarrowSlotIndex) == ["slots"]
    assert failed(NarrowSlotIndex, capacity=8) == []  # the bug needs more than 8 slots

