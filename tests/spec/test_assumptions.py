"""The environment assumptions say what they exclude, and only that."""

from __future__ import annotations

import contextlib

import pytest

from kvoffload.spec import (
    ASSUMPTIONS,
    NO_MISUSE,
    NO_RESET_IN_FLIGHT,
    NO_STALE_COMPLETIONS,
    UNIQUE_KEYS,
    Call,
    MisuseError,
    Op,
    apply,
    excluded_by,
    initial_state,
)
from kvoffload.spec.scenarios import SCENARIOS, Scenario

STALE_STEPS = {  # scenario -> the 1-based steps no-stale-completions excludes
    "stale-completion": {4, 6},
    "stale-completion-vllm-form": {4},
    "late-failure-report": {4},
    "late-failure-report-vllm-form": {4},
    "late-success-report": {6},
    "late-success-report-vllm-form": {6},
    "stale-load-report": {8, 9},
    "stale-load-report-vllm-form": {8},
    "reset-holds-slots": {5},
    "misuse": {5},
}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_no_stale_completions_excludes_exactly_the_completions_of_no_running_job(
    scenario: Scenario,
) -> None:
    state = initial_state(scenario.capacity, scenario.policy)
    excluded: set[int] = set()
    for number, step in enumerate(scenario.steps, 1):
        if NO_STALE_COMPLETIONS.excludes(state, step.call):
            excluded.add(number)
        with contextlib.suppress(MisuseError):
            state, _ = apply(state, step.call)
    assert excluded == STALE_STEPS.get(scenario.name, set())


def test_a_completion_naming_its_running_job_is_not_stale() -> None:
    state, _ = apply(initial_state(2), Call(Op.PREPARE_STORE, ("a", "b")))
    assert not NO_STALE_COMPLETIONS.excludes(state, Call(Op.COMPLETE_STORE, ("a", "b"), ticket=0))
    assert not NO_STALE_COMPLETIONS.excludes(state, Call(Op.COMPLETE_STORE, ("zz",)))
    assert NO_STALE_COMPLETIONS.excludes(state, Call(Op.COMPLETE_STORE, ("a", "zz"), ticket=0))
    assert NO_STALE_COMPLETIONS.excludes(state, Call(Op.COMPLETE_LOAD, ("a",), ticket=0))


def test_assumptions_are_named_and_read_only() -> None:
    assert list(ASSUMPTIONS) == ["unique-keys", "no-misuse", "no-stale-completions",
                                 "no-reset-in-flight"]
    assert "second/late report" in NO_STALE_COMPLETIONS.never
    state = initial_state(1)
    assert excluded_by(state, Call(Op.PREPARE_STORE, ("a", "a")), ASSUMPTIONS.values()) == (
        UNIQUE_KEYS.name)
    assert excluded_by(state, Call(Op.PREPARE_LOAD, ("a",)), [NO_MISUSE]) == NO_MISUSE.name
    assert excluded_by(state, Call(Op.COMPLETE_LOAD, ("a",), ticket=0), [NO_MISUSE]) is None
    state, _ = apply(state, Call(Op.PREPARE_STORE, ("a",)))
    assert excluded_by(state, Call(Op.RESET_CACHE), [NO_RESET_IN_FLIGHT]) == "no-reset-in-flight"
