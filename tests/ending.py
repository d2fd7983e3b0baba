"""The tests' process ends without the interpreter's teardown, as pytest would have ended it.

When ``python -m pytest`` (or ``pytest``) has run the default tier, the process holds
about 1.6 million objects: torch, LMCache, vLLM's offloading code, Hypothesis, the
session's explorations and corpora. After its exit handlers, the interpreter's teardown
frees every module and object one by one, which cost about 2.5 s of CPU at the end of
every run (tests/phases measurements, docs/performance.md, ninth pass) and does nothing a
test run needs: the report is written, the session's fixtures are torn down, every child
process is reaped, the exit handlers have run.

:func:`pytest_cmdline_main` (imported into tests/conftest.py, which is among the
conftests pytest loads at start for any run in this repository) notes pytest's exit
status once the session has ended, and registers an exit handler. Python runs that
handler first of all (handlers run last registered, first run), once pytest has
unconfigured and flushed its output; the handler then runs every other exit handler,
flushes the standard streams and ends the process with :func:`os._exit` and the same
status. It ends the process that way only where nothing else could decide the status:

- the process was started as pytest (``python -m pytest`` or the ``pytest`` script), so
  the status is pytest's own and no caller's script runs after it;
- no exception reached the top level after the session (:data:`sys.excepthook` was
  not called), which Python would end with status 1;
- standard output is still the descriptor it was when the session ended: pytest moves
  it to ``/dev/null`` and returns 1 when a flush meets a closed pipe;
- a standard stream that cannot be flushed makes the status 120, as Python's own
  ending does.

In such a process pytest's own last cyclic collections are skipped too: pytest 8.4 and
later collect the whole heap twice as the session ends (its unraisable-exception plugin,
so that a finalizer raising in garbage left in a reference cycle is reported), which took
2.1 s of CPU at the end of the default tier (docs/performance.md, tenth pass). What goes is
that report alone, printed after the summary as a warning: it did not change the status
unless warnings are errors (``-W error``). (Before pytest 8.4, or without this setting,
the teardown's own collection printed Python's "Exception ignored" for such garbage;
skipping the teardown already lost that.) An unraisable exception raised during a test,
by an automatic collection or otherwise, is still reported with that test, as before.

Anywhere else the interpreter ends as usual. Finalizers of objects still alive at the
end (``__del__``, weak-reference callbacks outside :mod:`atexit`) do not run, as in any
process ended by :func:`os._exit`; tests/test_ending.py checks that the statuses, the
output and the exit handlers are those of a plain pytest run.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Generator
from types import TracebackType

import pytest


def started_as_pytest(argv: list[str]) -> bool:
    """``argv`` is that of a process started as ``python -m pytest`` or ``pytest``."""
    if not argv:
        return False
    program = os.path.abspath(argv[0])
    name = os.path.basename(program)
    if name in ("pytest", "py.test"):
        return True
    return name == "__main__.py" and os.path.basename(os.path.dirname(program)) == "pytest"


class _Ending:
    """What the exit handler needs: the status, standard output's identity, a crash."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.stdout = _identity(1)
        self.crashed = False
        self.excepthook = sys.excepthook

    def hook(self, kind: type[BaseException], error: BaseException,
             trace: TracebackType | None) -> None:
        self.crashed = True
        self.excepthook(kind, error, trace)

    def end(self) -> None:
        """Python's own ending from here on, but for the teardown (see the module)."""
        atexit.unregister(self.end)
        if self.crashed or _identity(1) != self.stdout:
            return  # Python's status (1), or pytest's after a closed pipe: teardown as usual
        atexit._run_exitfuncs()
        status = self.status
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                status = 120
        os._exit(status)


def _identity(fd: int) -> tuple[int, int] | None:
    try:
        found = os.fstat(fd)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _this_process(config: pytest.Config) -> bool:
    """The session is that of a process started as pytest with these arguments."""
    return (started_as_pytest(sys.argv)
            and list(config.invocation_params.args) == sys.argv[1:])


def _skip_last_collections(config: pytest.Config) -> None:
    """No cyclic collection at the session's end (see the module); pytest before 8.4 makes
    none and has no setting for it."""
    try:
        from _pytest.unraisableexception import gc_collect_iterations_key
    except ImportError:
        return
    config.stash[gc_collect_iterations_key] = 0


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config) -> Generator[None, object, object]:
    """Note the status the session ended with, for :class:`_Ending`."""
    ours = _this_process(config)
    if ours:
        _skip_last_collections(config)
    status = yield
    if ours and isinstance(status, int):
        ending = _Ending(int(status) & 0xFF)
        sys.excepthook = ending.hook
        atexit.register(ending.end)
    return status
