"""The suite against vLLM's real ``kv_offload`` managers (docs/engines.md).

The seed releases run in the default tier: under the assumptions vLLM relies on,
0.20.2 fails the lookup property with a trace of at most three calls (PR #41795's bug)
and 0.21.0 conforms. The whole matrix, with each assumption dropped in turn, is
behind ``-m vllm_matrix``; its verdicts are the ones docs/engines.md reports (seed 1).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from kvoffload.conformance.command.runner import run_check
from kvoffload.conformance.config import CheckConfig, Profile
from kvoffload.conformance.corpus.corpus import engine_cases, engines_data
from kvoffload.conformance.corpus.corpus_replay import applies, replay_case
from kvoffload.conformance.errors import PropertyViolation
from kvoffload.conformance.target.targets import prepare
from vllm_releases import VLLM_ASSUMPTIONS, vllm_target
from vllm_replay import replay_recorded


def vllm_config(profile: Profile = Profile.STRICT, dropped: str | None = None,
                **budget: int) -> CheckConfig:
    assume = tuple(a for a in VLLM_ASSUMPTIONS if a != dropped)
    return CheckConfig(profile=profile, assume=assume, seed=1, **budget)  # type: ignore[arg-type]  # BUDGET: int fields only


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The release is checked in this process: the verdict is the subject, not the host,
    and this process loads the releases anyway (the replays below); a host costs a
    Python start and a vLLM and torch import per run. Per test, never session-wide:
    the host boundary has tests of its own."""
    monkeypatch.setenv("KVOFFLOAD_IN_PROCESS", "1")


@pytest.mark.usefixtures("in_process")
def test_vllm_0_20_2_fails_lookup_within_three_calls(pytestconfig: pytest.Config) -> None:
    target = vllm_target(pytestconfig, "0.20.2")
    # Only the first failure is asserted: the run stops there rather than spending the
    # rest of the budget on the other properties (the same seed finds the same one).
    result = run_check(target, replace(vllm_config(), stop_at_first=True))
    assert result.adapter == "vllm-bool"
    assert result.violation is not None, "0.20.2 answers False for an in-flight block"
    assert result.violation.prop == "lookup"
    assert len(result.violation.trace) <= 3
    assert result.violation.rows[1] == ("answer", "PENDING", "MISS")


@pytest.mark.usefixtures("in_process")
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
    found = {v.prop for v in result.violations} or {result.verdict}
    assert expected in found, result.violations  # a run reports every distinct failure


def test_vllm_0_20_2_fails_the_pr41795_corpus_cases(pytestconfig: pytest.Config) -> None:
    """``kvoffload corpus replay``'s judge on vllm==0.20.2 under vLLM's assumptions:
    the hand-written PR #41795 case and the page's recorded counterexample both fail
    property ``lookup`` at their lookup (step 2)."""
    target = vllm_target(pytestconfig, "0.20.2")
    config = vllm_config()
    prepared = prepare(target, config)
    cases = {c["name"]: c for c in engine_cases()}
    for name in ("engines-vllm-0.20-pr41795", "engines-vllm-0.20.2-lru-all-lookup"):
        assert applies(cases[name], config, prepared.capabilities) is None
        failed = replay_case(cases[name], prepared.make_adapter, config)
        assert isinstance(failed, PropertyViolation), f"{name} passed on 0.20.2"
        assert (failed.prop, failed.step) == ("lookup", 2)
        assert "must answer PENDING" in failed.message


ENTRIES = [e for e in engines_data()["counterexamples"]
           if e["engine"] == "vllm" and " -O " not in e["command"]]
"""docs/engines.md's vLLM counterexamples (the ``-O`` runs' need ``python -O``)."""
OPTIMIZED = [e for e in engines_data()["counterexamples"]
             if e["engine"] == "vllm" and " -O " in e["command"]]
"""docs/engines.md's vLLM counterexamples found under ``python -O`` (asserts gone)."""

