"""Every call into the target goes through :func:`guarded_call`: what counts as the
target's own behaviour, the per-call time limit, and the suite's own interrupt (Ctrl-C).

- **The target's exceptions.** Anything the target raises is its behaviour, recorded
  as the call's answer for the lockstep driver to judge (a rejection of misuse, or a
  ``crash``): ``Exception`` and every other ``BaseException`` too (``SystemExit``,
  ``GeneratorExit``, a ``KeyboardInterrupt`` the target raises itself while the suite's
  own Ctrl-C handler is installed). Only the suite's interrupt and its own
  :class:`~kvoffload.conformance.errors.UsageError` (an adapter that cannot drive the target) pass
  through.
- **The time limit** (``--call-timeout``, seconds; 0: none). While a run is
  :func:`watching` (``run_check`` and reproducers are, through :func:`timed_calls`), on
  Unix, in the main thread, an interval timer (``setitimer(ITIMER_REAL)``) ticks and
  raises :class:`CallTimeout` inside the target once the call in progress has overrun,
  and again at every tick while it still runs (a target that swallows one gets the
  next). The call is then a ``liveness`` failure, with the trace that led to it. A
  call that swallows every one of them and still runs past as long again (at least
  ``STUCK_GRACE`` s more) would never give the run back: under
  :func:`stop_when_stuck` (``kvoffload check``) the run is ended there, as a
  ``liveness`` failure without a report (exit 1). A
  target stuck inside C code (a lock wait, a blocking system call that retries on
  EINTR, a CUDA synchronize) gets the exception only when control returns to Python,
  so it cannot be interrupted in-process. A call that returns late by any route (no
  timer in this thread or on this platform, the exception swallowed) is reported the
  same way when it returns. The run owns ``ITIMER_REAL`` while it lasts; a timer
  already running (``pytest-timeout``'s, say) is put back afterwards with its
  remaining time.
- **Ctrl-C** (:func:`stop_on_sigint`, installed by ``kvoffload check``): the first one
  asks the run to stop after the current call (:class:`Interrupted` is raised there,
  outside the target, and the runner reports what held so far); a second one raises
  ``KeyboardInterrupt`` at once.
"""

from __future__ import annotations

import functools
import signal
import sys
import threading
import time
import typing
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import FrameType
from typing import Any, TextIO, TypeVar

from ..config import DEFAULT_CALL_TIMEOUT
from ..errors import PropertyViolation, UsageError

STUCK_GRACE = 2.0
"""Seconds past its limit, at least, that a call swallowing every interrupt is given
before :func:`stop_when_stuck`'s handler ends the run."""
_HAS_TIMER = hasattr(signal, "setitimer") and hasattr(signal, "SIGALRM")
_F = TypeVar("_F", bound=Callable[..., Any])
_Api = TypeVar("_Api")
_Call = TypeVar("_Call")


class CallTimeout(BaseException):
    """Raised inside the target by the watchdog: the call overran ``--call-timeout``.

    A ``BaseException``, so ``except Exception`` in the target does not swallow it.
    """


class Interrupted(KeyboardInterrupt):
    """The first Ctrl-C: raised after the current call returned, so the run stops with
    a report of what it saw so far (exit 130)."""


class _Guard:
    """Module state: one guarded call runs at a time (the main thread's). Held by one
    instance, :data:`_State`: writing an instance's attribute costs a fifth of writing
    a class's (which also invalidates the type's caches), and each call writes four."""

    started: float | None = None
    """perf_counter() when the call in progress began; None between calls."""
    call: object = None
    """The call in progress (for the message when it will not stop)."""
    on_stuck: Callable[[str], object] | None = None
    """Set by :func:`stop_when_stuck`: called with a message when a call goes on past
    its limit and the grace after it, interrupts notwithstanding."""
    limit = 0.0
    fired = False
    stop_requested = False
    sigint_installed = False


_State = _Guard()


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    started, limit = _State.started, _State.limit
    if started is None or limit <= 0:
        return
    elapsed = time.perf_counter() - started
    if elapsed <= limit:
        return
    _State.fired = True
    stuck = _State.on_stuck
    if stuck is not None and elapsed > limit + max(limit, STUCK_GRACE):
        stuck(f"{_State.call} did not return within --call-timeout {limit:g} s, and went "
              f"on for {elapsed - limit:.1f} s more through every interrupt (it swallows "
              f"them): the run stops here")
    raise CallTimeout


