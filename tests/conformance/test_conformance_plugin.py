"""``pytest --kvoffload-target=TARGET`` runs the suite as test items."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


def test_targets_become_items_that_pass_or_fail(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        "--kvoffload-target=kvoffload.impl:OffloadManager",
        "--kvoffload-target=kvoffload.conformance.mutants:LookupPendingAsMiss",
        "--kvoffload-max-examples=20", "--kvoffload-steps=50", "--kvoffload-seed=3",
        "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*property 'lookup' violated*",
                                 "*reproducer:*reproduce_lookup.py*"])
    assert "1. prepare_store(['a'])" in result.stdout.str()
    assert list(pytester.path.glob("kvoffload-report/*LookupPendingAsMiss/report.json"))


def test_without_a_target_the_plugin_adds_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_configuration_options_reach_the_check(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        "--kvoffload-target=kvoffload.conformance.mutants:TouchIgnored",
        "--kvoffload-level=exact", "--kvoffload-max-examples=40", "--kvoffload-seed=3",
        "--kvoffload-assume=unique-keys", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*level          exact*", "*assumptions    unique-keys*",
                                 "*property 'eviction-choice' violated*"])
