"""``kvoffload check --trace``: a request trace's call stream as the lockstep's workload
(``traffic/calls.py``, ``traffic/check.py``): the reference conforms, seeded bugs a
trace reaches are killed and shrunk (the shortest failing window, then the shrinker),
the option is judged by the one table. The whole conversation trace at production
size runs under ``-m traffic``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from kvoffload.conformance import check
from kvoffload.conformance.cli import main
from kvoffload.conformance.config import MAX_CAPACITY, CheckConfig
from kvoffload.conformance.errors import UsageError
from kvoffload.conformance.selftest import mutants
from kvoffload.conformance.traffic.calls import request_random
from kvoffload.conformance.traffic.check import load_trace
from kvoffload.impl import OffloadManager
from kvoffload.spec import Op

pytest_plugins = ["pytester"]

PRODUCTION = 5_859
"""The Mooncake paper's local cache: 3M tokens of 512-token blocks."""


def test_the_reference_conforms_on_a_window_of_the_trace() -> None:
    result = check(OffloadManager, trace="conversation:80", capacity=128, seed=3)
    assert result.verdict == "conforms"
    tally = result.extra["trace"]
    assert tally["requests"] == 80
    assert tally["lookups"] > 80
    assert tally["rejected"] > 0  # 128 slots: some requests cannot fit
    assert result.examples == 1
    assert result.steps == tally["calls"]


def test_the_call_stream_is_a_function_of_the_seed() -> None:
    first = check(OffloadManager, trace="conversation:40", capacity=64, seed=7)
    again = check(OffloadManager, trace="conversation:40", capacity=64, seed=7)
    assert first.extra["trace"] == again.extra["trace"]
    assert request_random(7, 12).random() == request_random(7, 12).random()
    assert request_random(7, 12).random() != request_random(8, 12).random()


def test_a_store_of_a_block_in_flight_is_killed_and_cut_to_a_window() -> None:
    result = check(mutants.EvictsStoringBlock, trace="conversation:400", capacity=256,
                   seed=1, stop_at_first=True)
    assert result.verdict == "fails"
    [failure] = result.failures
    window = result.extra["windows"][0]
    assert window["property"] == failure.violation.prop
    first, last = window["window"]
    assert 0 < first <= last == window["failing_request"]  # cut at both ends of 400
    assert len(failure.violation.trace) <= window["window_calls"]
    assert failure.reproduced == failure.replays


def test_pr_41795s_bug_is_killed_by_the_trace_and_shrunk() -> None:
    # Lookup reads a block in flight as absent: the conversation trace's second request
    # arrives while its first block is still being stored.
    result = check(mutants.LookupPendingAsMiss, trace="conversation:100", capacity=512,
                   seed=1, stop_at_first=True)
    [failure] = result.failures
    assert failure.violation.prop == "lookup"
    assert [c.op for c in failure.violation.trace] == [Op.PREPARE_STORE, Op.LOOKUP]


def test_a_trace_file_of_another_source_is_a_workload(tmp_path: Path) -> None:
    lines = [{"timestamp": 10 * i, "input_length": 1024, "hash_ids": [0, i + 1]}
             for i in range(30)]
    path = tmp_path / "mine.jsonl.gz"
    with gzip.open(path, "wt") as out:
        out.writelines(json.dumps(line) + "\n" for line in lines)
    assert len(load_trace(f"{path}:12")) == 12
    result = check(OffloadManager, trace=str(path), capacity=8, seed=1)
    assert result.verdict == "conforms"
    assert result.extra["trace"]["requests"] == 30


def test_wide_tiers_only_with_a_trace() -> None:
    with pytest.raises(UsageError, match=f"--capacity must be 1 to {MAX_CAPACITY}"):
        CheckConfig.from_options(capacity=PRODUCTION)
    with pytest.raises(UsageError, match=f"--capacity must be 1 to {MAX_CAPACITY}"):
        CheckConfig(capacity=PRODUCTION)
    config = CheckConfig.from_options(capacity=PRODUCTION, trace="conversation")
    assert (config.capacity, config.trace) == (PRODUCTION, "conversation")
    with pytest.raises(UsageError, match="--trace 'conversation:0'"):
        CheckConfig.from_options(trace="conversation:0")
    with pytest.raises(UsageError, match="is no trace"):
        CheckConfig.from_options(trace="no/such/file")


@pytest.mark.usefixtures("python_hosts")  # the host's hello is the subject, not its start
def test_a_host_builds_a_tier_wider_than_a_random_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: the host was told the run's capacity in its hello and judged it by a
    random run's bound (exit 2 above 1,024 slots)."""
    monkeypatch.delenv("KVOFFLOAD_IN_PROCESS", raising=False)
    assert main(["check", "--trace", "conversation:20", "--capacity", "2000", "--quiet",
                 "--no-database", "--report-dir", str(tmp_path)]) == 0


def test_the_command_line_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KVOFFLOAD_IN_PROCESS", "1")  # --in-process sets it: restored after
    common = ["--trace", "conversation:60", "--capacity", "200", "--seed", "1",
              "--in-process", "--quiet", "--no-database"]
    assert main(["check", *common, "--report-dir", str(tmp_path / "ok")]) == 0
    assert "workload       the trace conversation:60" in capsys.readouterr().out
    bug = "kvoffload.conformance.selftest.mutants:LookupPendingAsMiss"
    assert main(["check", bug, *common, "--stop-at-first",
                 "--report-dir", str(tmp_path / "bug")]) == 1
    report = json.loads((tmp_path / "bug" / "report.json").read_text())
    assert report["configuration"]["trace"] == "conversation:60"
    assert report["run"]["windows"][0]["property"] == "lookup"
    assert main(["check", "--trace", "conversation:60", "--self-test"]) == 2


@pytest.mark.traffic
def test_the_whole_conversation_trace_at_production_size(tmp_path: Path) -> None:
    """The measured run of docs/traffic.md (about 4 minutes of CPU on 2 cores), here
    in process."""
    result = check(OffloadManager, trace="conversation", capacity=PRODUCTION, seed=1)
    assert result.verdict == "conforms"
    assert result.extra["trace"]["requests"] == 12_031


def test_the_plugin_takes_the_trace(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(
        "--kvoffload-target=kvoffload.conformance.selftest.mutants:LookupPendingAsMiss",
        "--kvoffload-trace=conversation:30", "--kvoffload-capacity=2000",
        "--kvoffload-seed=3", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*workload       the trace conversation:30*",
                                 "*property 'lookup' violated*"])


def test_a_trace_file_that_breaks_the_format_exits_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KVOFFLOAD_IN_PROCESS", "1")
    path = tmp_path / "broken.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 512, "hash_ids": [1]}\nnot json\n')
    assert main(["check", "--trace", str(path), "--quiet", "--no-database",
                 "--report-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "broken.jsonl:2: not a JSON line" in err
    assert "internal error" not in err
