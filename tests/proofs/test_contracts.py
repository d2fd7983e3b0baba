"""CrossHair over the spec's contracts: the report parser, and the recorded run (slow)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from proofs.modelcheck import contracts, table


def test_every_spec_module_is_given_to_crosshair() -> None:
    argv = contracts.command(2)
    assert argv[1:4] == ["-m", "crosshair", "check"]
    assert "--per_condition_timeout=2" in argv
    assert "spec/kvoffload/spec/transitions.py" in argv
    assert all(not a.endswith("__init__.py") for a in argv)


def test_report_lines_are_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    report = (
        "/x/spec/kvoffload/spec/transitions.py:27: info: Not confirmed.\n"
        "/x/spec/kvoffload/spec/transitions.py:63: info: Unable to meet precondition.\n"
        "/x/spec/kvoffload/spec/state.py:9: error: false when calling f(1) (which returns 2)\n"
    )

    def fake_run(*args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess([], 1, report, "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    result = contracts.run(1)
    assert result.statuses == (("transitions.py:27", "Not confirmed."),
                               ("transitions.py:63", "Unable to meet precondition."))
    assert result.errors == ("state.py:9: false when calling f(1) (which returns 2)",)
    assert result.verdict == "violated"
    assert result.summary().startswith("1 counterexample(s); 1 not confirmed")


@pytest.mark.slow
def test_recorded_crosshair_run_reproduces() -> None:
    recorded = [r for r in table.read() if r.command == "python proofs/check.py --crosshair"]
    assert len(recorded) == 1
    result = contracts.run(contracts.TIMEOUT)
    # CrossHair's search is cut by time, so how many contracts it could exercise varies
    # with the machine's load; the verdict (no counterexample) and the contracts found
    # must reproduce.
    assert result.errors == ()
    assert recorded[0].result.startswith("no counterexample;")
    counts = [int(n) for n in re.findall(r"(\d+) (?:not confirmed|unable|confirmed)",
                                         recorded[0].result)]
    assert len(result.statuses) == sum(counts)
    assert Path(contracts.SPEC_DIR).is_dir()
