"""tests/ending.py: a pytest run ends with pytest's status, its whole output and its exit
handlers, but without the interpreter's teardown. Each scenario runs pytest in a project
of its own twice, once with the ending (its conftest imports the hook, as tests/conftest.py
does) and once without, and both must give the same status, output and exit handlers'
files; only the teardown differs (a finalizer that runs at teardown writes its file in
the plain run alone)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ending import started_as_pytest

TESTS = Path(__file__).parent

MODULE = '''
import atexit, pathlib

class Finalized:
    def __del__(self, write=pathlib.Path("finalized").absolute().write_text):
        write("teardown ran")  # the module's names may be gone by then, not its arguments

KEPT = Finalized()  # alive until the interpreter's teardown frees the module
atexit.register(pathlib.Path("exit-handler").write_text, "ran")
'''

SCENARIOS = {
    "passed": "def test_ok():\n    print('x' * 100)\n",
    "failed": "def test_ok():\n    pass\n\ndef test_not():\n    assert 1 == 2\n",
    "exit 3": "import pytest\n\ndef test_stops():\n    pytest.exit('stop', returncode=3)\n",
    "nothing collected": "X = 1\n",
    "much output": "def test_loud():\n    print('y' * 400_000)\n    assert False\n",
}


def _project(root: Path, name: str, body: str, ending: bool, conftest_extra: str = "") -> Path:
    slug = re.sub(r"\W", "-", name)
    folder = root / f"{slug}-{'ending' if ending else 'plain'}"
    folder.mkdir()
    (folder / "conftest.py").write_text(
        ("from ending import pytest_cmdline_main  # noqa: F401\n" if ending else "")
        + conftest_extra)
    (folder / "test_it.py").write_text(MODULE + body)
    return folder


def _env() -> dict[str, str]:
    """The tests' folder importable (for ``ending``), and no plugin loaded by its entry
    point (Hypothesis, kvoffload's, xdist: about 0.5 s of CPU a run, none of them needed
    here)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path[1:]]),
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    return env


def _run(folder: Path, command: list[str] | None = None) -> tuple[int, str, str, list[str]]:
    env = _env()
    done = subprocess.run(
        command or [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=120, check=False)
    out = re.sub(r" in [0-9.]+s", " in Ts", done.stdout)
    return done.returncode, out, done.stderr, sorted(p.name for p in folder.iterdir()
                                                     if p.name in ("exit-handler", "finalized"))


CYCLE = ("import gc\n\nclass Raises:\n    def __del__(self):\n"
         "        raise RuntimeError('raised by a finalizer')\n\n"
         "def test_leaves_a_cycle():\n    gc.disable()\n"
         "    cycle = Raises()\n    cycle.me = cycle\n")
"""A last test that leaves garbage in a reference cycle whose finalizer raises."""


def test_a_failed_run_ends_with_its_status_output_and_exit_handlers_without_teardown(
    tmp_path: Path,
) -> None:
    """... and without pytest's last collections (the cycle's finalizer never runs)."""
    body = SCENARIOS["failed"] + "\n" + CYCLE
    status, out, err, files = _run(_project(tmp_path, "failed", body, True))
    assert status == 1
    assert out.rstrip().endswith("1 failed, 2 passed in Ts")
    assert files == ["exit-handler"]  # no "finalized": the teardown did not run
    assert "raised by a finalizer" not in err


@pytest.mark.wide
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_each_run_ends_as_a_plain_pytest_run_but_for_the_teardown(
    tmp_path: Path, name: str
) -> None:
    ending = _run(_project(tmp_path, name, SCENARIOS[name], True))
    plain = _run(_project(tmp_path, name, SCENARIOS[name], False))
    assert ending[:3] == plain[:3]
    assert ending[3] == ["exit-handler"]
    assert plain[3] == ["exit-handler", "finalized"]


@pytest.mark.wide
def test_an_error_after_the_session_ends_the_run_as_python_would(tmp_path: Path) -> None:
    """A hook that raises after pytest returned its status: Python prints the traceback and
    ends with status 1, teardown included."""
    extra = "def pytest_unconfigure(config):\n    raise RuntimeError('at the end')\n"
    ending = _run(_project(tmp_path, "raises", SCENARIOS["passed"], True, extra))
    plain = _run(_project(tmp_path, "raises", SCENARIOS["passed"], False, extra))
    assert ending[0] == plain[0] != 0
    assert ending[1] == plain[1]
    assert ending[2].splitlines()[-1] == plain[2].splitlines()[-1] == "RuntimeError: at the end"
    assert ending[3] == plain[3] == ["exit-handler", "finalized"]  # Python's own ending


@pytest.mark.wide
def test_a_reader_that_goes_away_gives_the_status_pytest_gives(tmp_path: Path) -> None:
    """Standard output is a pipe closed before pytest's summary: pytest returns 1 and moves
    its output to /dev/null; the ending leaves that run to Python's own ending."""
    statuses = []
    for ending in (True, False):
        folder = _project(tmp_path, "closed", SCENARIOS["much output"], ending)
        env = _env()
        read, write = os.pipe()
        os.close(read)
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-rA"], cwd=folder, env=env, stdout=write,
                              stderr=subprocess.PIPE, timeout=120, check=False)
        os.close(write)
        statuses.append(done.returncode)
    assert statuses[0] == statuses[1] != 0


@pytest.mark.wide
def test_pytest_main_in_a_script_leaves_the_ending_to_the_script(tmp_path: Path) -> None:
    folder = _project(tmp_path, "script", SCENARIOS["passed"], True)
    script = "import sys, pytest\nsys.exit(pytest.main(['-q', '-p', 'no:cacheprovider']) + 7)\n"
    status, _, _, files = _run(folder, [sys.executable, "-c", script])
    assert status == 7
    assert files == ["exit-handler", "finalized"]


@pytest.mark.wide
def test_the_session_ends_without_pytest_s_last_collections(tmp_path: Path) -> None:
    """Garbage left in a reference cycle by the last test, whose finalizer raises: a plain
    run reports it on stderr (pytest's warning after the summary, from its last
    collections, in pytest 8.4 and later; else Python's own "Exception ignored" from the
    teardown); the ending skips both (see tests/ending.py), as the default tier's failed
    run checks. Same status either way."""
    ending = _run(_project(tmp_path, "cycle", CYCLE, True))
    plain = _run(_project(tmp_path, "cycle", CYCLE, False))
    assert ending[0] == plain[0] == 0
    assert "raised by a finalizer" in plain[2]
    assert "raised by a finalizer" not in ending[2]


def test_only_a_process_started_as_pytest_ends_so() -> None:
    main = str(Path(pytest.__file__).with_name("__main__.py"))
    assert started_as_pytest([main, "-q"])
    assert started_as_pytest(["/venv/bin/pytest"])
    assert not started_as_pytest(["-c", "-q"])
    assert not started_as_pytest(["/work/tool/__main__.py"])
    assert not started_as_pytest([])
