"""The suite against vLLM's real ``kv_offload`` managers (docs/engines.md).

The seed releases run in the default tier: under the assumptions vLLM relies on,
0.20.2 fails the lookup property with a trace of at most three calls (PR #41795's bug)
and 0.21.0 conforms. The whole matrix, with each assumption dropped in turn, is
behind ``-m vllm_matrix``; its verdicts are the ones docs/engines.md reports (seed 1).
"""

from __future__ import annotations

import pytest

from kvoffload.conformance.config import CheckConfig, Profile
from kvoffload.conformance.runner import run_check
from vllm_releases import VLLM_ASSUMPTIONS, vllm_target


def vllm_config(profile: Profile = Profile.STRICT, dropped: str | None = None,
                **budget: int) -> CheckConfig:
    assume = tuple(a for a in VLLM_ASSUMPTIONS if a != dropped)
    return CheckConfig(profile=profile, assume=assume, seed=1, **budget)  # type: ignore[arg-type]  # BUDGET: int fields only


def test_vllm_0_20_2_fails_lookup_within_three_calls(pytestconfig: pytest.Config) -> None:
    target = vllm_target(pytestconfig, "0.20.2")
    result = run_check(target, vllm_config())
    assert result.adapter == "vllm-bool"
    assert result.violation is not None, "0.20.2 answers False for an in-flight block"
    assert result.violation.prop == "lookup"
    assert len(result.violation.trace) <= 3
    assert result.violation.rows[1] == ("answer", "PENDING", "MISS")


def test_vllm_0_21_0_conforms_under_its_assumptions(pytestconfig: pytest.Config) -> None:
    target = vllm_target(pytestconfig, "0.21.0")
    result = run_check(target, vllm_config(max_examples=80))
    assert result.verdict == "conforms", result.violation


MATRIX = [
    # version, profile, dropped assumption, expected verdict / property
    ("0.18.0", Profile.SAFE, None, "crash"),
    ("0.18.0", Profile.SAFE, "unique-keys", "store-plan"),
    ("0.18.0", Profile.SAFE, "no-misuse", "crash"),
    ("0.20.2", Profile.STRICT, None, "lookup"),
    ("0.20.2", Profile.STRICT, "unique-keys", "store-plan"),
    ("0.20.2", Profile.STRICT, "no-misuse", "liveness"),
    ("0.21.0", Profile.STRICT, None, "conforms"),
    ("0.21.0", Profile.STRICT, "unique-keys", "store-plan"),
    ("0.21.0", Profile.STRICT, "no-misuse", "liveness"),
    ("0.21.0", Profile.STRICT, "no-stale-completions", "conforms"),
    ("0.21.0", Profile.STRICT, "no-reset-in-flight", "conforms"),
    ("0.24.0", Profile.STRICT, None, "events"),
    ("0.24.0", Profile.STRICT, "unique-keys", "rejection"),
    ("0.24.0", Profile.STRICT, "no-reset-in-flight", "rejection"),
    ("0.25.0", Profile.STRICT, None, "events"),
    ("0.25.0", Profile.STRICT, "no-reset-in-flight", "rejection"),
    ("0.34.0", Profile.STRICT, None, "events"),
]


@pytest.mark.vllm_matrix
@pytest.mark.parametrize(("version", "profile", "dropped", "expected"), MATRIX,
                         ids=[f"{v}-{d or 'all'}" for v, _, d, _ in MATRIX])
def test_the_vllm_matrix(version: str, profile: Profile, dropped: str | None,
                         expected: str, pytestconfig: pytest.Config) -> None:
    target = vllm_target(pytestconfig, version)
    result = run_check(target, vllm_config(profile, dropped))
    found = result.violation.prop if result.violation is not None else result.verdict
    assert found == expected, result.violation
