"""The spec run as a manager passes the suite; so do its freedom-only controls."""

from __future__ import annotations

import pytest
from spec_backed import HighestSlotFirst, NewestAllowedVictim, SpecBackedManager

from kvoffload.conformance import check

BUDGET = {"max_examples": 25, "steps": 80, "seed": 11}


@pytest.mark.parametrize(("manager", "policy"), [
    (SpecBackedManager, "lru"),
    (SpecBackedManager, "arc"),
    (HighestSlotFirst, "lru"),
    # [SpecBackedManager-arc] and [HighestSlotFirst-lru]: the free slots the judge takes
    # from a plan are checked alike under either policy
    pytest.param(HighestSlotFirst, "arc", marks=pytest.mark.wide),
], ids=lambda value: getattr(value, "__name__", value))
def test_the_spec_as_a_manager_conforms_at_the_exact_level(manager: type, policy: str) -> None:
    result = check(manager, policy=policy, level="exact", **BUDGET)  # type: ignore[arg-type]  # BUDGET: int fields only
    assert result.verdict == "conforms", result.violation


@pytest.mark.parametrize("policy", [
    "lru",
    # [lru], and test_selftest.py's ArcGhostHitToT1 controls and variants: another ARC
    # victim passes at --level any and fails eviction-choice at exact
    pytest.param("arc", marks=pytest.mark.wide),
])
def test_another_allowed_victim_passes_any_and_fails_exact(policy: str) -> None:
    assert check(NewestAllowedVictim, policy=policy, **BUDGET).verdict == "conforms"  # type: ignore[arg-type]  # BUDGET: int fields only
    # The first failure is all this checks: the rounds after it are not made.
    exact = check(NewestAllowedVictim, policy=policy, level="exact", stop_at_first=True,
                  **BUDGET)  # type: ignore[arg-type]  # BUDGET: int fields only
    assert exact.violation is not None
    assert exact.violation.prop == "eviction-choice"
