"""The plugin's items are ordinary pytest items (issue 21): a real node id rooted at
the file that names the target, made by a collector during collection, so that --co,
-k, selection by node id, --lf, --ff, --sw and xdist's --dist modes behave as with any
plugin. .ci/run runs this module under the newest and the oldest pytest the project
claims."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from inprocess_suite import SUITE

from kvoffload.conformance.command import runner
from kvoffload.conformance.command.runner import CheckResult
from kvoffload.conformance.config import CheckConfig

assert SUITE  # imported before any in-process run (see inprocess_suite)
pytest_plugins = ["pytester"]

MUTANT = "kvoffload.conformance.selftest.mutants:LookupPendingAsMiss"
REFERENCE = "kvoffload.impl:OffloadManager"
BUDGET = ("--kvoffload-max-examples=12", "--kvoffload-steps=40", "--kvoffload-no-database",
          "--kvoffload-seed=3")
"""Items, ids, selection and reruns are the subject, not what a check finds: a budget on
which the reference passes and the mutant fails (at seed 3), and each of the mutant's two
shards too, under the newest Hypothesis and the oldest claimed (.ci/oldest.txt). At 4 x 20
the mutant passed under Hypothesis 6.108.0: its choice sequence differs."""
TWO = (f"--kvoffload-target={REFERENCE}", f"--kvoffload-target={MUTANT}", *BUDGET)
OTHER_PLUGINS_OFF = ("-p", "no:benchmark", "-p", "no:anyio")
"""For xdist's runs: plugins of this environment that the kvoffload plugin does not
touch, not loaded by the run's workers, processes of their own (about 0.35 s of CPU a
process)."""


@pytest.fixture(autouse=True)
def _targets_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inner sessions check their targets in their own process, not a host each
    (``KVOFFLOAD_IN_PROCESS=1``, inherited by xdist's workers): items, ids and shards are
    the subject here. The plugin's items through hosts: test_conformance_plugin.py's
    test_targets_become_items_that_pass_or_fail."""
    monkeypatch.setenv("KVOFFLOAD_IN_PROCESS", "1")


_CHECKED: dict[tuple[str, CheckConfig], CheckResult] = {}
"""The inner sessions' checks, by target and configuration (see :func:`_one_check_each`)."""


@pytest.fixture(autouse=True)
def _one_check_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each target checked once for the module under one configuration: every inner
    session here checks the same two targets at the same seed and budget (14 checks, 2
    distinct: about 1.1 s of CPU), and a check at a fixed seed without a database gives
    the same result every time. The items still run, write their reports and pass or
    fail by that result; what they do with it (ids, selection, reruns) is the subject.
    The plugin's item making its own check: test_conformance_plugin.py."""
    real = runner.run_check

    def once(target: str, config: CheckConfig, *args: Any, **kwargs: Any) -> CheckResult:
        if args or kwargs or config.seed is None or config.database is not None:
            return real(target, config, *args, **kwargs)
        result = _CHECKED.get((target, config))
        if result is None:
            result = _CHECKED[target, config] = real(target, config)
        return result

    monkeypatch.setattr(runner, "run_check", once)


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with an ini file and one ordinary test beside the targets."""
    pytester.makefile(".ini", pytest="[pytest]\n")
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    return pytester


def test_collect_only_lists_each_target_under_the_ini_file(project: pytest.Pytester) -> None:
    result = project.runpytest("--co", "-q", *TWO, "-p", "no:cacheprovider")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["test_plain.py::test_plain",
                                 _glob(f"pytest.ini::kvoffload[{REFERENCE}]"),
                                 _glob(f"pytest.ini::kvoffload[{MUTANT}]"),
                                 "3 tests collected*"])


def test_an_item_is_selected_by_its_node_id(project: pytest.Pytester) -> None:
    node = f"pytest.ini::kvoffload[{MUTANT}]"
    result = project.runpytest(node, *TWO, "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"FAILED {_glob(node)}*"])


def test_k_selects_by_the_targets_name(project: pytest.Pytester) -> None:
    result = project.runpytest("--co", "-q", "-k", "OffloadManager", *TWO,
                                          "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines([_glob(f"pytest.ini::kvoffload[{REFERENCE}]"),
                                 "1/3 tests collected (2 deselected)*"])


@pytest.fixture(scope="module")
def one_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the cache of :func:`_after_one_run`'s run is kept for the module."""
    return tmp_path_factory.mktemp("one-run") / ".pytest_cache"


