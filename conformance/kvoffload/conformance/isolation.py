"""The ``kvoffload`` command runs in a child process, so that a target cannot end it
with a verdict it did not earn.

A target runs in the suite's process: ``os._exit(0)``, a signal or a crash in C code
ends that process with whatever status the target chose, before any verdict is printed;
a shell or CI job that reads only the exit status would take ``0`` for "conforms". So
:func:`run_isolated` forks: the child does the whole job and, as its very last act,
writes its exit status down a pipe to the parent (:func:`finish`); the parent waits and
exits with that status. A child that ends without writing one did not finish its run:
the parent says how it ended (exit status or signal), and exits 1 (the target does not
conform) if the target was already being checked (:func:`mark_running`), else 2 (the
run could not be made: the target could not be loaded).

The child runs in a process group of its own, and the parent forwards SIGINT and
SIGTERM to it: a Ctrl-C at the terminal reaches the child once, as before (the first
stops the run after the current call, a second at once).

This guards against a target that ends the process, not against one that sets out to
forge a verdict: code running in the suite's process can do anything the suite can.

Where ``os.fork`` is missing (Windows), or with ``KVOFFLOAD_IN_PROCESS=1`` in the
environment, everything runs in one process, unguarded.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from collections.abc import Callable
from contextlib import suppress
from types import FrameType
from typing import NoReturn

IN_PROCESS = "KVOFFLOAD_IN_PROCESS"
"""Environment variable: ``1`` runs the command in one process (no fork)."""
EXIT_FAILS, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130
_RUNNING, _VERDICT = b"R", b"V"


class _Child:
    """The child's end of the pipe (None in the parent, or when not isolated)."""

    fd: int | None = None


def mark_running() -> None:
    """The target is loaded and being checked: a child that dies from now on fails it."""
    if _Child.fd is not None:
        with suppress(OSError):
            os.write(_Child.fd, _RUNNING)


def finish(code: int) -> NoReturn:
    """End the process with ``code`` at once, after flushing the output and, in the
    isolated child, telling the parent that ``code`` is the verdict."""
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):  # closed or broken by the target: nothing to keep
            stream.flush()
    if _Child.fd is not None:
        with suppress(OSError):  # the target closed the pipe: the parent says no verdict
            os.write(_Child.fd, _VERDICT + str(code).encode())
    os._exit(code)


def _status_of(run: Callable[[], int]) -> int:
    """Run the job as the child does: its exit status, whatever way it ends in Python."""
    try:
        return run()
    except SystemExit as exit_:  # argparse's errors and --help, or a target's late exit
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else EXIT_FAILS)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BaseException:
        traceback.print_exc()
        return EXIT_USAGE


def run_isolated(run: Callable[[], int]) -> int:
    """``run()``'s exit status, with the job run in a child process (see the module)."""
    if not hasattr(os, "fork") or os.environ.get(IN_PROCESS) == "1":
        return run()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: do the job, report its status, never return
        os.close(read_end)
        with suppress(OSError):  # not permitted here: the terminal's signals reach both
            os.setpgid(0, 0)
        _Child.fd = write_end
        finish(_status_of(run))
    os.close(write_end)
    return _wait(pid, read_end)


def _wait(pid: int, read_end: int) -> int:
    """The parent: forward signals, read what the child reports, judge how it ended."""
    def forward(signum: int, frame: FrameType | None) -> None:
        with suppress(ProcessLookupError):
            os.kill(pid, signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        received = b""
        while chunk := os.read(read_end, 4096):
            received += chunk
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    verdict = received.rpartition(_VERDICT)
    if verdict[1] and verdict[2].isdigit():
        return int(verdict[2])
    running = _RUNNING in received
    if os.WIFSIGNALED(status):
        how = f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    else:
        how = f"exited with status {os.waitstatus_to_exitcode(status)} (os._exit?)"
    if running:
        print(f"kvoffload: error: the process running the target {how} during the run, "
              f"before its verdict: the target does not conform (exit {EXIT_FAILS}); no "
              "report was written", file=sys.stderr)
        return EXIT_FAILS
    print(f"kvoffload: error: the process {how} while the target was being loaded: the "
          f"run could not be made (exit {EXIT_USAGE})", file=sys.stderr)
    return EXIT_USAGE
