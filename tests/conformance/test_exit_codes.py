"""The exit-code contract of ``kvoffload check`` (issue 11): 0 conforms, 1 a property
failed, 2 the run could not be made as asked, 130 interrupted; each with a one-line
reason. One test per case found, exit code and message."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kvoffload.conformance.cli import main
from kvoffload.conformance.command import runner
from kvoffload.conformance.config import MAX_CAPACITY

SMALL = ["--max-examples", "20", "--steps", "40", "--seed", "5", "--quiet"]
TINY = ["--max-examples", "3", "--steps", "10", "--seed", "5", "--quiet"]
"""For runs whose subject is the exit status, the streams or the message, not what the
run finds: the reference conforms on any budget, a target that crashes or answers
wrongly on its first calls fails on any, and a run costs its start-up, its host's and
the judge's calls (20 x 40: about 0.2 s of CPU more a run in a process of its own)."""
REFERENCE = "from kvoffload.impl import OffloadManager\n"

pytestmark = pytest.mark.usefixtures("python_hosts")
"""The judge in this process (:func:`check`) starts its hosts as forks of one host
zygote (tests/conftest.py): the subject is the exit status and its message, not the
host's start. The runs below in a process of their own start their own hosts."""


def check(argv: list[str], report: Path, budget: list[str] = TINY) -> int:
    """``kvoffload check`` in this process, on ``budget``: by default TINY, as the subject
    is the exit status and its message (a crash, an error's text, a clipped answer, an
    adapter's choice), which the first call that shows it decides (SMALL: about 0.13 s
    of CPU more a run, most of it in the shrink)."""
    return main(["check", *argv, *budget, "--report-dir", str(report)])


def write(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source))
    return path


# --- targets that exit or raise -----------------------------------------------------


def test_sys_exit_at_import_is_exit_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "x.py", "import sys\nsys.exit(0)\n")
    assert check([f"{path}:build"], tmp_path / "r") == 2
    captured = capsys.readouterr()
    assert "SystemExit" in captured.err
    assert "CONFORMS" not in captured.out


def test_sys_exit_inside_a_call_is_a_crash_with_its_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "exits.py", """
        from kvoffload.impl import OffloadManager
        class Exits(OffloadManager):
            def lookup(self, key):
                raise SystemExit(0)
    """)
    assert check([f"{path}:Exits"], tmp_path / "r") == 1
    out = capsys.readouterr().out
    assert "property 'crash' violated" in out
    assert "raised SystemExit" in out
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["violation"]["trace"][-1]["op"] == "lookup"


UNPRINTABLE = """
class Bad(Exception):
    def __str__(self):
        raise RuntimeError("no message")
"""
"""An exception whose message fails to print."""


def test_an_error_whose_message_fails_is_still_the_targets_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Regression: formatting the target's error raised inside the suite: exit 2, "the
    # run did not finish", for what is the target's crash.
    path = write(tmp_path, "unprintable.py", UNPRINTABLE + """
from kvoffload.impl import OffloadManager
class Unprintable(OffloadManager):
    def prepare_store(self, keys):
        raise Bad()
""")
    assert check([f"{path}:Unprintable"], tmp_path / "r") == 1
    out = capsys.readouterr().out
    assert "property 'crash' violated" in out
    assert "Bad: <exception str() failed>" in out


def test_an_import_error_whose_message_fails_is_named_not_blamed_on_the_suite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Regression: it was "internal error, please report it: RuntimeError".
    path = write(tmp_path, "badimport.py", UNPRINTABLE + "raise Bad()\n")
    assert check([f"{path}:Target"], tmp_path / "r") == 2
    err = capsys.readouterr().err
    assert "raised Bad: <exception str() failed>" in err
    assert "internal error" not in err


