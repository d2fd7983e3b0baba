"""Environment transitions are opt-in: background eviction (docs/spec.md D14) and node
failures (D15) leave the default check alone. The default check of the reference, of
vLLM 0.20.2 and of LMCache 0.5.6 gives, with a fixed seed and budget, the same verdict per
property, and the same shrunk trace per failure, as recorded in ``verdicts_recorded.json``
(whose ``recorded`` field says from which commit, and why it was recorded again once)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvoffload.conformance.command.runner import run_check
from kvoffload.conformance.config import CheckConfig

RECORDED = json.loads(
    (Path(__file__).with_name("verdicts_recorded.json")).read_text())
TARGETS = {"reference": "kvoffload.impl:OffloadManager", "vllm": "vllm==0.20.2",
           "lmcache": "lmcache==0.5.6"}


def verdicts(target: str) -> dict[str, object]:
    """The run's verdict and, per property, held / failed with its trace / not checked."""
    result = run_check(target, CheckConfig(seed=1, max_examples=40, steps=60))
    failed = {f.violation.prop: [str(c) for c in f.violation.trace] for f in result.failures}
    found: dict[str, list[object]] = {}
    for prop in result.checked:
        found[prop] = ["failed", failed[prop]] if prop in failed else ["held"]
    for prop, why in result.not_checked.items():
        found[prop] = ["not checked", why]
    assert not result.config.background_eviction  # the default is on-store
    return {"verdict": result.verdict, "properties": found}


@pytest.mark.parametrize("name", [
    "reference",
    pytest.param("vllm", marks=pytest.mark.vllm_matrix),
    pytest.param("lmcache", marks=[pytest.mark.lmcache, pytest.mark.slow]),
])
def test_the_default_check_gives_the_verdicts_it_gave_before(
        name: str, request: pytest.FixtureRequest) -> None:
    if name == "reference":  # its host a fork of one (conftest.py): the verdicts alike
        request.getfixturevalue("python_hosts")
    if name == "lmcache":
        pytest.importorskip("lmcache", reason="pip install -e '.[lmcache]'")
    assert verdicts(TARGETS[name]) == RECORDED["verdicts"][name]
