"""The command line: listing, one check with its trace, exit status."""

from __future__ import annotations

import pytest
from proofs.modelcheck.cli import main


def test_list_names_every_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "spec-lru" in out
    assert "mutant:EvictsPinnedBlock" in out


def test_a_caught_mutant_prints_its_numbered_trace(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--check", "mutant:TouchQueuesStoring", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "violated" in out
    assert "follows_the_spec" in out
    assert "1. prepare_store(['a'])" in out
    assert "2. touch(['a'])" in out


def test_unknown_check_is_a_usage_error() -> None:
    with pytest.raises(SystemExit):
        main(["--check", "no-such-check"])


def test_write_readme_needs_all() -> None:
    with pytest.raises(SystemExit):
        main(["--write-readme"])


def test_the_murphi_model_takes_one_environment_setting_at_a_time() -> None:
    """No row checks background eviction and the node's failure together, so the
    command line refuses to make one (it would be compared with no Python check)."""
    with pytest.raises(SystemExit):
        main(["--rumur", "--background-eviction", "--node-failure"])