@pytest.mark.parametrize("as_path", [False, True])
def test_a_target_whose_import_raises_is_exit_2_with_its_error(
    tmp_path: Path, as_path: bool, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "broken_target_mod.py", "raise ValueError('no config file')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    target = (f"{tmp_path}/broken_target_mod.py:Manager" if as_path
              else "broken_target_mod:Manager")
    assert check([target], tmp_path / "r") == 2
    err = capsys.readouterr().err
    assert "ValueError: no config file" in err
    assert err.count("\n") == 1, err  # one line, no traceback


def test_an_empty_target_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check([""], tmp_path) == 2
    captured = capsys.readouterr()
    assert "TARGET is empty" in captured.err
    assert "CONFORMS" not in captured.out


@pytest.mark.parametrize("option", ["--report-dir", "--junit"])
def test_an_unwritable_output_is_exit_2_before_running(
    tmp_path: Path, option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    where = blocker / "sub" / ("junit.xml" if option == "--junit" else "")
    argv = ["check", *SMALL, option, str(where)]
    if option == "--junit":
        argv += ["--report-dir", str(tmp_path / "r")]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert f"error: {option}" in captured.err
    assert "CONFORMS" not in captured.out
    assert not list(tmp_path.glob("r/report.json"))


# --- adapters -----------------------------------------------------------------------

VLLM_STYLE = """
    class ReqContext:
        def __init__(self, req_id=""):
            self.req_id = req_id

    class Spec:
        def __init__(self, ids):
            self.block_ids = ids

    class Manager:
        def __init__(self, num_blocks, cache_policy="lru", enable_events=False):
            self.num_blocks, self.cache_policy = num_blocks, cache_policy

        def lookup(self, key, req_context) -> bool | None:
            return False

        def prepare_load(self, keys, req_context):
            return Spec([])

        def complete_load(self, keys):
            pass

        def prepare_store(self, keys, req_context):
            return None

        def complete_store(self, keys, success=True):
            pass
"""


def test_a_vllm_style_factory_is_driven_by_a_vllm_adapter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # In process: the test reads what the factory saw from its module, in this process
    # (in a host, the target's module lives in the host).
    monkeypatch.setenv("KVOFFLOAD_IN_PROCESS", "1")
    path = write(tmp_path, "lru_ok.py", VLLM_STYLE + """
    SEEN = []

    def Factory(num_blocks, cache_policy="lru", enable_events=False):
        SEEN.append(cache_policy)
        return Manager(num_blocks, cache_policy=cache_policy, enable_events=enable_events)
    """)
    # The manager rejects every store: a real failure, judged by the vLLM adapter
    # (exit 1, property rejection), not a crash of the native API on a vLLM object.
    assert check([f"{path}:Factory", "--profile", "safe", "--policy", "arc"],
                 tmp_path / "r") == 1
    out = capsys.readouterr().out
    assert "adapter        vllm-bool (factory building (one probe instance) Manager" in out
    assert "property 'crash'" not in out
    module = sys.modules[next(n for n in sys.modules if n.endswith("lru_ok_py"))]
    assert set(module.SEEN) == {"arc"}  # vLLM's spelling, cache_policy=


def test_when_no_adapter_fits_exit_2_names_those_tried(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "odd.py", """
        class Odd:
            def __init__(self, capacity):
                pass

            def lookup(self, a, b, c):
                return None
    """)
    assert check([f"{path}:Odd"], tmp_path / "r") == 2
    err = capsys.readouterr().err
    for name in ("no adapter fits", "native", "vllm-int", "vllm-bool", "vllm-enum",
                 "--adapter"):
        assert name in err
    assert err.count("\n") == 1


def test_a_missing_req_context_is_an_adapter_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "noctx.py", VLLM_STYLE.replace("class ReqContext", "class Other"))
    assert check([f"{path}:Manager", "--profile", "safe"], tmp_path / "r") == 2
    captured = capsys.readouterr()
    assert "ReqContext" in captured.err
    assert "crash" not in captured.out


