"""Every scenario vector of the spec replays on ``OffloadManager`` with the same outputs."""

from __future__ import annotations

import pytest

from kvoffload.impl import OffloadManager
from kvoffload.spec import MisuseError
from kvoffload.spec.calls import send
from kvoffload.spec.scenarios import SCENARIOS, Scenario


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_scenario_on_manager(scenario: Scenario) -> None:
    manager = OffloadManager(scenario.capacity, policy=scenario.policy)
    for number, step in enumerate(scenario.steps, 1):
        if isinstance(step.expect, type) and issubclass(step.expect, MisuseError):
            before = manager.view()
            with pytest.raises(step.expect):
                send(manager, step.call)
            assert manager.view() == before, f"step {number}: {step.call} changed the state"
            continue
        output = send(manager, step.call)
        manager.check()
        assert output == step.expect, f"step {number}: {step.call}"


def test_every_scenario_is_replayed() -> None:
    # the parametrisation above covers them all, misuse steps included
    assert any(isinstance(s.expect, type) for sc in SCENARIOS for s in sc.steps)
    assert {sc.policy.value for sc in SCENARIOS} == {"lru", "arc"}
