"""tests/zygote.py: a script run in a fork of the zygote is what ``python SCRIPT`` would
be, its exit status included (so a reproducer that does not reproduce still fails its
test), and a zygote that has imported kvoffload runs nothing. Preloading nothing here, so
each zygote starts in a fraction of a second."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from zygote import Zygote, ZygoteError


@pytest.fixture(scope="module")
def bare() -> Iterator[Zygote]:
    """One zygote for the module (each run is a fork of it, which changes nothing in
    it; a zygote's start is about 0.05 s of CPU): a test that closes one makes its own."""
    zygote = Zygote(preload=())
    yield zygote
    zygote.close()


SCRIPT = """\
import os, sys
print("argv", sys.argv[1:], "path0", sys.path[0] == os.path.dirname(os.path.abspath(__file__)))
print("cwd", os.getcwd())
print("main", __name__, "kvoffload" in sys.modules)
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


@pytest.mark.parametrize("status", [0, 1, 2])
def test_a_script_gets_its_argv_folder_streams_and_exit_status(
    bare: Zygote, tmp_path: Path, status: int
) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    (tmp_path / "work").mkdir()
    got = bare.run([str(script), str(status)], tmp_path / "work", timeout=60)
    fresh = subprocess.run([sys.executable, str(script), str(status)], cwd=tmp_path / "work",
                           capture_output=True, text=True, check=False)
    assert got == (fresh.returncode, fresh.stdout, fresh.stderr) == (
        status, f"argv ['{status}'] path0 True\ncwd {tmp_path / 'work'}\nmain __main__ False\n",
        "to stderr\n")


ENDING = """\
import atexit, sys, threading, time
atexit.register(print, "atexit ran")
def late():
    time.sleep(0.2)
    print("the thread ended", flush=False)
threading.Thread(target=late).start()
print("main ends", flush=False)
sys.exit(eval(sys.argv[1]))
"""


@pytest.mark.parametrize("code", ["None", "3", "257", "-1", "'a message'"])
def test_a_script_ends_as_python_ends_it(bare: Zygote, tmp_path: Path, code: str) -> None:
    """The child ends by ``os._exit`` without the interpreter's teardown: what comes
    before it (threads joined, exit handlers, streams flushed, the status ``sys.exit``
    gives) is python's own."""
    script = tmp_path / "script.py"
    script.write_text(ENDING)
    got = bare.run([str(script), code], tmp_path, timeout=60)
    fresh = subprocess.run([sys.executable, str(script), code], cwd=tmp_path,
                           capture_output=True, text=True, check=False)
    assert got == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert got[1] == "main ends\nthe thread ended\natexit ran\n"


def test_an_uncaught_exception_exits_1_with_its_traceback(bare: Zygote, tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text("print('before')\nraise ValueError('the answer differs')\n")
    status, out, err = bare.run([str(script)], tmp_path, timeout=60)
    assert (status, out) == (1, "before\n")
    assert err.endswith("ValueError: the answer differs\n")


def test_a_script_past_its_timeout_is_killed(bare: Zygote, tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    status, out, _ = bare.run([str(script)], tmp_path, timeout=0.5)
    assert (status, out) == (None, "started\n")
    script.write_text("print('next')\n")  # the zygote goes on serving
    assert bare.run([str(script)], tmp_path, timeout=60) == (0, "next\n", "")


def test_a_zygote_that_imported_kvoffload_runs_nothing(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text("print('ran')\n")
    zygote = Zygote(preload=("kvoffload.spec",))
    try:
        with pytest.raises(ZygoteError, match=r"not a clean interpreter.*'kvoffload\.spec'"):
            zygote.run([str(script)], tmp_path, timeout=60)
    finally:
        zygote.close()


def test_a_spawned_script_runs_beside_the_next_run(tmp_path: Path) -> None:
    # tests/host_zygote.py's zygote is such a fork of the LMCache zygote.
    bare = Zygote(preload=())  # its own: closed here
    waits = tmp_path / "waits.py"
    waits.write_text("import pathlib, time\npathlib.Path('started').write_text('')\n"
                     "time.sleep(120)\n")
    try:
        pid = bare.spawn([str(waits)], tmp_path)
        quick = tmp_path / "quick.py"
        quick.write_text("print('beside it')\n")
        assert bare.run([str(quick)], tmp_path, timeout=60) == (0, "beside it\n", "")
        for _ in range(600):
            if (tmp_path / "started").exists():
                break
            time.sleep(0.05)
        assert (tmp_path / "started").exists()
        os.kill(pid, signal.SIGKILL)  # whoever spawns one ends it
        bare.close()  # the zygote waits for it before it ends
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    finally:
        bare.close()
