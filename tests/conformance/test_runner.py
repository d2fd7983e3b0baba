"""The random runs (:mod:`kvoffload.conformance.command.runner`): the same seed and
options give the same run, whatever else the process has imported."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from kvoffload.conformance.command.runner import run_check
from kvoffload.conformance.config import CheckConfig
from kvoffload.conformance.judge.lockstep import Lockstep
from kvoffload.spec import Call

BUDGET = CheckConfig(max_examples=10, steps=64, seed=11)
"""608 calls; without the fix (Hypothesis's constants left in its pool) the second run
left the first at call 116 (at 58 with 5 examples), so 10 examples keep a wide margin."""


def calls_of_a_run(monkeypatch: pytest.MonkeyPatch) -> list[Call]:
    """The calls one run of the reference under ``BUDGET`` makes, in process."""
    calls: list[Call] = []
    step = Lockstep.step

    def recording(self: Lockstep, call: Call) -> object:
        calls.append(call)
        return step(self, call)

    with monkeypatch.context() as patched:
        patched.setenv("KVOFFLOAD_IN_PROCESS", "1")
        patched.setattr(Lockstep, "step", recording)
        assert run_check("kvoffload.impl:OffloadManager", BUDGET).verdict == "conforms"
    return calls


def test_a_seed_gives_the_same_calls_whatever_the_process_imported(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Regression: Hypothesis (6.131 on) sometimes draws an integer from the constants
    in the source of every "local" module (not stdlib, not site-packages) then in
    ``sys.modules``, so the same ``--seed`` made other calls once a test session, or
    the user's own code, had imported more modules (tests/conformance with
    tests/impl/test_vllm_facade_edges.py missed TouchIgnored's bug at seed 3)."""
    first = calls_of_a_run(monkeypatch)
    module = "kvoffload_seedctx_constants"
    (tmp_path / f"{module}.py").write_text(
        "TABLE = (" + ", ".join(str(7919 * i + 3) for i in range(900)) + ")\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    importlib.import_module(module)
    second = calls_of_a_run(monkeypatch)
    assert len(first) > 500
    assert second == first


def test_hypothesis_digests_the_machine_once_per_process(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every round hands Hypothesis a machine class of its own, which it digests (the
    source of the class and of its stateful test: about 10 ms of tokenizing): the
    runner keeps the digests, Hypothesis's own, for the rounds after the first."""
    from hypothesis import core, stateful
    from hypothesis.internal.reflection import function_digest

    from kvoffload.conformance.command import runner

    digested: list[object] = []

    def counting(function: object) -> bytes:
        digested.append(function)
        return function_digest(function)

    monkeypatch.setenv("KVOFFLOAD_IN_PROCESS", "1")
    monkeypatch.setattr(runner, "_DIGESTS", {})
    monkeypatch.setattr(stateful, "function_digest", counting)
    monkeypatch.setattr(core, "function_digest", counting)
    run_check("kvoffload.impl:OffloadManager", CheckConfig(max_examples=2, steps=8, seed=1))
    # The machine class, and Hypothesis's test where Hypothesis wants its database key
    # (not under every settings profile an earlier test may have loaded):
    first = list(digested)
    assert 1 <= len(first) <= 2
    assert any(isinstance(function, type) for function in first)
    for seed in (2, 3):
        run_check("kvoffload.impl:OffloadManager", CheckConfig(max_examples=2, steps=8, seed=seed))
    assert digested == first  # nothing digested again in the later rounds
    assert sorted(runner._DIGESTS.values()) == sorted(function_digest(f) for f in digested)
    assert stateful.function_digest is counting  # put back
    assert core.function_digest is counting
