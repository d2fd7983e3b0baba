"""The pytest plugin's conventions (issue 11): --hypothesis-seed, reproducers naming
the target by an absolute path, shards merged per target, bad options as pytest's usage
error (ids that --lf reruns: test_plugin_items.py)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from inprocess_suite import SUITE

assert SUITE  # imported before any in-process run (see inprocess_suite)
pytest_plugins = ["pytester"]

MUTANT = "kvoffload.conformance.selftest.mutants:LookupPendingAsMiss"
REFERENCE = "kvoffload.impl:OffloadManager"
BUDGET = ["--kvoffload-max-examples=12", "--kvoffload-steps=40", "--kvoffload-no-database"]
OTHER_PLUGINS_OFF = ("-p", "no:benchmark", "-p", "no:anyio")
"""As in test_plugin_items.py: plugins the kvoffload plugin does not touch, off in the
xdist run's workers."""
LIGHT_WORKERS = ("--assert=plain", "-p", "no:unraisableexception")
"""Nor what the inner session, whose items are the plugin's alone, does not use: assertion
rewriting (each worker read kvoffload's modules through pytest's rewriting importer, the
plugin's package being marked for it) and the unraisable-exception check (a full
collection of each worker's heap, twice, as it ends): about 0.12 s of CPU a worker."""


@pytest.fixture(autouse=True)
def _targets_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inner sessions check their targets in their own process, not a host each
    (``KVOFFLOAD_IN_PROCESS=1``, inherited by xdist's workers): items, ids and shards are
    the subject here. The plugin's items through hosts: test_conformance_plugin.py's
    test_targets_become_items_that_pass_or_fail."""
    monkeypatch.setenv("KVOFFLOAD_IN_PROCESS", "1")


def test_hypothesis_seed_is_honoured(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(
        f"--kvoffload-target={REFERENCE}", "--hypothesis-seed=4242", *BUDGET,
        "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    report = json.loads(next(pytester.path.glob("kvoffload-report/*/report.json")).read_text())
    assert report["configuration"]["seed"] == 4242


def test_reproducers_name_a_file_target_by_its_absolute_path(pytester: pytest.Pytester) -> None:
    (pytester.path / "mine.py").write_text(
        "from kvoffload.conformance.selftest.mutants import LookupPendingAsMiss as Manager\n")
    result = pytester.runpytest("--kvoffload-target=mine.py:Manager", *BUDGET,
                                           "--kvoffload-seed=3", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    reproducer = next(pytester.path.glob("kvoffload-report/*/reproduce_lookup.py"))
    assert f"TARGET = '{pytester.path / 'mine.py'}:Manager'" in reproducer.read_text()


@pytest.mark.parametrize("dist", ["loadgroup", pytest.param("loadscope", marks=pytest.mark.wide)])
def test_shards_split_the_budget_with_disjoint_seeds_and_merge_per_target(
    pytester: pytest.Pytester, dist: str
) -> None:
    """Under two of xdist's --dist modes: loadgroup spreads the items over both workers
    (the merge gathers shards run in two processes); loadscope gives them all to one (the
    items share their file's scope), in the wide tier. Each mode's scheduling is xdist's;
    what the plugin does (the same items collected in each worker, outcomes sent to the
    controlling session, merged there) is the same."""
    pytest.importorskip("xdist")
    # The controlling session (which merges the shards) in this process, as every other
    # inner run here (see inprocess_suite); its two workers are processes of their own.
    result = pytester.runpytest(
        f"--kvoffload-target={REFERENCE}", f"--kvoffload-target={MUTANT}",
        "--kvoffload-shards=2", "--kvoffload-seed=10", *BUDGET,
        "--kvoffload-junit=junit.xml", "-n", "2", "--dist", dist,
        "-p", "no:cacheprovider", *OTHER_PLUGINS_OFF, *LIGHT_WORKERS)
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines([f"*kvoffload[[]{MUTANT}#shard2of2[]]*"])
    merged = {}
    for path in pytester.path.glob("kvoffload-report/*/report.json"):
        report = json.loads(path.read_text())
        merged[report["target"]] = report
    assert set(merged) == {REFERENCE, MUTANT}
    failing = merged[MUTANT]
    assert failing["verdict"] == "fails"
    assert [run["seed"] for run in failing["runs"]] == [10, 11]
    assert failing["configuration"]["max_examples"] == 12
    assert all(run["failures"][0]["property"] == "lookup" for run in failing["runs"])
    assert merged[REFERENCE]["verdict"] == "conforms"
    assert merged[REFERENCE]["examples"] >= 12
    suite = ET.parse(pytester.path / "junit.xml").getroot()
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert set(cases) == {REFERENCE, MUTANT}
    assert cases[MUTANT].find("failure") is not None
    assert cases[REFERENCE].find("failure") is None


def test_more_shards_than_examples_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(
        f"--kvoffload-target={REFERENCE}", "--kvoffload-shards=3",
        "--kvoffload-max-examples=2", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--kvoffload-shards 3 is more than --kvoffload-max-examples"
                                 " 2: every shard needs one*"])


def test_bad_plugin_options_name_the_plugins_spelling(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(
        f"--kvoffload-target={REFERENCE}", "--kvoffload-profile=bogus", "-p",
        "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # before any item runs
    result.stderr.fnmatch_lines(["*--kvoffload-profile must be one of strict, safe*"])
    assert not list(Path(pytester.path).glob("kvoffload-report/*/report.json"))
