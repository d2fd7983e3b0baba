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

Signals: the parent forwards SIGTERM to the child, and a child that then ends without
a verdict was stopped from outside (exit 143, not a failure of the target). SIGINT: at a
terminal (standard input a tty) the child stays in the terminal's process group, so it
gets Ctrl-C itself and can read the terminal (``breakpoint()`` in a target works); the
parent ignores SIGINT. Elsewhere (CI, a subprocess) the child runs in a process group of
its own and the parent forwards SIGINT, so one ``kill -INT`` of the parent, or of its
group, reaches the child once: the first stops the run after the current call, a second
at once, as in one process. The parent waits for the child to exit, not for its pipe to
close, so processes the target forked and left running (a process pool's workers hold
the pipe's write end) do not hold it up. From the command line
(:func:`~kvoffload.conformance.cli.entry`) the child ends through the interpreter's normal shutdown
after reporting its verdict, so the target's exit handlers (a pool's clean-up) run as they would in
one process.

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

from ..errors import EXIT_FAILS, EXIT_INTERRUPTED, EXIT_USAGE

IN_PROCESS = "KVOFFLOAD_IN_PROCESS"
"""Environment variable: ``1`` runs the command in one process (no fork)."""
_RUNNING, _VERDICT = b"R", b"V"


class _Child:
    """The child's end of the pipe (None in the parent, or when not isolated)."""

    fd: int | None = None


def mark_running() -> None:
    """The target is loaded and being checked: a child that dies from now on fails it."""
    _tell(_RUNNING)


def _tell(message: bytes) -> None:
    """Write ``message`` to the parent, in the isolated child (elsewhere, nothing)."""
    if _Child.fd is not None:
        with suppress(OSError):  # the target closed the pipe: the parent says no verdict
            os.write(_Child.fd, message)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # the process started with that descriptor closed
            continue
        with suppress(OSError, ValueError):  # closed or broken by the target: nothing to keep
            stream.flush()


def _report(code: int) -> None:
    """Flush the output and, in the isolated child, tell the parent the verdict."""
    _flush()
    _tell(_VERDICT + str(code).encode())


def finish(code: int) -> NoReturn:
    """End the process with ``code`` at once (no clean-up), after flushing the output
    and, in the isolated child, telling the parent that ``code`` is the verdict."""
    _report(code)
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


def run_isolated(run: Callable[[], int], *, exit_normally: bool = False) -> int:
    """``run()``'s exit status, with the job run in a child process (see the module).

    ``exit_normally``: the child, once it has reported, raises ``SystemExit`` to end
    through the interpreter's shutdown (threads joined, exit handlers run); only for a
    caller that lets it propagate to the top, as the command line does. Otherwise the
    child ends with ``os._exit``.
    """
    if not hasattr(os, "fork") or os.environ.get(IN_PROCESS) == "1":
        return run()
    terminal = _is_terminal()
    _flush()  # nothing buffered is written twice, by the parent and the child
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: do the job, report its status, never return
        os.close(read_end)
        if not terminal:
            with suppress(OSError):  # not permitted here: a group signal reaches both
                os.setpgid(0, 0)
        _Child.fd = write_end
        code = _status_of(run)
        if not exit_normally:
            finish(code)
        _report(code)
        raise SystemExit(code)
    os.close(write_end)
    return _wait(pid, read_end, terminal)


def _is_terminal() -> bool:
    try:
        return os.isatty(sys.stdin.fileno())
    except (AttributeError, OSError, ValueError):  # no stdin, or not a real file
        return False


def _wait(pid: int, read_end: int, terminal: bool) -> int:
    """The parent: pass signals on, wait for the child, judge how it ended."""
    forwarded: list[int] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        forwarded.append(signum)
        with suppress(ProcessLookupError):
            os.kill(pid, signum)

    handlers = {signal.SIGTERM: forward, signal.SIGINT: signal.SIG_IGN if terminal else forward}
    previous = {number: signal.signal(number, handler) for number, handler in handlers.items()}
    try:
        _, status = os.waitpid(pid, 0)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    received = b""
    os.set_blocking(read_end, False)
    with suppress(BlockingIOError):  # a process the child left running holds the pipe open
        while chunk := os.read(read_end, 4096):
            received += chunk
    os.close(read_end)
    verdict = received.rpartition(_VERDICT)
    if verdict[1] and verdict[2].isdigit():
        return int(verdict[2])
    if os.WIFSIGNALED(status):
        how = f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    else:
        how = f"exited with status {os.waitstatus_to_exitcode(status)} (os._exit?)"
    if signal.SIGTERM in forwarded:
        print(f"kvoffload: terminated (SIGTERM) before a verdict: the process {how}; no "
              "report was written", file=sys.stderr)
        return 128 + signal.SIGTERM
    if _RUNNING in received:
        print(f"kvoffload: error: the process running the target {how} during the run, "
              f"before its verdict: the target does not conform (exit {EXIT_FAILS}); no "
              "report was written", file=sys.stderr)
        return EXIT_FAILS
    print(f"kvoffload: error: the process {how} before it reported any progress (while "
          f"the target was being loaded, or the target closed the suite's file "
          f"descriptors): the run could not be made (exit {EXIT_USAGE})", file=sys.stderr)
    return EXIT_USAGE
