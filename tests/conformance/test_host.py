"""The judge stands apart (issue 22): hostile targets against ``kvoffload check`` and the
pytest plugin, each in a real process, each ending with its documented exit status
(0 only for a target that conforms, 1 for any misbehaviour of the target, 2 for a run
that cannot be made, 130 the user's interrupt, 143 SIGTERM from outside) within its
budget plus the call timeout, with the report where the user asked.

Each target runs in a real host, a process of its own. The judge runs as the user runs
it, ``kvoffload check`` in a process of its own (:func:`run_check`), where that process
is what a test is about: signals to it, its death, a cheat on its exit status, a host
that outlives it. Where the test is about what the target does in its host (it exits,
forks, hangs, removes the report's folder, takes its time at exit), the judge is
:func:`~kvoffload.conformance.cli.main` in the test's process (:func:`judge_here`): the
same run, host and exit status, without a second interpreter importing the judge
(about 0.3 s of CPU a run), its hosts forks of one host zygote (``python_hosts`` in
tests/conftest.py: about 0.1 s of CPU less a host). A host's own start is the subject
where the judge is a process of its own, and of the hosts started early (below).

The targets live in :mod:`tests.conformance.hostile_hosts` (as source text: each is
written to a file of its own). Budgets are tiny (20 examples of 40 calls) so the
default tier stays fast; the slower cases are marked ``slow``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hostile_hosts as hostile
import pytest

pytestmark = pytest.mark.skipif(os.name != "posix", reason="hosts need POSIX")
pytest_plugins = ["pytester"]

SMALL = ["--max-examples", "20", "--steps", "40", "--seed", "5", "--no-database", "--quiet",
         "--stop-at-first"]
BUDGET_S = 60.0
"""Wall seconds any one of these runs may take (they take a few on a loaded machine)."""


def _target(folder: Path, source: str, name: str = "target.py") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source))
    return path


def run_check(folder: Path, source: str, *options: str, cwd: Path | None = None,
              report: str | None = None) -> subprocess.CompletedProcess[str]:
    """``kvoffload check FILE:Target`` in a process of its own, as a user runs it."""
    path = _target(folder, source)
    report_dir = report if report is not None else str(folder / "r")
    return subprocess.run(
        [sys.executable, "-m", "kvoffload.conformance.cli", "check", f"{path}:Target",
         *SMALL, "--report-dir", report_dir, *options],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=BUDGET_S,
        cwd=cwd, check=False)


def judge_here(folder: Path, source: str, capfd: pytest.CaptureFixture[str],
               *options: str) -> subprocess.CompletedProcess[str]:
    """:func:`run_check`'s run with the judge in this process: ``main`` is what
    ``kvoffload check`` runs, its value the command's exit status; the target is still
    in a host of its own, whose standard error (the target's) is this process's, caught
    by ``capfd`` with the judge's output."""
    from kvoffload.conformance.cli import main

    path = _target(folder, source)
    argv = ["check", f"{path}:Target", *SMALL, "--report-dir", str(folder / "r"), *options]
    capfd.readouterr()
    status = main(argv)
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess(argv, status, out, err)


def _gone(pid: int, within: float = 10.0) -> bool:
    """Has process ``pid`` ended (or become a zombie nobody waits for) within ``within`` s?"""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


# --- cheats: a target that does not conform, and reaches for the verdict ------------


@pytest.mark.parametrize("cheat", [
    pytest.param(name, marks=() if name == "replaces the exit status" else pytest.mark.slow)
    for name in sorted(hostile.CHEATS)])
def test_a_cheat_cannot_reach_the_verdict(tmp_path: Path, cheat: str) -> None:
    done = run_check(tmp_path, hostile.NOT_CONFORMING + hostile.CHEATS[cheat])
    assert done.returncode == 1, (cheat, done.stdout[-2000:], done.stderr[-2000:])
    assert "FAILS" in done.stdout
    assert "CONFORMS" not in done.stdout


@pytest.mark.slow
def test_a_forged_verdict_written_on_every_descriptor_is_garbage(tmp_path: Path) -> None:
    done = run_check(tmp_path, hostile.NOT_CONFORMING + hostile.WRITES_V0_AND_EXITS)
    assert done.returncode == 1, done.stderr
    assert "property 'crash' violated" in done.stdout


# --- the target ends its process ------------------------------------------------------


@pytest.mark.usefixtures("python_hosts")
def test_os_exit_in_a_call_fails_the_target_with_its_trace(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    done = judge_here(tmp_path, hostile.EXITS_IN_A_CALL, capfd)
    assert done.returncode == 1, done.stderr
    assert "property 'crash' violated" in done.stdout
    assert "the host exited with status 0" in done.stdout
    assert "CONFORMS" not in done.stdout
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["violation"]["trace"][-1]["op"] == "complete_store"


@pytest.mark.slow
def test_os_exit_in_a_call_under_the_pytest_plugin_fails_the_item(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    path = _target(tmp_path, hostile.EXITS_IN_A_CALL)
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess(
        f"--kvoffload-target={path}:Target", "--kvoffload-max-examples=20",
        "--kvoffload-steps=40", "--kvoffload-seed=5", "--kvoffload-stop-at-first",
        "-p", "no:cacheprovider",
        timeout=BUDGET_S)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*the host exited with status 0*"])
    result.assert_outcomes(passed=1, failed=1)


@pytest.mark.slow
def test_a_target_that_kills_its_own_process_fails(tmp_path: Path) -> None:
    done = run_check(tmp_path, hostile.KILLS_ITSELF)
    assert done.returncode == 1, done.stderr
    assert "was killed by SIGKILL" in done.stdout


@pytest.mark.usefixtures("python_hosts")
def test_an_exit_while_loading_is_a_run_that_could_not_be_made(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    done = judge_here(tmp_path, "import os\nos._exit(0)\n", capfd)
    assert done.returncode == 2, done.stderr
    assert "exited with status 0" in done.stderr
    assert "could not be made" in done.stderr


# --- hangs: every request is timed ----------------------------------------------------


@pytest.mark.usefixtures("python_hosts")
@pytest.mark.parametrize("when", [1, pytest.param(5, marks=pytest.mark.slow)])
def test_a_constructor_that_never_returns_is_timed(
    tmp_path: Path, when: int, capfd: pytest.CaptureFixture[str]
) -> None:
    """On the first construction the run cannot be made (exit 2); on the fifth, the
    target was built before: a liveness failure (exit 1)."""
    start = time.monotonic()
    done = judge_here(tmp_path, hostile.SLEEPS_ON_CONSTRUCTION.replace("WHEN", str(when)),
                      capfd, "--call-timeout", "0.5")
    if when == 1:
        assert done.returncode == 2, done.stderr
        assert "gave no answer within 1 s" in done.stderr
    else:
        assert done.returncode == 1, done.stderr
        assert "property 'liveness' violated" in done.stdout
        assert "constructing a target" in done.stdout
    assert time.monotonic() - start < BUDGET_S


@pytest.mark.slow
def test_a_call_that_ignores_sigalrm_and_loops_is_liveness(tmp_path: Path) -> None:
    done = run_check(tmp_path, hostile.IGNORES_SIGALRM_AND_LOOPS, "--call-timeout", "0.5")
    assert done.returncode == 1, done.stderr
    assert "property 'liveness' violated" in done.stdout
    assert "did not return within --call-timeout 0.5 s" in done.stdout


@pytest.mark.slow
def test_a_thread_that_never_ends_does_not_hold_the_verdict(tmp_path: Path) -> None:
    done = run_check(tmp_path, hostile.CONFORMING + hostile.ENDLESS_THREAD)
    assert done.returncode == 0, done.stderr
    assert "CONFORMS" in done.stdout


# --- the target's process, signals and descriptors ------------------------------------


def test_a_killed_judge_leaves_no_host_and_no_worker(tmp_path: Path) -> None:
    """SIGKILL to ``kvoffload check``: the host notices (its lifeline) and ends its
    process group, the target's worker with it, and removes its scratch folder."""
    record = tmp_path / "pids"
    path = _target(tmp_path, hostile.STARTS_A_WORKER.replace("RECORD", str(record)))
    temp = tmp_path / "tmp"  # the judge's TMPDIR, where it makes the host's scratch folder
    temp.mkdir()
    judge = subprocess.Popen(
        [sys.executable, "-m", "kvoffload.conformance.cli", "check", f"{path}:Target",
         "--max-examples", "100000", "--no-database", "--quiet", "--call-timeout", "0",
         "--report-dir", str(tmp_path / "r")],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(temp)})
    try:
        deadline = time.monotonic() + BUDGET_S
        while not (record.exists() and len(record.read_text().split()) == 2):
            assert time.monotonic() < deadline, "the target never started its worker"
            time.sleep(0.05)
        host, worker = map(int, record.read_text().split())
        judge.kill()
        judge.wait()
        assert _gone(host), "the host outlived its judge"
        assert _gone(worker), "the target's worker outlived the judge"
        assert list(temp.iterdir()) == [], "the host's scratch folder outlived the judge"
    finally:
        if judge.poll() is None:
            judge.kill()


@pytest.mark.slow
def test_the_targets_own_sigint_is_the_targets_not_the_users(tmp_path: Path) -> None:
    done = run_check(tmp_path, hostile.SENDS_ITSELF_SIGINT)
    assert done.returncode == 1, done.stderr
    assert "raised KeyboardInterrupt" in done.stdout


@pytest.mark.slow
def test_a_fork_in_a_call_does_not_confuse_the_channel(tmp_path: Path) -> None:
    record = tmp_path / "child"
    done = run_check(tmp_path, hostile.FORKS_IN_A_CALL.replace("RECORD", str(record)))
    assert done.returncode == 0, done.stderr
    assert "CONFORMS" in done.stdout
    assert _gone(int(record.read_text())), "the forked child outlived the run"


@pytest.mark.usefixtures("python_hosts")
def test_a_forked_child_that_returns_into_the_host_does_not_answer(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    done = judge_here(tmp_path, hostile.FORK_RETURNS, capfd)
    assert done.returncode == 0, done.stderr
    assert "CONFORMS" in done.stdout


@pytest.mark.slow
def test_closing_descriptor_1_does_not_close_the_channel(tmp_path: Path) -> None:
    done = run_check(tmp_path, hostile.CONFORMING + hostile.CLOSES_FD_1)
    assert done.returncode == 0, done.stderr
    assert "CONFORMS" in done.stdout


@pytest.mark.slow
def test_a_chdir_does_not_move_the_report(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run_check(tmp_path, hostile.CONFORMING + hostile.CHDIR.replace("WHERE", str(elsewhere)),
                     cwd=tmp_path, report="r")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "r" / "report.json").is_file()
    assert not (elsewhere / "r").exists()


@pytest.mark.usefixtures("python_hosts")
def test_a_replaced_report_directory_still_gets_the_report(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    done = judge_here(tmp_path, hostile.NOT_CONFORMING
                      + hostile.REPLACES_DIRECTORY.replace("WHERE", str(tmp_path / "r")), capfd)
    assert done.returncode == 1, done.stderr
    assert json.loads((tmp_path / "r" / "report.json").read_text())["verdict"] == "fails"


@pytest.mark.slow
def test_a_report_directory_replaced_by_a_file_is_one_line_not_an_internal_error(
    tmp_path: Path,
) -> None:
    done = run_check(tmp_path, hostile.NOT_CONFORMING + hostile.REPLACES_DIRECTORY_BY_A_FILE
                     .replace("WHERE", str(tmp_path / "r")))
    assert done.returncode == 1, done.stderr  # the target's verdict stands
    assert "the report could not be written" in done.stderr
    assert "internal error" not in done.stderr


@pytest.mark.slow
def test_the_hosts_randomness_is_its_own(tmp_path: Path) -> None:
    """A target that crashes on one call in twenty, by ``random.random()``: Hypothesis
    reseeds ``random`` in the judge, not in the host (it conformed in 4 of 4 runs)."""
    done = run_check(tmp_path, hostile.RANDOM_CRASH)
    assert done.returncode == 1, done.stderr
    assert "property 'crash' violated" in done.stdout


# --- the user's signals ---------------------------------------------------------------


@pytest.mark.slow
def test_ctrl_c_in_the_first_second_is_130(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "kvoffload.conformance.cli", "check", "--no-database",
         "--report-dir", str(tmp_path / "r")],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.8)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=BUDGET_S)
    assert process.returncode == 130, err
    assert "Traceback" not in err


def test_sigterm_to_the_judge_is_143_and_ends_the_host(tmp_path: Path) -> None:
    record = tmp_path / "pids"
    path = _target(tmp_path, hostile.STARTS_A_WORKER.replace("RECORD", str(record)))
    process = subprocess.Popen(
        [sys.executable, "-m", "kvoffload.conformance.cli", "check", f"{path}:Target",
         "--max-examples", "100000", "--no-database", "--quiet", "--call-timeout", "0",
         "--report-dir", str(tmp_path / "r")],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + BUDGET_S
    while not (record.exists() and len(record.read_text().split()) == 2):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    host, worker = map(int, record.read_text().split())
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=BUDGET_S)
    assert process.returncode == 128 + signal.SIGTERM, err
    assert "terminated (SIGTERM)" in err
    assert _gone(host)
    assert _gone(worker)


# --- the host started before the judge's imports (issue 22, item 5) ---------------------


@pytest.fixture
def early(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """remote, with no host started early left behind by the test."""
    from kvoffload.conformance import remote

    monkeypatch.delenv("KVOFFLOAD_IN_PROCESS", raising=False)
    yield remote
    while remote._EARLY:
        remote._EARLY.pop()[0].kill()


def test_the_run_takes_the_host_started_early(early: Any) -> None:
    from kvoffload.conformance.config import CheckConfig

    early.prestart()
    [(host, _)] = early._EARLY
    with early.target_session("kvoffload.impl:OffloadManager",
                              CheckConfig(capacity=2)) as prepared:
        assert prepared.make_adapter.remote.host is host
        assert not early._EARLY
    assert host.process.poll() is not None  # ended with the run


def test_a_host_started_early_in_another_environment_is_ended_not_taken(
        early: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from kvoffload.conformance.config import CheckConfig

    early.prestart()
    [(host, _)] = early._EARLY
    monkeypatch.setenv("KVOFFLOAD_TEST_SET_AFTER_THE_START", "1")  # the host lacks it
    with early.target_session("kvoffload.impl:OffloadManager",
                              CheckConfig(capacity=2)) as prepared:
        assert prepared.make_adapter.remote.host is not host
        assert host.process.poll() is not None


@pytest.mark.parametrize("args", [["--in-process"], ["--in"], ["--exec", "./toy"],
                                  ["--exec=./toy"], ["exec:./toy"], ["--self-test"],
                                  ["--sel"], ["-h"], ["--help"]])
def test_no_host_starts_early_for_a_run_that_may_need_none(early: Any,
                                                           args: list[str]) -> None:
    from kvoffload.conformance.cli import _start_host_early

    _start_host_early(["--seed", "1", *args])
    assert not early._EARLY


def test_a_check_of_a_python_target_starts_its_host_early(
        early: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from kvoffload.conformance.cli import _start_host_early

    _start_host_early(["kvoffload.impl:OffloadManager", "--seed", "1", "--eviction",
                       "on-store", "--se", "2"])  # --seed and --eviction are no --self-test
    assert len(early._EARLY) == 1
    early._EARLY.pop()[0].kill()
    monkeypatch.setenv("KVOFFLOAD_IN_PROCESS", "1")
    _start_host_early(["--seed", "1"])
    assert not early._EARLY


def test_a_host_whose_answer_cannot_be_sent_ends_its_group(tmp_path: Path) -> None:
    """The judge gone mid-answer: the host's write of an answer fails (EPIPE) before its
    lifeline thread runs. That path, too, ends the group, the target's worker with it
    (found as a flaky test_a_killed_judge_leaves_no_host_and_no_worker on a loaded
    machine: the host died of the broken pipe, its worker lived on). Here the lifeline
    stays open, so only the failed write can end the worker."""
    record = tmp_path / "pids"
    path = _target(tmp_path, hostile.STARTS_A_WORKER.replace("RECORD", str(record)))
    read_end, write_end = os.pipe()
    host = subprocess.Popen(
        [sys.executable, "-m", "kvoffload.conformance.target.host", "--lifeline", str(read_end)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        pass_fds=(read_end,), start_new_session=True)
    os.close(read_end)
    worker = 0
    try:
        assert host.stdin is not None
        assert host.stdout is not None
        hello = {"request": "hello", "protocol": 1, "target": f"{path}:Target",
                 "config": {"capacity": 2}, "python": {"path": sys.path}}
        for request in (hello, {"request": "new", "capacity": 2}):
            host.stdin.write(json.dumps(request).encode() + b"\n")
            host.stdin.flush()
            assert host.stdout.readline(), "the host did not answer"
        worker = int(record.read_text().split()[1])
        host.stdout.close()  # the judge's end of the answers is gone
        call = {"request": "call", "call": {"op": "lookup", "keys": ["a"]}}
        host.stdin.write(json.dumps(call).encode() + b"\n")
        host.stdin.flush()
        assert host.wait(timeout=BUDGET_S) != 0
        assert _gone(worker), "the target's worker outlived its host"
    finally:
        os.close(write_end)
        if host.poll() is None:
            host.kill()
        if worker and not _gone(worker, within=0.1):  # a failed run leaves none behind
            os.kill(worker, signal.SIGKILL)


@pytest.mark.usefixtures("python_hosts")
def test_each_host_runs_its_targets_exit_handlers_after_bye(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """After ``bye`` a host ends through the interpreter's shutdown, the target's exit
    handlers included, within the judge's grace. The judge closed the lifeline together
    with the channel, so the host's lifeline thread killed the group while a handler
    ran (0 to 6 handlers of 6 ran, by the machine's load); a handler that takes 0.3 s
    never finished."""
    record = tmp_path / "rec"
    done = judge_here(tmp_path, hostile.EXIT_HANDLER_TAKES_ITS_TIME.replace("RECORD", str(record)),
                      capfd)
    assert done.returncode == 0, done.stdout + done.stderr
    loaded = Path(f"{record}.loaded").read_text().split()
    assert loaded, "no host loaded the target"
    ended = Path(f"{record}.ended").read_text().split() if Path(f"{record}.ended").exists() else []
    assert sorted(ended) == sorted(loaded), "a host was killed inside its exit handlers"
