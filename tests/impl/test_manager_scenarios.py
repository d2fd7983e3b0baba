"""Every scenario vector of the spec replays on ``OffloadManager`` with the same outputs."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kvoffload.impl import OffloadManager
from kvoffload.impl.arc import ArcEviction
from kvoffload.spec import Key, MisuseError, StorePlan
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


class _KeepsPOnReset(ArcEviction):
    def cleared(self) -> None:
        p = self.p
        super().cleared()
        self.p = p


class _KeepsGhostsOnReset(ArcEviction):
    def cleared(self) -> None:
        b1, b2 = dict(self.b1), dict(self.b2)
        super().cleared()
        self.b1.update(b1)
        self.b2.update(b2)


class _FailedStoreLeavesGhost(ArcEviction):
    def removed(self, keys: Sequence[Key]) -> None:
        super().removed(keys)
        for key in keys:
            self.b1[key] = None


@pytest.mark.parametrize(("name", "order", "step"), [
    ("arc-reset-forgets-p", _KeepsPOnReset, 12),
    ("arc-reset-forgets-ghosts", _KeepsGhostsOnReset, 11),
    ("arc-failed-store-leaves-no-ghost", _FailedStoreLeavesGhost, 8),
])
def test_each_arc_bug_of_its_scenario_gives_another_victim(
        name: str, order: type[ArcEviction], step: int) -> None:
    """Regression (session 41, a corpus replayer written from docs/corpus.md alone): no
    case of the corpus told an ARC that keeps p or its ghosts across a reset, or makes a
    ghost of a failed store, from the spec's. Each scenario now does, at its last step,
    with the victim only: every other answer is the same."""
    scenario = next(s for s in SCENARIOS if s.name == name)
    manager = OffloadManager(scenario.capacity, policy=scenario.policy)
    manager._order = order(scenario.capacity)  # the manager's own ARC, one rule broken
    differs = []
    for number, expected in enumerate(scenario.steps, 1):
        output = send(manager, expected.call)
        if output != expected.expect:
            differs.append(number)
            assert isinstance(output, StorePlan)
            assert isinstance(expected.expect, StorePlan)
            assert output.evicted != expected.expect.evicted
    assert differs == [step] == [len(scenario.steps)]
