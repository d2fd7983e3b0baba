"""The suite's host for Python targets: ``python -m kvoffload.conformance.target.host``.

The judge (``kvoffload check``, the pytest plugin) starts this program as a process of
its own, in a session and process group of its own, and speaks the call protocol
(:mod:`.protocol`, docs/protocol.md) with it. The host loads the target, builds one
instance at a time when asked, makes each call it is sent through the target's adapter
and sends back the adapter's reading of the answer, and nothing else: no spec, no
verdict, no report. Whatever the target does (ends the process, hangs, patches the
suite's modules, writes on the descriptors, forks) happens here, where the judge only
sees answers, a closed channel or silence.

- **The channel.** The host takes the protocol's descriptors (its standard input and
  output) for itself as soon as it starts, then points descriptor 0 at the null device
  and descriptor 1 at standard error: a target's ``print`` goes to standard error, and a
  target that closes or writes on descriptor 1 does not touch the channel.
- **Lifetime.** ``--lifeline FD`` is the read end of a pipe whose write end only the
  judge holds: a thread waits on it, and when it reads end of file (the judge is gone,
  however it ended, SIGKILL included) it kills the host's whole process group, so the
  processes a target started (a pool's workers) end with it. End of file on the
  channel does the same, and so does an answer that cannot be sent (the judge gone
  mid-answer) or any failure of the host's own.
- **Signals.** The host is in a session of its own: the terminal's Ctrl-C reaches the
  judge only. A SIGINT the target sends itself raises ``KeyboardInterrupt`` inside the
  call, an answer like any other exception (a ``crash``); between calls it is ignored.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from types import FrameType
from typing import Any

from kvoffload.spec.calls import Call, send

from ..adapter_api import Adapter
from ..errors import TargetLoadError, Untranslatable, UsageError
from . import engine_record
from .polling import Poller
from .protocol import (
    PROTOCOL_VERSION,
    SCRATCH,
    ProtocolError,
    dumps,
    hello_answer,
    loads,
    raised_message,
    read_call_line,
    refused_message,
    untranslatable_message,
    value_line,
    value_message,
)

POLL_S = 0.005
"""Seconds the host polls for the next request before it sleeps, while polling pays
(:mod:`.polling`): within a check the judge's next calls mostly come sooner; between
examples, or while the judge shrinks or reports, the host sleeps."""


class Requests:
    """The judge's requests, line by line, from the non-blocking descriptor ``fd``:
    each wait polled first while polling pays (:mod:`.polling`), then slept."""

    def __init__(self, fd: int, poller: Poller) -> None:
        self.fd, self.poller = fd, poller
        os.set_blocking(fd, False)
        self.lines: deque[bytes] = deque()
        """Complete lines read and not yet taken (a write of the judge often holds
        several calls)."""
        self.rest = b""
        """What was read after the last complete line."""

    def readline(self) -> bytes:
        """The next request's line, with its newline; at the end of the channel a last
        line without one, then b""."""
        if self.lines:
            return self.lines.popleft()
        while True:
            chunk = self.poller.read(self.fd)
            if chunk is None:  # only at a deadline, and there is none
                continue
            if not chunk:
                last, self.rest = self.rest, b""
                return last
            *complete, self.rest = (self.rest + chunk).split(b"\n")
            if complete:
                self.lines.extend(line + b"\n" for line in complete)
                return self.lines.popleft()


class _Channel:
    """The protocol's two descriptors, taken from 0 and 1 (see the module)."""

    def __init__(self) -> None:
        self.requests = Requests(os.dup(0), Poller(POLL_S))
        self.out = os.dup(1)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        try:
            os.dup2(2, 1)  # the target's output goes to standard error
        except OSError:  # started with standard error closed: to the null device
            os.dup2(null, 1)
        os.close(null)

    def send(self, data: bytes) -> None:
        """One answer line, written at once (the judge times each answer as it comes:
        an answer held back behind a call that hangs would be blamed on that call)."""
        while data:
            data = data[os.write(self.out, data):]


