"""``kvoffload`` runs its job in a child process: a target that ends the process
(``os._exit``, a signal) or a call that swallows every interrupt gets a verdict that
is never 0 (hostile targets found on 3 December)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kvoffload.conformance.isolation import mark_running, run_isolated

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _exits_quietly() -> int:
    os._exit(0)


def _exits_quietly_while_running() -> int:
    mark_running()
    os._exit(0)


def _killed_while_running() -> int:
    mark_running()
    os.kill(os.getpid(), signal.SIGKILL)
    return 0


def test_the_childs_status_is_the_status() -> None:
    assert run_isolated(lambda: 0) == 0
    assert run_isolated(lambda: 3) == 3


def test_an_exit_while_loading_is_2_and_while_running_is_1(
    capfd: pytest.CaptureFixture[str],
) -> None:
    assert run_isolated(_exits_quietly) == 2
    assert "while the target was being loaded" in capfd.readouterr().err
    assert run_isolated(_exits_quietly_while_running) == 1
    assert "exited with status 0" in capfd.readouterr().err
    assert run_isolated(_killed_while_running) == 1
    assert "killed by SIGKILL" in capfd.readouterr().err


def _check(tmp_path: Path, source: str, *options: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "target.py"
    path.write_text(textwrap.dedent(source))
    return subprocess.run(
        [sys.executable, "-m", "kvoffload.conformance.cli", "check", f"{path}:Target",
         "--max-examples", "40", "--seed", "5", "--no-database", "--quiet",
         "--report-dir", str(tmp_path / "r"), *options],
        capture_output=True, text=True, timeout=300, check=False)


def test_os_exit_inside_a_call_fails_the_target(tmp_path: Path) -> None:
    run = _check(tmp_path, """
        import os
        from kvoffload.impl import OffloadManager
        class Target(OffloadManager):
            def complete_store(self, keys, success=True, ticket=None):
                os._exit(0)
    """)
    assert run.returncode == 1, run.stderr
    assert "during the run" in run.stderr
    assert "CONFORMS" not in run.stdout


def test_os_exit_at_import_is_a_load_error(tmp_path: Path) -> None:
    run = _check(tmp_path, "import os\nos._exit(0)\n")
    assert run.returncode == 2, run.stderr
    assert "while the target was being loaded" in run.stderr


def test_a_call_that_swallows_every_timeout_ends_the_run_as_liveness(tmp_path: Path) -> None:
    run = _check(tmp_path, """
        import time
        from kvoffload.impl import OffloadManager
        class Target(OffloadManager):
            def touch(self, keys):
                while True:
                    try:
                        time.sleep(100)
                    except BaseException:
                        pass
    """, "--call-timeout", "0.3")
    assert run.returncode == 1, run.stderr
    assert "property 'liveness' violated" in run.stdout
    assert "through every interrupt" in run.stdout