def test_a_file_target_imports_its_sibling_modules(tmp_path: Path) -> None:
    write(tmp_path, "sibling_impl_mod.py", REFERENCE + "Built = OffloadManager\n")
    path = write(tmp_path, "entry.py", "from sibling_impl_mod import Built\n")
    assert check([f"{path}:Built"], tmp_path / "r") == 0
    assert str(tmp_path) not in sys.path


# --- bounded runs -------------------------------------------------------------------


def test_a_call_that_overruns_the_timeout_is_a_liveness_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unshrunk: every candidate of a shrink replays in a new host, most with a 0.2 s
    busy call (7 of the run's 12 replays, a third of its 5 s of CPU), and a hang's
    shrink is not what this test claims; test_isolation.py's
    ``test_a_call_that_swallows_every_timeout_ends_the_run_as_liveness`` shrinks one.

    The hang sleeps in its loop: the judge ends a host that overruns with SIGKILL,
    whatever the call does, so spinning was only CPU burnt (0.2 s in each of the 7
    hosts that time out). A call that spins and ignores SIGALRM is
    test_host.py's ``test_a_call_that_ignores_sigalrm_and_loops_is_liveness`` (slow)."""
    monkeypatch.setattr(runner, "shrink", lambda make_adapter, config, found, **_: found)
    path = write(tmp_path, "hangs.py", """
        import time
        from kvoffload.impl import OffloadManager
        class Hangs(OffloadManager):
            def touch(self, keys):
                while True:
                    try:
                        time.sleep(0.01)
                    except Exception:  # a target that swallows errors is still stopped
                        pass
    """)
    assert check([f"{path}:Hangs", "--call-timeout", "0.2"], tmp_path / "r", SMALL) == 1
    out = capsys.readouterr().out
    assert "property 'liveness' violated" in out
    assert "touch(" in out
    assert "did not return within --call-timeout 0.2 s" in out
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert [v["property"] for v in report["violations"]] == ["liveness"]
    assert report["run"]["examples"] < 20  # a hang ends the run: no 10 s wait per example


def test_capacity_is_bounded_and_help_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check(["--capacity", "1000000000"], tmp_path) == 2
    assert f"1 to {MAX_CAPACITY}" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"1 to {MAX_CAPACITY}" in text
    assert "130 interrupted" in text
    assert "2 the run could not be made" in text


def test_a_huge_answer_is_clipped_in_output_and_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "huge.py", """
        from kvoffload.impl import OffloadManager
        from dataclasses import replace

        HUGE = tuple(range(2_000_000))  # made once: the suite's cost is the test's

        class Huge(OffloadManager):
            def prepare_store(self, keys):
                plan = super().prepare_store(keys)
                if hasattr(plan, "slots"):
                    return replace(plan, slots=HUGE)
                return plan
    """)
    assert check([f"{path}:Huge"], tmp_path / "r") == 1
    out = capsys.readouterr().out
    assert "... (1,999,936 more)" in out  # 64 of the 2,000,000 slots shown, the rest counted
    assert len(out) < 50_000
    assert (tmp_path / "r" / "report.json").stat().st_size < 100_000


# --- interrupts (a real SIGINT, so a subprocess) ------------------------------------

SLOW = REFERENCE + """
import pathlib, time

class Slow(OffloadManager):
    def lookup(self, key):
        pathlib.Path("STARTED").touch()
        time.sleep(SECONDS)
        return super().lookup(key)
"""


