"""Every call into the target goes through :func:`call_target`: what counts as the
target's own behaviour, the per-call time limit, and the suite's own interrupt (Ctrl-C).

- **The target's exceptions.** Anything the target raises is its behaviour, recorded
  as the call's answer for the lockstep driver to judge (a rejection of misuse, or a
  ``crash``): ``Exception`` and every other ``BaseException`` too (``SystemExit``,
  ``GeneratorExit``, a ``KeyboardInterrupt`` the target raises itself while the suite's
  own Ctrl-C handler is installed). Only the suite's interrupt and its own
  :class:`~.errors.UsageError` (an adapter that cannot drive the target) pass through.
- **The time limit** (``--call-timeout``, seconds; 0: none). On Unix, in the main
  thread, an interval timer (``setitimer(ITIMER_REAL)``) raises :class:`CallTimeout`
  inside the target when the call overruns, and again every second while it still
  runs (a target that swallows the first one gets the next). The call is then a
  ``liveness`` failure, with the trace that led to it. A target stuck inside C code
  (a lock wait, a blocking system call that retries on EINTR, a CUDA synchronize) gets
  the exception only when control returns to Python, so it cannot be interrupted
  in-process. A call that returns late by any route (no timer in this thread or on
  this platform, the exception swallowed) is reported the same way when it returns.
  Another timer already running in the process (``pytest-timeout``'s, say) is put back
  with its remaining time after each call.
- **Ctrl-C** (:func:`stop_on_sigint`, installed by ``kvoffload check``): the first one
  asks the run to stop after the current call (:class:`Interrupted` is raised there,
  outside the target, and the runner reports what held so far); a second one raises
  ``KeyboardInterrupt`` at once.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any, TextIO

from .errors import PropertyViolation, UsageError

_HAS_TIMER = hasattr(signal, "setitimer") and hasattr(signal, "SIGALRM")
_REPEAT_S = 1.0
"""After the first timeout, how often the timer fires again while the call still runs."""


class CallTimeout(BaseException):
    """Raised inside the target by the interval timer: the call overran ``--call-timeout``.

    A ``BaseException``, so ``except Exception`` in the target does not swallow it.
    """


class Interrupted(KeyboardInterrupt):
    """The first Ctrl-C: raised after the current call returned, so the run stops with
    a report of what it saw so far (exit 130)."""


@dataclass
class Answer:
    """What one call into the target did: returned ``value`` or raised ``error``."""

    value: object = None
    error: BaseException | None = None


class _State:
    """Module state: at most one guarded call runs at a time (the main thread's)."""

    armed = False
    """The timer belongs to a call in progress (so SIGALRM is ours to turn into CallTimeout)."""
    fired = False
    stop_requested = False
    sigint_installed = False
    previous_alarm: Any = None


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    if _State.armed:
        _State.fired = True
        raise CallTimeout
    previous = _State.previous_alarm
    if callable(previous):  # someone else's timer: theirs to handle
        previous(signum, frame)


def _timer_usable() -> bool:
    if not _HAS_TIMER or threading.current_thread() is not threading.main_thread():
        return False
    handler = signal.getsignal(signal.SIGALRM)
    if handler is not _on_alarm:
        _State.previous_alarm = handler
        signal.signal(signal.SIGALRM, _on_alarm)
    return True


def call_target(action: Callable[[], object], call: object, timeout: float) -> Answer:
    """Make one call into the target (``action``) and return what it did.

    ``call`` is what the trace shows (for the liveness message); ``timeout`` in seconds
    (0: no limit). Raises PropertyViolation("liveness") when the call overran, and
    :class:`Interrupted` after it returned when a Ctrl-C asked the run to stop.
    """
    timed = timeout > 0 and _timer_usable()
    start = time.perf_counter()
    other: tuple[float, float] = (0.0, 0.0)
    answer: Answer
    try:
        if timed:
            _State.fired = False
            _State.armed = True
            other = signal.setitimer(signal.ITIMER_REAL, timeout, _REPEAT_S)
        try:
            answer = Answer(action())
        finally:
            if timed:
                _State.armed = False
                _restore(other, time.perf_counter() - start)
    except CallTimeout:
        raise _overran(call, timeout, time.perf_counter() - start) from None
    except (Interrupted, UsageError):
        raise
    except KeyboardInterrupt as error:
        if not _State.sigint_installed:  # the user's Ctrl-C, with no handler of ours
            raise
        answer = Answer(error=error)  # our handler raises none: the target raised it
    except BaseException as error:  # the target's behaviour, whatever it raised
        answer = Answer(error=error)
    elapsed = time.perf_counter() - start
    if timeout > 0 and (_State.fired or elapsed > timeout):
        _State.fired = False
        raise _overran(call, timeout, elapsed)
    if _State.stop_requested:
        raise Interrupted("stopped by Ctrl-C")
    return answer


def _restore(other: tuple[float, float], elapsed: float) -> None:
    """Stop our timer, or give back the one that was running before the call."""
    remaining, interval = other
    if remaining > 0:
        signal.setitimer(signal.ITIMER_REAL, max(remaining - elapsed, 1e-6), interval)
    else:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _overran(call: object, timeout: float, elapsed: float) -> PropertyViolation:
    return PropertyViolation(
        "liveness", f"{call} did not return within --call-timeout {timeout:g} s "
        f"(stopped after {elapsed:.1f} s)",
        [("call", str(call), str(call)),
         ("answer", f"within {timeout:g} s", f"none after {elapsed:.1f} s")])


def stop_requested() -> bool:
    """Has a Ctrl-C asked the run to stop?"""
    return _State.stop_requested


@contextmanager
def stop_on_sigint(stream: TextIO | None = None) -> Iterator[None]:
    """While inside: the first Ctrl-C stops the run after the current call (the runner
    reports what it saw); a second raises KeyboardInterrupt at once. Outside the main
    thread nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    out = stream if stream is not None else sys.stderr

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        if _State.stop_requested:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            _State.sigint_installed = False
            raise KeyboardInterrupt
        _State.stop_requested = True
        print("\nkvoffload: stopping after the current call (Ctrl-C again to quit at once)",
              file=out, flush=True)

    previous = signal.signal(signal.SIGINT, on_sigint)
    _State.stop_requested, _State.sigint_installed = False, True
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _State.stop_requested, _State.sigint_installed = False, False
