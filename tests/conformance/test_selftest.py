"""The self-test: every seeded bug is killed, every control passes (the default budget).

Variants are killed within a second or two, so all of them run here at the default
budget, unshrunk (shrinking is the slow tier's, below, and ``test_shrink.py``'s).
Controls run their full default budget in the slow tier (``kvoffload check
--self-test`` runs both); the default tier runs them with a smaller one.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvoffload.conformance.command import runner
from kvoffload.conformance.command.check_command import SELF_TEST_SEED
from kvoffload.conformance.command.runner import run_check
from kvoffload.conformance.config import CheckConfig
from kvoffload.conformance.errors import PropertyViolation
from kvoffload.conformance.judge.lockstep import replay
from kvoffload.conformance.selftest import mutants
from kvoffload.conformance.selftest.selftest import CATALOGUE, Entry
from kvoffload.conformance.target.native import NativeAdapter

VARIANTS = [e for e in CATALOGUE if e.kind == "variant"]
CONTROLS = [e for e in CATALOGUE if e.kind == "control"]


def test_the_catalogue_is_big_enough() -> None:
    assert len({e.cls for e in VARIANTS}) >= 15
    assert {e.level.value for e in VARIANTS} == {"any", "exact"}
    for entry in VARIANTS:
        assert (getattr(mutants, entry.cls).__doc__ or "").strip(), entry.cls


def config_for(entry: Entry, **budget: int) -> CheckConfig:
    return replace(CheckConfig(seed=SELF_TEST_SEED, adapter="native", stop_at_first=True),
                   policy=entry.policy, level=entry.level, **budget)


@pytest.mark.parametrize("entry", VARIANTS, ids=[e.label for e in VARIANTS])
def test_every_variant_is_killed_and_its_trace_replays(
        entry: Entry, monkeypatch: pytest.MonkeyPatch) -> None:
    """The trace replayed is the one Hypothesis found, not shrunk: shrinking took about
    4 of these tests' 13 s of CPU and is not what they claim (the kill at the self-test's
    seed and budget, and a trace that replays outside Hypothesis). Each variant's shrink
    runs in the slow tier's whole self-test; the shrinker's rules in the default tier's
    ``test_shrink.py``."""
    monkeypatch.setattr(runner, "shrink", lambda make_adapter, config, found, **_: found)
    config = config_for(entry)
    result = run_check(entry.target, config, obj=getattr(mutants, entry.cls))
    assert result.verdict == "fails", f"{entry.label} survived {result.examples} examples"
    violation = result.violation
    assert violation is not None
    sized = replace(config, capacity=violation.capacity)
    adapter = NativeAdapter(getattr(mutants, entry.cls)(sized.capacity,
                                                       policy=sized.policy.value))
    with pytest.raises(PropertyViolation) as again:
        replay(adapter, sized, violation.trace[:violation.generated], drain=violation.in_drain)
    assert again.value.prop == violation.prop


@pytest.mark.parametrize("entry", CONTROLS, ids=[e.label for e in CONTROLS])
def test_every_control_passes_a_short_run(entry: Entry) -> None:
    result = run_check(entry.target, config_for(entry, max_examples=25),
                       obj=getattr(mutants, entry.cls))
    assert result.verdict == "conforms", result.violation


@pytest.mark.slow
def test_the_whole_self_test_at_the_default_budget() -> None:
    from kvoffload.conformance.selftest.selftest import run_self_test

    report = run_self_test(CheckConfig(seed=SELF_TEST_SEED))
    bad = [(o.entry.label, o.status) for o in report.outcomes if not o.ok]
    assert not bad
