"""The spec's scenario vectors replay on the spec itself, invariants checked each step."""

from __future__ import annotations

import pytest

from kvoffload.spec import MisuseError, apply, check_invariants, initial_state
from kvoffload.spec.scenarios import SCENARIOS, Scenario


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_scenario(scenario: Scenario) -> None:
    state = initial_state(scenario.capacity, scenario.policy)
    for number, step in enumerate(scenario.steps, 1):
        if isinstance(step.expect, type) and issubclass(step.expect, MisuseError):
            with pytest.raises(step.expect):
                apply(state, step.call)
            continue
        state, output = apply(state, step.call)
        check_invariants(state)
        assert output == step.expect, f"step {number}: {step.call}"


def test_scenario_names_are_unique() -> None:
    names = [s.name for s in SCENARIOS]
    assert len(names) == len(set(names))
    assert names[0] == "pr41795"
