"""``pytest --kvoffload-target=TARGET`` runs the suite as test items."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from inprocess_suite import SUITE

assert SUITE  # imported before any in-process run (see inprocess_suite)
pytest_plugins = ["pytester"]


@pytest.mark.usefixtures("python_hosts")  # the inner session's hosts: forks of one
def test_targets_become_items_that_pass_or_fail(pytester: pytest.Pytester) -> None:
    """Items, their outcome, the failure's text and the report are the subject, on a
    budget on which the mutant fails under the newest Hypothesis and the oldest claimed
    (at 4 x 20 it passed under Hypothesis 6.108.0)."""
    result = pytester.runpytest(
        "--kvoffload-target=kvoffload.impl:OffloadManager",
        "--kvoffload-target=kvoffload.conformance.selftest.mutants:LookupPendingAsMiss",
        "--kvoffload-max-examples=20", "--kvoffload-steps=50", "--kvoffload-seed=3",
        "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*property 'lookup' violated*",
                                 "*reproducer:*reproduce_lookup.py*"])
    assert "1. prepare_store(['a'])" in result.stdout.str()
    assert list(pytester.path.glob("kvoffload-report/*LookupPendingAsMiss/report.json"))


def test_without_a_target_the_plugin_adds_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_configuration_options_reach_the_check(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The target in the inner session's process (KVOFFLOAD_IN_PROCESS=1): the options are
    # the subject, and the judge, not the host, reads them. Items through hosts:
    # test_targets_become_items_that_pass_or_fail, a failing one among them. Seed 19:
    # the same failure as at seed 3, shrunk from a shorter trace (seed 3's shrink took 2
    # of the test's 3 s of CPU), found within 10 examples as within 40.
    monkeypatch.setenv("KVOFFLOAD_IN_PROCESS", "1")
    result = pytester.runpytest(
        "--kvoffload-target=kvoffload.conformance.selftest.mutants:TouchIgnored",
        "--kvoffload-level=exact", "--kvoffload-max-examples=10", "--kvoffload-seed=19",
        "--kvoffload-assume=unique-keys", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*level          exact*", "*assumptions    unique-keys*",
                                 "*property 'eviction-choice' violated*"])



class _Options:
    """Stands in for pytest's parser and option group: keeps each option's help."""

    def __init__(self) -> None:
        self.help: dict[str, str] = {}

    def getgroup(self, *args: object, **kwargs: object) -> _Options:
        return self

    def addoption(self, name: str, *args: object, help: str = "", **kwargs: object) -> None:
        self.help[name] = help

    def addini(self, *args: object, **kwargs: object) -> None:
        pass


def test_the_plugins_help_is_the_tables() -> None:
    # The plugin's help comes from the options table, bounds and defaults included.
    from kvoffload.conformance import pytest_plugin
    from kvoffload.conformance.options import BY_NAME, MAX_CAPACITY

    options = _Options()
    pytest_plugin.pytest_addoption(options)  # type: ignore[arg-type]  # a stand-in for pytest's parser
    assert options.help["--kvoffload-capacity"] == BY_NAME["capacity"].help_text()
    assert f"1 to {MAX_CAPACITY}" in options.help["--kvoffload-capacity"]


def test_without_a_target_a_session_imports_nothing_of_the_suite(tmp_path: Path) -> None:
    """Regression (issue 21): the merger's end-of-session hook imported the report
    module, and with it Hypothesis's engine and the whole suite, in every pytest run."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    # pytest-benchmark and anyio's plugin are this environment's, not the project's:
    # not loaded (about 0.35 s of CPU); Hypothesis's, which a user has, is.
    code = ("import sys, pytest; pytest.main(['--co', '-q', '-p', 'no:cacheprovider', "
            "'-p', 'no:benchmark', '-p', 'no:anyio']); "
            "print(sorted(m for m in sys.modules if m.startswith('kvoffload.conformance.')),"
            " 'kvoffload.spec' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    # The options table is all the plugin loads (standard library only: not the spec).
    assert out.strip().splitlines()[-1] == (
        "['kvoffload.conformance.options', 'kvoffload.conformance.pytest_plugin'] False")