def _kill_group() -> None:
    """End the host and every process in its group (the target's workers), when the
    host leads its group (the judge starts it so); else the host alone. The scratch
    folder the judge gave the host (:data:`.protocol.SCRATCH`, its ``TMPDIR``) is
    removed first: the host ends so when its judge is gone, and no judge is left to."""
    try:
        folder = os.environ.get(SCRATCH)
        if folder and folder == os.environ.get("TMPDIR"):
            import shutil  # only here: a host's start imports no more than it uses

            shutil.rmtree(folder, ignore_errors=True)
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpgrp(), signal.SIGKILL)
    finally:
        os._exit(1)


def _watch_lifeline(fd: int) -> None:
    """A daemon thread: when the judge's end of the lifeline closes, end the group."""

    def wait() -> None:
        try:
            while os.read(fd, 1):
                pass
        except OSError:
            pass
        _kill_group()

    threading.Thread(target=wait, name="kvoffload-lifeline", daemon=True).start()


_CONFIG_FIELDS = frozenset({"profile", "policy", "level", "assume", "capacity", "adapter",
                            "max_keys_per_call", "call_timeout", "fault"})


_HOST_PID = os.getpid()
"""The host's own process: a child the target forks in a call never reads or writes
the channel (it ends when it returns from the call)."""


class _InCall:
    """Whether a call into the target is in progress (SIGINT is the target's then)."""

    now = False


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    if _InCall.now:
        raise KeyboardInterrupt


class Host:
    """One target, loaded once, built anew on every ``new``."""

    def __init__(self) -> None:
        self.target = ""
        self.config: Any = None
        self.obj: Any = None
        self.prepared: Any = None
        self.adapter: Adapter | None = None

    def hello(self, message: dict[str, Any]) -> dict[str, Any]:
        from ..config import CheckConfig
        from .lmcache_loader import is_lmcache_target
        from .targets import load_object

        if message.get("protocol") != PROTOCOL_VERSION:
            return refused_message("usage", f"this host speaks protocol version "
                                   f"{PROTOCOL_VERSION}, not {message.get('protocol')!r}")
        python = message.get("python")
        if isinstance(python, dict) and isinstance(python.get("path"), list):
            sys.path[:] = [str(p) for p in python["path"]]
        self.target = str(message.get("target", ""))
        fields = message.get("config")
        try:
            if not isinstance(fields, dict) or not set(fields) <= _CONFIG_FIELDS:
                raise UsageError(f"the hello's config {fields!r} is not a configuration")
            self.config = CheckConfig.from_options(**fields, spelling="")
            if not is_lmcache_target(self.target):
                self.obj = load_object(self.target, self.config.policy.value)
        except TargetLoadError as error:
            return refused_message("load", str(error))
        except UsageError as error:
            return refused_message("usage", str(error))
        return {"answer": "hello", "protocol": PROTOCOL_VERSION}

    def new(self, capacity: int, record: bool = False) -> dict[str, Any]:
        from .targets import prepare

        self.adapter = None
        engine_record.start() if record else engine_record.stop()
        try:
            if self.prepared is None:
                self.prepared = prepare(self.target, self.config, self.obj)
                sample = self.prepared.sample
                if sample is not None and capacity == self.config.capacity:
                    self.adapter = sample
            if self.adapter is None:
                self.adapter = self.prepared.make_adapter(capacity)
        except TargetLoadError as error:
            return refused_message("load", str(error))
        except UsageError as error:
            return refused_message("usage", str(error))
        except BaseException as error:  # the target's, from a factory not wrapped
            from ..judge.explain import error_text

            return refused_message("load", f"constructing TARGET {self.target!r} raised "
                                   f"{error_text(error)}")
        prepared = self.prepared
        answer = hello_answer(prepared.adapter, prepared.why, self.adapter.capabilities)
        answer["answer"] = "built"
        return _with_record(answer)

    def call(self, call: Call) -> bytes:
        """The answer line to ``call`` on the current instance."""
        adapter = self.adapter
        if adapter is None:
            raise ProtocolError("a call before any target was built")
        recorder = _recorder()
        if recorder is not None:
            recorder.mark(str(call))
        _InCall.now = True
        try:
            value = send(adapter, call)
        except Untranslatable as error:
            return _line(untranslatable_message(error.prop, error.message))
        except BaseException as error:  # whatever the target raised is its answer
            return _line(_raised(adapter, error))
        finally:
            _InCall.now = False
            if os.getpid() != _HOST_PID:  # a child the target forked, back from the call:
                os._exit(0)  # only the host answers on the channel
        if recorder is not None:  # recording: the answer carries the engine's calls
            return _line(value_message(call.op, value))
        return value_line(call.op, value)