REPLAY = textwrap.dedent("""
    import gc, json, sys
    gc.disable()
    sys.path.insert(0, sys.argv[2])
    from python_exit import end_as_python
    from vllm_replay import replay_recorded  # not vllm_releases: it imports pytest

    def replay():
        results = {"optimize": sys.flags.optimize}
        for entry in json.loads(sys.argv[1]):
            results[entry["name"]] = replay_recorded(entry)
        print(json.dumps(results))

    end_as_python(replay)
""")


def replay_elsewhere(entries: list[dict[str, object]], *flags: str) -> dict[str, object]:
    """Replay recorded counterexamples (:func:`replay_recorded`) in a fresh interpreter
    run with ``flags``. The interpreter is short-lived and imports torch and the
    releases for a few replays: it runs without the cyclic collector (collections during
    torch's import were about 0.4 s of CPU; no verdict depends on them, and the tests'
    process replays under other thresholds) and ends without the interpreter's teardown
    (tests/python_exit.py; about 0.5 s more), its exit handlers run."""
    tests = str(Path(__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, *flags, "-c", REPLAY, json.dumps(entries), tests],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    results: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return results


@pytest.fixture(scope="module")
def replayed_under_dash_o(pytestconfig: pytest.Config) -> dict[str, object]:
    """The ``-O`` runs' counterexamples of every release whose wheel is here, replayed
    in one ``python -O`` interpreter (one per release cost a vLLM and torch import each;
    one interpreter loads several releases, as the replays in this one do)."""
    here: list[dict[str, object]] = []
    for release in sorted({e["release"] for e in OPTIMIZED}):
        try:
            vllm_target(pytestconfig, release)
        except pytest.skip.Exception:  # its test skips, saying why
            continue
        here += [e for e in OPTIMIZED if e["release"] == release]
    return replay_elsewhere(here, "-O") if here else {"optimize": 1}


@pytest.mark.parametrize("release", sorted({e["release"] for e in OPTIMIZED}))
def test_each_counterexample_found_under_dash_o_fails_on_replay_under_dash_o(
    release: str, pytestconfig: pytest.Config, replayed_under_dash_o: dict[str, object]
) -> None:
    """The ``-O`` runs' counterexamples, replayed under ``python -O`` as their runs were:
    the release fails each one (vLLM's asserts, its only misuse checks, are gone)."""
    vllm_target(pytestconfig, release)  # skips without the release's wheel
    entries = [e for e in OPTIMIZED if e["release"] == release]
    assert replayed_under_dash_o["optimize"] == 1
    results = {e["name"]: replayed_under_dash_o.get(str(e["name"])) for e in entries}
    assert results == {e["name"]: "failed" for e in entries}
    # The control: with its asserts on, the release rejects the misuse these cases make
    # (in this interpreter when it runs without -O: a fresh one costs a vLLM import).
    misuse = [e for e in entries if str(e["name"]).endswith("-misuse")]
    plain = (replay_elsewhere(misuse) if sys.flags.optimize else
             {"optimize": 0, **{str(e["name"]): replay_recorded(e) for e in misuse}})
    assert plain.pop("optimize") == 0
    assert set(plain.values()) == {"passed"}


@pytest.mark.parametrize("release", sorted({e["release"] for e in ENTRIES}))
def test_each_recorded_vllm_counterexample_fails_on_replay(
    release: str, pytestconfig: pytest.Config
) -> None:
    """Replayed as corpus cases under the run's own configuration, the release fails
    every counterexample docs/engines.md lists for it, those the corpus tags level
    exact included (the lockstep takes the target's victim choices, as check does)."""
    vllm_target(pytestconfig, release)  # skips without the release's wheel
    entries = [e for e in ENTRIES if e["release"] == release]
    outcomes = {str(e["name"]): replay_recorded(e) for e in entries}
    assert entries
    assert outcomes == {str(e["name"]): "failed" for e in entries}
