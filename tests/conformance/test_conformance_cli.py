"""``kvoffload check``: exit status, report.json, reproducer, JUnit."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kvoffload.conformance.cli import main
from kvoffload.conformance.command.report import SCHEMA

pytest_plugins = ["pytester"]

SMALL = ["--max-examples", "25", "--steps", "60", "--seed", "5", "--quiet"]
"""The command's verdict, report, reproducer and exit status are the subject, on a budget
on which LookupPendingAsMiss fails under the newest Hypothesis and the oldest claimed (at
5 x 20 it conformed under Hypothesis 6.108.0, whose choice sequence differs)."""
pytestmark = pytest.mark.usefixtures("python_hosts")
"""The judge runs in this process (:func:`run`), its hosts are forks of one host zygote
(tests/conftest.py): the subject is the command's verdict, report and exit status."""


def run(argv: list[str], report: Path) -> int:
    return main(["check", *argv, *SMALL, "--report-dir", str(report)])


def test_a_failing_target_exits_1_with_report_and_reproducer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pytester: pytest.Pytester
) -> None:
    """The reproducer fails under pytest, run in this process (pytester: a session of
    its own, the installed plugins loaded, ``sys.modules`` put back after): a fresh
    ``python -m pytest`` cost about 1 s of CPU, nearly all of it pytest's and its
    plugins' start-up. The same file, fixed, runs in a fresh interpreter below
    (``python reproducer.py``): what it imports is its own."""
    junit = tmp_path / "junit.xml"
    code = run(["kvoffload.conformance.selftest.mutants:LookupPendingAsMiss",
                "--junit", str(junit)], tmp_path)
    out = capsys.readouterr().out
    assert code == 1
    assert "property 'lookup' violated" in out
    assert "shrunk trace (2 calls" in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["schema"] == SCHEMA
    assert report["verdict"] == "fails"
    assert report["configuration"]["profile"] == "strict"
    violation = report["violation"]
    assert violation["property"] == "lookup"
    assert [step["op"] for step in violation["trace"]] == ["prepare_store", "lookup"]
    assert {"aspect": "answer", "spec": "PENDING", "target": "MISS"} in violation["table"]
    suite = ET.parse(junit).getroot()
    assert suite.get("failures") == "1"
    assert suite.find("testcase[@name='lookup']/failure") is not None

    reproducer = Path(violation["reproducer"])
    assert "hypothesis" not in reproducer.read_text().lower()
    failing = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", str(reproducer))
    assert failing.ret == 1, failing.stdout.str()
    assert "PropertyViolation" in failing.stdout.str()
    failing.assert_outcomes(failed=1)
    fixed = reproducer.read_text().replace("mutants:LookupPendingAsMiss",
                                           "mutants:OffloadManager")
    reproducer.write_text(fixed)
    passing = subprocess.run([sys.executable, str(reproducer)], capture_output=True,
                             text=True, cwd=tmp_path)
    assert passing.returncode == 0, passing.stderr
    assert "conforms on this trace" in passing.stdout


def test_the_reference_conforms_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run([], tmp_path) == 0
    out = capsys.readouterr().out
    assert "target         kvoffload.impl:OffloadManager" in out
    assert "CONFORMS" in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["verdict"] == "conforms"
    assert report["violation"] is None
    assert report["configuration"]["seed"] == 5
    assert report["properties"]["checked"][0] == "lookup"


@pytest.mark.parametrize("argv", [
    ["no_such_module_xyz:Manager"],
    ["kvoffload.impl:OffloadManager", "--capacity", "0"],
    ["kvoffload.impl:OffloadManager", "--self-test"],
    ["vllm==not-a-version"],
])
def test_usage_and_loading_errors_exit_2(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(argv, tmp_path) == 2
    assert "kvoffload check: error:" in capsys.readouterr().err


def test_the_demo_still_plays_the_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "pr41795"]) == 0
    assert "all scenarios agree" in capsys.readouterr().out


def test_a_check_called_in_a_process_leaves_its_signals_and_environment_as_found(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``main(["check", ...])`` called from a program (these tests, a notebook, an
    engine's own test suite) gives back the SIGTERM handler and the environment it found:
    a run's handler (end the hosts, exit 143) and ``--in-process`` (which sets
    ``KVOFFLOAD_IN_PROCESS``) belong to that run, not to every later one of the caller."""
    import os
    import signal

    monkeypatch.delenv("KVOFFLOAD_IN_PROCESS", raising=False)

    def callers(signum: int, frame: object) -> None:  # pragma: no cover - never sent
        raise AssertionError("not sent")

    previous = signal.signal(signal.SIGTERM, callers)
    try:
        assert run(["--in-process"], tmp_path) == 0
        assert signal.getsignal(signal.SIGTERM) is callers
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert "KVOFFLOAD_IN_PROCESS" not in os.environ