def _start(tmp_path: Path, seconds: float) -> subprocess.Popen[str]:
    """``kvoffload check`` of a target whose lookups take ``seconds``, once one has begun
    (not after a fixed wait: half a second of the run was CPU spent for nothing, and on a
    loaded machine too short a wait for the first lookup)."""
    started = tmp_path / "lookup-started"
    path = write(tmp_path, "slow.py",
                 SLOW.replace("SECONDS", str(seconds)).replace("STARTED", str(started)))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "kvoffload.conformance.cli", "check", f"{path}:Slow",
         "--seed", "9", "--call-timeout", "0", "--report-dir", str(tmp_path / "r")],
        stdin=subprocess.DEVNULL,  # not a terminal: the parent passes SIGINT on
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert process.stderr is not None
    assert "checking" in process.stderr.readline()  # the run has begun
    deadline = time.monotonic() + 60
    while not started.exists():  # a lookup has begun: the run is in its calls
        assert time.monotonic() < deadline, "no lookup within 60 s"
        time.sleep(0.01)
    return process


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_the_first_ctrl_c_stops_after_the_call_and_writes_the_report(tmp_path: Path) -> None:
    process = _start(tmp_path, 0.001)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "interrupted by Ctrl-C" in err
    assert "INTERRUPTED" in out
    assert "held so far" in out
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["verdict"] == "interrupted"
    assert report["configuration"]["seed"] == 9
    assert report["run"]["steps"] > 0


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_second_ctrl_c_exits_at_once(tmp_path: Path) -> None:
    process = _start(tmp_path, 60)  # one call takes a minute: only the second stops it
    process.send_signal(signal.SIGINT)
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert "a second Ctrl-C" in err


def test_a_constructor_that_exits_later_is_no_false_green(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first instance builds; a later one raises SystemExit(0) (an example's
    target): never 0. Since issue 22 it is the target's failure (a ``crash`` of its
    construction, exit 1): once the target has been built, a construction that fails
    is the target's doing (was exit 2, "the run cannot finish")."""
    path = write(tmp_path, "exits_later.py", """
        import sys
        from kvoffload.impl import OffloadManager
        BUILT = []

        def build(capacity):
            BUILT.append(capacity)
            if len(BUILT) > 2:
                sys.exit(0)
            return OffloadManager(capacity)
    """)
    assert check([f"{path}:build"], tmp_path / "r") == 1
    captured = capsys.readouterr()
    assert "property 'crash' violated" in captured.out
    assert "raised SystemExit" in captured.out
    assert "an earlier construction succeeded" in captured.out
    assert "CONFORMS" not in captured.out


def test_a_directory_as_target_is_named_as_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check([f"{tmp_path}:Target"], tmp_path / "r") == 2
    assert "is a directory" in capsys.readouterr().err


@pytest.mark.parametrize("closed", ["stdout", "stdout and stderr"])
def test_a_reader_that_goes_away_leaves_the_verdict_as_it_is(tmp_path: Path, closed: str) -> None:
    # Regression: `kvoffload corpus replay DIR | head -1` printed a BrokenPipeError
    # traceback and exited 2 when head closed the pipe before the last line.
    process = subprocess.Popen(
        [sys.executable, "-m", "kvoffload.conformance.cli", "check", *TINY[:-1],
         "--report-dir", str(tmp_path / "r")],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if closed == "stdout and stderr" else subprocess.PIPE)
    assert process.stdout is not None
    process.stdout.close()  # the reader is gone before the first line
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0  # the reference conforms, printed or not
    assert json.loads((tmp_path / "r" / "report.json").read_text())["verdict"] == "conforms"
    assert b"Traceback" not in (err or b"")  # with stderr closed too, the status tells
    assert b"BrokenPipe" not in (err or b"")


@pytest.mark.parametrize("closed", [">&-", "2>&-"])
@pytest.mark.parametrize("command", ["demo", "check"])
def test_a_command_started_with_an_output_closed_runs_to_its_verdict(
    tmp_path: Path, command: str, closed: str
) -> None:
    # Regression: with a descriptor closed at start, Python's stream is None; the
    # parent's flush before forking failed on it (AttributeError, exit 1).
    options = "" if command == "demo" else f"{' '.join(TINY)} --report-dir {tmp_path / 'r'}"
    done = subprocess.run(["sh", "-c", f"exec {sys.executable} -m kvoffload.conformance.cli "
                           f"{command} {options} {closed}"], capture_output=True, timeout=300,
                          check=False)
    assert done.returncode == 0
    assert b"Traceback" not in done.stderr
    if command == "check":
        assert json.loads((tmp_path / "r" / "report.json").read_text())["verdict"] == "conforms"