@contextmanager
def watching(timeout: float) -> Iterator[None]:
    """While inside, a call made through :func:`guarded_call` that runs past ``timeout``
    seconds is interrupted: a periodic SIGALRM (every tenth of the timeout, at most 1 s
    apart) checks the call in progress. Per call this costs two attribute writes and a
    clock read, not two system calls. Outside the main thread, on platforms without
    ``setitimer``, or with ``timeout`` 0, nothing is installed (an overrun is still
    reported when the call returns). A timer already running is put back afterwards
    with its remaining time."""
    if timeout <= 0 or not _HAS_TIMER or threading.current_thread() is not \
            threading.main_thread():
        yield
        return
    tick = max(min(timeout / 10, 1.0), 0.005)
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    other = signal.setitimer(signal.ITIMER_REAL, tick, tick)
    begun = time.perf_counter()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        remaining, interval = other
        if remaining > 0:
            spent = time.perf_counter() - begun
            signal.setitimer(signal.ITIMER_REAL, max(remaining - spent, 1e-3), interval)


def timed_calls(function: _F) -> _F:
    """Run ``function(target, config, ...)`` inside :func:`watching`, with the timeout
    of ``config`` (a CheckConfig, or a report's configuration mapping)."""

    @functools.wraps(function)
    def wrapper(target: Any, config: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(config, Mapping):
            timeout = float(config.get("call_timeout", DEFAULT_CALL_TIMEOUT))
        else:
            timeout = float(getattr(config, "call_timeout", DEFAULT_CALL_TIMEOUT))
        with watching(timeout):
            return function(target, config, *args, **kwargs)

    return typing.cast(_F, wrapper)


def guarded_call(
    send: Callable[[_Api, _Call], object], api: _Api, call: _Call, timeout: float
) -> tuple[object, BaseException | None]:
    """Make one call into the target, ``send(api, call)``: (what it returned, None) or
    (None, what it raised).

    ``timeout`` in seconds (0: no limit). Raises PropertyViolation("liveness") when the
    call overran, and :class:`Interrupted` after it returned when a Ctrl-C asked the run
    to stop.
    """
    _State.limit = timeout
    start = time.perf_counter()
    answer: tuple[object, BaseException | None]
    try:
        _State.started, _State.call = start, call
        try:
            answer = (send(api, call), None)
        finally:
            _State.started = None
    except CallTimeout:
        _State.fired = False
        raise overran(call, timeout, time.perf_counter() - start) from None
    except (Interrupted, UsageError):
        raise
    except KeyboardInterrupt as error:
        if not _State.sigint_installed:  # the user's Ctrl-C, with no handler of ours
            raise
        answer = (None, error)  # our handler raises none: the target raised it
    except BaseException as error:  # the target's behaviour, whatever it raised
        answer = (None, error)
    if timeout > 0 and (_State.fired or time.perf_counter() - start > timeout):
        _State.fired = False
        raise overran(call, timeout, time.perf_counter() - start)
    if _State.stop_requested:
        raise Interrupted("stopped by Ctrl-C")
    return answer


def overran(call: object, timeout: float, elapsed: float) -> PropertyViolation:
    """The liveness violation of a call that did not return within ``timeout``."""
    violation = PropertyViolation(
        "liveness", f"{call} did not return within --call-timeout {timeout:g} s "
        f"(stopped after {elapsed:.1f} s)",
        [("call", str(call), str(call)),
         ("answer", f"within {timeout:g} s", f"none after {elapsed:.1f} s")])
    violation.timed_out = True
    return violation


@contextmanager
def stop_when_stuck(stop: Callable[[str], object]) -> Iterator[None]:
    """While inside, a call that goes on past its time limit plus a grace (as long
    again, at least ``STUCK_GRACE`` seconds), swallowing every :class:`CallTimeout`,
    makes the watchdog call ``stop(message)``, which must end the process (the command
    line prints the liveness failure and exits 1): such a call would never give the run
    back. Without it the watchdog only goes on interrupting."""
    previous = _State.on_stuck
    _State.on_stuck = stop
    try:
        yield
    finally:
        _State.on_stuck = previous


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