def _recorder() -> Any:
    """The engine-call recorder of the current target (``new`` with ``record``), or None."""
    current = engine_record.active()
    return current if current.enabled else None


def _with_record(answer: dict[str, Any]) -> dict[str, Any]:
    """``answer``, with the engine calls made since the last answer (recording only)."""
    recorder = _recorder()
    if recorder is not None:
        answer["engine"] = recorder.take()
    return answer


def _line(answer: dict[str, Any]) -> bytes:
    """:func:`_with_record` of ``answer``, as its line."""
    return dumps(_with_record(answer))


def _raised(adapter: Adapter, error: BaseException) -> dict[str, Any]:
    """A ``raised`` answer; a target's exception that fails to describe itself is
    still described (:func:`~kvoffload.conformance.judge.explain.error_parts`, as the
    judge's own reports read one)."""
    from ..judge.explain import error_parts

    code, message = error_parts(error)
    try:
        rejection = bool(adapter.is_rejection(error))
    except Exception:
        rejection = False
    return raised_message(type(error).__name__, code, message, rejection)


def serve(channel: _Channel, host: Host) -> bool:
    """Answer requests until ``bye`` (True) or the end of the channel (False)."""
    handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
        "hello": host.hello,
        "new": lambda m: host.new(int(m.get("capacity", 0)), m.get("record") is True),
    }
    readline = channel.requests.readline
    while True:
        try:
            line = readline()
        except KeyboardInterrupt:  # a SIGINT between calls: nobody's to take
            continue
        if not line:
            return False
        try:
            call = read_call_line(line)  # most lines: read once per session (LineCache)
            if call is not None:
                channel.send(host.call(call))
                continue
            message = loads(line)
            request = message.get("request")
            if request == "bye":
                return True
            handler = handlers.get(str(request))
            if handler is None:
                raise ProtocolError(f"unknown request {request!r}")
            answer = handler(message)
        except ProtocolError as error:
            answer = {"answer": "refused", "kind": "protocol", "message": str(error)}
        channel.send(dumps(answer))


def _lifeline(argv: list[str]) -> int | None:
    """The ``--lifeline`` descriptor in ``argv`` (None: no lifeline). The judge's two
    forms are read here; anything else (``--help``, an error, an abbreviation) by
    argparse, imported only then (a few ms of every host's start)."""
    if not argv:
        return None
    if len(argv) == 2 and argv[0] == "--lifeline" and argv[1].isdecimal():
        return int(argv[1])
    import argparse

    parser = argparse.ArgumentParser(prog="python -m kvoffload.conformance.target.host",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--lifeline", type=int, default=None,
                        help="a descriptor the judge holds the other end of")
    lifeline: int | None = parser.parse_args(argv).lifeline
    return lifeline


def main(argv: list[str] | None = None) -> int:
    lifeline = _lifeline(sys.argv[1:] if argv is None else argv)
    channel = _Channel()
    if lifeline is not None:
        _watch_lifeline(lifeline)
    signal.signal(signal.SIGINT, _on_sigint)
    # What every hello imports, imported before it comes: a host the judge started early
    # (kvoffload check, remote.prestart) does it while the judge imports its own modules.
    from .. import config  # noqa: F401  # imported for its time
    from . import lmcache_loader, targets  # noqa: F401  # imported for their time
    try:
        bye = serve(channel, Host())
    except OSError:  # an answer could not be sent (EPIPE): the judge is gone
        bye = False
    except BaseException:  # the host itself failed: it ends, and its group with it
        with suppress(OSError):
            traceback.print_exc()
        bye = False
    if not bye:
        _kill_group()  # the judge is gone: so is everything the target started
    return 0  # bye: end through the interpreter's shutdown (the target's exit handlers)


if __name__ == "__main__":
    sys.exit(main())