def _after_one_run(project: pytest.Pytester, one_run: Path) -> None:
    """``project`` as after one session of ``TWO`` (the plain test and the reference
    pass, the mutant fails): that session's cache, which --lf and --ff read. The run
    is made once for the module, its outcome asserted then, and its cache copied into
    each project after it (the --lf and the --ff tests made the same run)."""
    cache = project.path / ".pytest_cache"
    if one_run.exists():
        shutil.copytree(one_run, cache)
        return
    project.runpytest(*TWO).assert_outcomes(passed=2, failed=1)
    shutil.copytree(cache, one_run)


def test_last_failed_reruns_only_the_failed_target(
    project: pytest.Pytester, one_run: Path
) -> None:
    _after_one_run(project, one_run)
    again = project.runpytest(*TWO, "--lf")
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines(["*rerun previous 1 failure*",
                                f"FAILED *::kvoffload[[]{MUTANT}[]]*"])


def test_failed_first_runs_the_failed_target_first(
    project: pytest.Pytester, one_run: Path
) -> None:
    _after_one_run(project, one_run)
    again = project.runpytest(*TWO, "--ff", "-v")
    again.assert_outcomes(passed=2, failed=1)
    ran = [line for line in again.stdout.lines if line.endswith("]") and "::" in line
           and ("PASSED" in line or "FAILED" in line)]
    assert MUTANT in ran[0], ran


def test_stepwise_stops_at_the_failed_target_and_resumes_there(
    project: pytest.Pytester,
) -> None:
    first = project.runpytest(*TWO, "--sw")
    first.assert_outcomes(passed=2, failed=1)
    again = project.runpytest(*TWO, "--sw", "-v")
    again.stdout.fnmatch_lines(["*skipping 2 already passed items*"])
    again.assert_outcomes(failed=1, deselected=2)


@pytest.mark.wide
def test_xdist_loadgroup_runs_every_item(project: pytest.Pytester) -> None:
    """In the wide tier: the default tier's run under xdist is test_plugin_shards.py's
    shards test under --dist loadgroup (the same two targets in two shards each, over
    two workers, every item's outcome asserted, the merge too); under loadscope, its
    wide instance. The controlling session runs in this process (see inprocess_suite),
    its two workers in their own."""
    pytest.importorskip("xdist")
    result = project.runpytest(*TWO, "--kvoffload-shards=2", "-n", "2",
                               "--dist", "loadgroup", "-p", "no:cacheprovider",
                               *OTHER_PLUGINS_OFF)
    result.assert_outcomes(passed=3, failed=2)


def test_a_conftest_names_targets_and_roots_their_items(pytester: pytest.Pytester) -> None:
    pytester.mkdir("checks").joinpath("conftest.py").write_text(
        f"kvoffload_targets = [{MUTANT!r}]\n")
    result = pytester.runpytest("--co", "-q", *BUDGET, "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines([_glob(f"checks/conftest.py::kvoffload[{MUTANT}]")])
    run = pytester.runpytest(
        f"checks/conftest.py::kvoffload[{MUTANT}]", *BUDGET, "-p", "no:cacheprovider")
    run.assert_outcomes(failed=1)


def test_the_ini_key_names_targets(pytester: pytest.Pytester) -> None:
    pytester.makefile(".ini", pytest=f"[pytest]\nkvoffload_targets =\n    {REFERENCE}\n")
    result = pytester.runpytest(*BUDGET, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*1 passed*"])


def test_without_an_ini_file_the_items_are_still_ordinary(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--co", "-q", *TWO, "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines([_glob(f"kvoffload-targets::kvoffload[{REFERENCE}]")])
    pytester.runpytest(*TWO).assert_outcomes(passed=1, failed=1)
    pytester.runpytest(*TWO, "--lf").assert_outcomes(failed=1, deselected=1)


def test_picking_other_tests_leaves_the_targets_out(project: pytest.Pytester) -> None:
    result = project.runpytest("test_plain.py::test_plain", *TWO,
                                          "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def _glob(text: str) -> str:
    """``text`` as an fnmatch pattern (brackets are pattern syntax there)."""
    return re.sub(r"([\[\]])", r"[\1]", text)
