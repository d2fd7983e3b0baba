"""The judge's side of the boundary: a target in a host process, seen as an Adapter.

:func:`target_session` is where a run decides where its target lives. By default
(``kvoffload check``, the pytest plugin, ``check("module:attr")``) the target is loaded
and called in a host, a program of its own started with :mod:`subprocess` (never
``fork``) in a session and process group of its own: the suite's Python host
(:mod:`.host`) for a Python TARGET, or any executable that speaks the protocol for
``exec:CMD`` (``kvoffload check --exec CMD``). The judge (Hypothesis, the spec, the
comparers, the shrinker, the report, the exit status) stays in the caller's process and
sees the target only through :class:`RemoteAdapter`: answers read by
:func:`.protocol.read_value`, nothing else.

Every request is timed: loading (``hello``, :data:`LOAD_TIMEOUT` or the call timeout if
longer), each construction (``new``: the call timeout, twice that for the first, which
may probe the target to pick its adapter), each call (the call timeout). A host that
ends, is killed, hangs past its time or writes what is not an answer is ended with its
whole process group and:

- before its first successful construction: the run could not be made
  (:class:`~kvoffload.conformance.errors.TargetLoadError`, exit 2, with the reason);
- after it: a :class:`HostFailure` answer (``crash``) or a
  :class:`~kvoffload.conformance.judge.guard.CallTimeout` (``liveness``), raised where the call or
  the construction was made, so the lockstep driver and the shrinker treat it as any other answer;
  the next construction starts a fresh host (one is started at once, so its start-up overlaps the
  judge's work).

Running the target in the judge's own process stays available, unguarded, for the
trusted (the suite's own tests and benchmarks, the self-test's seeded variants, a
manager object passed to ``check()``): ``KVOFFLOAD_IN_PROCESS=1`` or ``kvoffload check
--in-process``. On Windows (no ``select`` on pipes, no process groups) runs are made in
process, and say so.
"""

from __future__ import annotations

import atexit
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

import kvoffload
from kvoffload.spec import Call, Completion, Key, Op

from ..adapter_api import Capabilities, EventBatch, LoadOutcome, Reported, StoreOutcome
from ..config import CheckConfig
from ..errors import TargetLoadError, Untranslatable, UsageError
from ..judge.guard import CallTimeout
from .isolation import IN_PROCESS
from .polling import Poller
from .protocol import (
    BYE,
    NOT_RETURNED,
    PROTOCOL_VERSION,
    SCRATCH,
    ProtocolError,
    call_line,
    config_fields,
    dumps,
    hello_message,
    loads,
    new_message,
    read_hello,
    read_returned_line,
    read_value,
)

if TYPE_CHECKING:
    from .targets import Prepared

EXEC_PREFIX = "exec:"
"""A TARGET ``exec:CMD`` is checked through the program CMD, a protocol host."""
LOAD_TIMEOUT = 60.0
"""Seconds a host is given to start and load its target (the call timeout if longer)."""
BYE_GRACE = 1.0
"""Seconds a host is given to end by itself after ``bye`` (its exit handlers) before its
process group is killed."""
MAX_LINE = 256 * 1024 * 1024
"""The longest answer line read; a longer one is garbage."""
POLL_S = 0.002
"""Seconds the judge polls for an answer before it sleeps, while polling pays
(:mod:`.polling`); while it does, the calls not waited for are also written as they
are posted, so that the host works on them while the judge goes on."""
SUPPORTED = os.name == "posix"
"""Hosts need ``select`` on pipes and process groups (not on Windows)."""


def is_exec_target(text: str) -> bool:
    return text.startswith(EXEC_PREFIX)


def in_process_requested() -> bool:
    """``KVOFFLOAD_IN_PROCESS=1`` (or ``--in-process``, which sets it)."""
    return os.environ.get(IN_PROCESS) == "1"


class HostFailure(Exception):
    """The host ended, hung or wrote garbage: the target's failure once it has been
    built (``crash``), a run that cannot be made before."""

    HOST_ENDED = True
    """Read by :func:`kvoffload.conformance.judge.compare.crash`: the run stops at this failure."""


class TargetError(Exception):
    """An exception the target raised in its host, rebuilt in the judge: its class
    name, misuse ``code`` and message as the host described them."""

    rejection = False
    """The adapter (in the host) reads it as the target's rejection of misuse."""


_ERROR_CLASSES: dict[tuple[str, str | None, bool], type[TargetError]] = {}


def target_error(name: str, code: str | None, message: str, rejection: bool) -> TargetError:
    """A :class:`TargetError` whose class bears the target's exception's name (so
    reports read ``MisuseError [load-not-ready]: ...`` as in one process)."""
    key = (name, code, rejection)
    cls = _ERROR_CLASSES.get(key)
    if cls is None:
        attributes: dict[str, Any] = {"rejection": rejection}
        if code is not None:
            attributes["code"] = code
        cls = _ERROR_CLASSES[key] = type(name, (TargetError,), attributes)
    return cls(message)


# --- one host process ----------------------------------------------------------------


_LIVE: set[HostProcess] = set()


def kill_all() -> None:
    """End every host this process started, with their process groups (at exit, on
    SIGTERM, before a stuck run ends the process)."""
    for host in list(_LIVE):
        host.kill()


atexit.register(kill_all)


def _python_host() -> tuple[list[str], dict[str, str]]:
    """The command and environment of the suite's Python host: this interpreter, its
    ``-O`` level, and kvoffload's own folders first on PYTHONPATH."""
    roots = [os.path.dirname(os.path.abspath(p)) for p in kvoffload.__path__]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        dict.fromkeys([*roots, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]))
    env.pop(IN_PROCESS, None)
    flags = ["-" + "O" * sys.flags.optimize] if sys.flags.optimize else []
    return [sys.executable, *flags, "-m", "kvoffload.conformance.target.host"], env


class HostProcess:
    """One running host: its process (a session and group of its own), the channel,
    the lifeline (Python hosts), and how it ended."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None, lifeline: bool) -> None:
        self.argv = list(argv)
        self.buffer = bytearray()
        """What the host wrote after its last complete line (a long answer arrives in
        many chunks: each is searched for a newline once)."""
        self.lines: deque[bytes] = deque()
        """Complete answer lines read and not yet taken, oldest first: one read often
        brings several (the answers of the calls sent without waiting)."""
        self.outgoing: list[bytes] = []
        self.poller = Poller(POLL_S)
        self.lifeline: int | None = None
        args = list(argv)
        try:
            self.scratch = tempfile.mkdtemp(prefix="kvoffload-host-")
            """The host's ``TMPDIR`` (and :data:`.protocol.SCRATCH`): a folder of its own,
            removed once its group has ended (:meth:`kill`), so that what the target
            leaves there (an exit handler that a killed host never runs, a file it
            forgot) goes with the host."""
        except OSError as error:
            raise TargetLoadError(f"cannot make a scratch folder for the host in "
                                  f"{tempfile.gettempdir()!r} (TMPDIR): "
                                  f"{error.strerror or error}") from error
        env = {**(os.environ if env is None else env),
               "TMPDIR": self.scratch, SCRATCH: self.scratch}
        passed: tuple[int, ...] = ()
        if lifeline:
            try:
                read_end, self.lifeline = os.pipe()
            except OSError:
                _remove(self.scratch)
                raise
            if read_end < 3:  # 0, 1 or 2 was closed: the host's own would clash with it
                import fcntl  # POSIX only, as hosts are

                low, read_end = read_end, fcntl.fcntl(read_end, fcntl.F_DUPFD_CLOEXEC, 3)
                os.close(low)
            args += ["--lifeline", str(read_end)]
            passed = (read_end,)
        try:
            self.process = subprocess.Popen(
                args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, bufsize=0,
                pass_fds=passed, start_new_session=True, close_fds=True)
        except OSError as error:
            if self.lifeline is not None:
                os.close(self.lifeline)
            _remove(self.scratch)
            raise TargetLoadError(f"cannot start the host {shlex.join(self.argv)!r}: "
                                  f"{error.strerror or error}") from error
        finally:
            for fd in passed:
                os.close(fd)
        _LIVE.add(self)
        stdin, stdout = self.process.stdin, self.process.stdout
        if stdin is None or stdout is None:
            raise RuntimeError("subprocess gave no pipes")
        self.to_host, self.from_host = stdin.fileno(), stdout.fileno()
        os.set_blocking(self.to_host, False)
        os.set_blocking(self.from_host, False)
        self.alive = True

    def send(self, message: dict[str, Any], now: bool = True) -> None:
        """Send ``message``; with ``now`` False it waits in a buffer until the next
        :meth:`receive` (each write wakes the host: one write per round trip, not per
        call, is most of what a deferred call saves)."""
        self.send_line(dumps(message), now)

    def send_line(self, line: bytes, now: bool = True) -> None:
        """:meth:`send` for a message already encoded (:func:`.protocol.call_line`)."""
        self.outgoing.append(line)
        if now:
            self.flush()

    def flush(self) -> None:
        if not self.outgoing:
            return
        data, self.outgoing = b"".join(self.outgoing), []
        try:
            while data:
                try:  # non-blocking: a full pipe must not stop us reading the host's answers
                    data = data[os.write(self.to_host, data):]
                    continue
                except BlockingIOError:
                    pass
                readable = select.select([self.from_host], [self.to_host], [])[0]
                if readable:  # the host is writing answers we have not read: read them
                    chunk = os.read(self.from_host, 1 << 20)
                    if not chunk:
                        return  # it has ended; receive() says how
                    self._take(chunk)
        except OSError as error:  # BrokenPipe: it has ended; receive() says how
            if not isinstance(error, BrokenPipeError):
                raise

    def receive(self, timeout: float, during: str) -> dict[str, Any]:
        """The next answer; raises HostFailure (the host ended, or wrote garbage:
        ``during`` says when) or HostTimeout. The host is killed in either case, and
        on any exception raised while waiting (a Ctrl-C, the judge's own timer)."""
        line = self.receive_line(timeout, during)
        try:
            return loads(line)
        except ProtocolError as error:
            raise self.garbage(error, during) from None

    def receive_line(self, timeout: float, during: str) -> bytes:
        """The next answer's line, not read yet (:meth:`receive`); raises as it does.
        A line read already is taken at once; else what waits to be sent is sent first
        (an answer can only come for a call sent, so none is waited for unsent)."""
        if self.lines:
            return self.lines.popleft()
        try:
            self.flush()
            return self._line(timeout, during)
        except ProtocolError as error:
            raise self.garbage(error, during) from None
        except BaseException:
            self.kill()
            raise

    def garbage(self, error: ProtocolError, during: str) -> HostFailure:
        """Kill the host, which wrote what is not a message: the failure to raise."""
        self.kill()
        return HostFailure(f"the host wrote what is not a protocol message {during}: {error}")

    def _line(self, timeout: float, during: str) -> bytes:
        deadline = time.monotonic() + timeout if timeout > 0 else None
        while not self.lines:
            if len(self.buffer) > MAX_LINE:
                raise ProtocolError(f"a line longer than {MAX_LINE} bytes")
            chunk = self._read(deadline, timeout)
            if not chunk:
                raise HostFailure(f"the host {self.ended()} {during}")
            self._take(chunk)
        return self.lines.popleft()

    def _take(self, chunk: bytes) -> None:
        """Add ``chunk`` from the host: the lines it completes go to ``lines``."""
        if b"\n" not in chunk:
            self.buffer += chunk
            return
        if self.buffer:
            chunk = bytes(self.buffer) + chunk
        *complete, rest = chunk.split(b"\n")
        self.lines.extend(complete)
        self.buffer = bytearray(rest)

    def _read(self, deadline: float | None, timeout: float) -> bytes:
        """What the host has written (b"" at its end), waiting until ``deadline``: a read
        first (a deferred call's answer is often there already), then a poll while
        polling pays, then ``select`` (:meth:`.polling.Poller.read`)."""
        chunk = self.poller.read(self.from_host, deadline)
        if chunk is None:
            raise HostTimeout(timeout)
        return chunk

    def ended(self) -> str:
        """How the host ended (it closed the channel): its status or its signal."""
        try:
            status = self.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            self.kill()
            return "closed the channel (its standard output)"
        self.kill()
        if status < 0:
            return f"was killed by {_signal_name(-status)}"
        return f"exited with status {status}" + (" (os._exit?)" if status == 0 else "")

    def kill(self) -> None:
        """End the host's process group (the host and what the target started)."""
        if self in _LIVE:
            _LIVE.discard(self)
        self.alive = False
        with suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with suppress(OSError):
            self.process.kill()
        with suppress(OSError, subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        self._close_pipes()
        _remove(self.scratch)

    def close(self) -> None:
        """``bye``, a grace for the target's exit handlers, then the group is killed.
        The lifeline stays open through the grace: closed, it ends the host's group at
        once (:func:`.host._watch_lifeline`), cutting the exit handlers short."""
        if self.alive:
            self.send(BYE)
            with suppress(OSError):
                self._close_pipes(lifeline=False)
            with suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=BYE_GRACE)
        self.kill()

    def _close_pipes(self, lifeline: bool = True) -> None:
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with suppress(OSError):
                    stream.close()
        if lifeline and self.lifeline is not None:
            with suppress(OSError):
                os.close(self.lifeline)
            self.lifeline = None


class HostTimeout(HostFailure):
    """The host did not answer in time."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no answer within {seconds:g} s")
        self.seconds = seconds


def _remove(folder: str) -> None:
    """Remove a host's scratch folder and what is in it (whatever cannot be: left)."""
    shutil.rmtree(folder, ignore_errors=True)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


_EARLY: list[tuple[HostProcess, tuple[list[str], dict[str, str], str]]] = []
"""The Python host :func:`prestart` started, with its command, environment and folder."""


def prestart() -> None:
    """Start the suite's Python host now, before the judge has read its options
    (``kvoffload check`` does, :func:`.cli.entry`): its start-up (the interpreter, its
    imports) then runs while the judge imports its own modules, and it waits for its
    ``hello``. The run's first host is this one if its command, environment and folder
    are still the run's (:func:`_early_host`); else, or if no run takes it, it ends with
    the judge (:func:`kill_all`) or when its lifeline closes."""
    if not SUPPORTED or in_process_requested() or _EARLY:
        return
    argv, env = _python_host()
    try:
        made = (argv, env, os.getcwd())
        host = HostProcess(argv, env, lifeline=True)
    except (OSError, TargetLoadError):  # started again when needed, failing there if so
        return
    _EARLY.append((host, made))


def _early_host(argv: list[str], env: dict[str, str] | None) -> HostProcess | None:
    """The host :func:`prestart` started, if it still runs and was started as a host
    for ``argv`` and ``env`` would be, in this folder (None otherwise; it is ended)."""
    while _EARLY:
        host, made = _EARLY.pop()
        try:
            same = made == (argv, env, os.getcwd())
        except OSError:  # the folder is gone
            same = False
        if same and host.alive and host.process.poll() is None:
            return host
        host.kill()
    return None


# --- the target, across hosts ------------------------------------------------------


class RemoteTarget:
    """A TARGET checked through hosts: started on demand, restarted after one dies."""

    def __init__(self, target: str, config: CheckConfig) -> None:
        self.target, self.config = target, config
        if is_exec_target(target):
            command = target.removeprefix(EXEC_PREFIX)
            try:
                self.argv, self.env, self.lifeline = shlex.split(command), None, False
            except ValueError as error:
                raise UsageError(f"--exec {command!r}: {error}") from error
            if not self.argv:
                raise UsageError("--exec needs a command")
            python = None
        else:
            self.argv, env = _python_host()
            self.env, self.lifeline = env, True
            python = {"path": [p or os.getcwd() for p in sys.path]}
        self.hello = hello_message(target, config_fields(config), python)
        self.host: HostProcess | None = None
        self.greeted = False
        self.first: tuple[str, str, Capabilities] | None = None
        """(adapter, why, capabilities) of the first successful construction."""
        self.generation = 0
        self.outstanding = 0
        """Calls sent whose answers are not read yet (see :meth:`post`)."""
        self.startup_s = 0.0
        self.closed = False
        self.record = False
        """Ask each new target's host to record its engine calls (:mod:`.engine_record`)."""
        self.engine_entries: list[dict[str, Any]] = []
        """The engine calls of the current target, as its host sent them back."""

    @property
    def call_timeout(self) -> float:
        return self.config.call_timeout

    def _spawn(self) -> None:
        """Start a host (or take the one started early, :func:`prestart`) and send it
        ``hello``, without waiting for its answer."""
        early = _early_host(self.argv, self.env) if self.lifeline else None
        self.host = early or HostProcess(self.argv, self.env, self.lifeline)
        self.greeted = False
        self.outstanding = 0
        self.host.send(self.hello)

    def _ready(self) -> HostProcess:
        """A host that has loaded the target (started and greeted if need be)."""
        if self.host is None or not self.host.alive:
            self._spawn()
        host = self.host
        if host is None:
            raise RuntimeError("no host")
        if not self.greeted:
            limit = max(LOAD_TIMEOUT, self.call_timeout) if self.call_timeout > 0 else 0
            answer = host.receive(limit, "while loading the target")
            if answer.get("answer") == "refused":
                host.kill()
                raise _refusal(answer)
            if answer.get("answer") != "hello":
                host.kill()
                raise HostFailure(f"the host answered hello with {answer!r}")
            if answer.get("protocol") != PROTOCOL_VERSION:
                host.kill()
                raise HostFailure(f"the host speaks protocol version "
                                  f"{answer.get('protocol')!r}, the judge {PROTOCOL_VERSION}")
            self.greeted = True
        return host

    def _died(self) -> None:
        """After a host failure: start the next host at once (its start-up overlaps the
        judge's work until the next construction)."""
        if not self.closed and self.first is not None:
            with suppress(TargetLoadError):
                self._spawn()

    def prepare(self) -> Prepared:
        """Load the target and build it once (the capabilities): the run's Prepared.
        Whatever goes wrong here, the run could not be made (TargetLoadError, exit 2)."""
        from .targets import Prepared

        if self.target.startswith("vllm=="):
            _fetch_vllm(self.target.removeprefix("vllm=="))
        begun = time.perf_counter()
        try:
            self._build(self.config.capacity, first=True)
        except HostTimeout as late:
            raise TargetLoadError(
                f"the host of TARGET {self.target!r} gave no answer within {late.seconds:g} s "
                f"while loading or first building it: the run could not be made") from None
        except HostFailure as error:
            raise TargetLoadError(f"{error}: the run could not be made (TARGET "
                                  f"{self.target!r})") from None
        self.startup_s = time.perf_counter() - begun
        if self.first is None:
            raise RuntimeError("built without an answer")
        adapter, why, caps = self.first
        return Prepared(self.target, adapter, why, caps, Builder(self))

    def _build(self, capacity: int, first: bool = False) -> RemoteAdapter:
        host = self._ready()
        while self.outstanding and host.alive:  # answers nobody will compare now
            host.receive(self.call_timeout, "during a call of the previous target")
            self.outstanding -= 1
        if not host.alive:
            host = self._ready()
        self.outstanding = 0
        host.send(new_message(capacity, self.record))
        timeout = self.call_timeout * (2 if first else 1)
        answer = host.receive(timeout, f"while building a target of {capacity} slots")
        kind = answer.get("answer")
        if kind == "refused":
            if answer.get("kind") == "protocol":
                host.kill()
                raise HostFailure(f"the host refused new: {answer.get('message')}")
            raise _refusal(answer)
        if kind != "built":
            host.kill()
            raise HostFailure(f"the host answered new with {str(answer)[:200]}")
        self.engine_entries = list(answer.pop("engine", ()))
        try:
            announced = read_hello({**answer, "answer": "hello"})
        except ProtocolError as error:
            host.kill()
            raise HostFailure(str(error)) from None
        if self.first is None:
            self.first = announced
        elif announced != self.first:
            host.kill()
            raise HostFailure(f"the target was built as {announced[0]} with {announced[2]}, "
                              f"first as {self.first[0]} with {self.first[2]}")
        self.generation += 1
        return RemoteAdapter(self, self.generation, announced[0], announced[2])

    def new_adapter(self, capacity: int) -> RemoteAdapter:
        """A fresh target of ``capacity`` slots (the examples', the shrinker's)."""
        try:
            return self._build(capacity)
        except HostTimeout:
            self._died()
            raise CallTimeout from None
        except HostFailure:
            self._died()
            raise
        except Exception:  # the host failed some other way (not the user's Ctrl-C)
            if self.host is not None and not self.host.alive:
                self._died()
            raise

    def post(self, generation: int, line: bytes, now: bool = True) -> None:
        """Send a call (its :func:`.protocol.call_line`) on the current target without
        waiting for its answer: written at once (the host works on it while the judge
        goes on), or with ``now`` False at the next flush or wait."""
        host = self.host
        if generation != self.generation or host is None or not host.alive:
            raise HostFailure("a call on a target that is gone (its host ended)")
        host.send_line(line, now and host.poller.polling)
        self.outstanding += 1

    def collect(self, op: Op) -> object:
        """The answer of the oldest call posted (a call of ``op``): what the target's
        adapter read, or what it raised."""
        host = self.host
        if host is None or not host.alive or not self.outstanding:
            raise HostFailure("the host ended before it answered this call")
        try:
            line = host.receive_line(self.call_timeout, "during this call")
        except HostTimeout:
            self._died()
            raise CallTimeout from None
        except HostFailure:
            self._died()
            raise
        self.outstanding -= 1
        try:
            if self.record:  # every answer carries the engine's calls: read it whole
                answer = loads(line)
                self.engine_entries.extend(answer.pop("engine", ()))
                if answer.get("answer") == "returned":
                    return read_value(op, answer.get("value"))
            else:  # a line read before is not parsed again (LineCache)
                value = read_returned_line(op, line)
                if value is not NOT_RETURNED:
                    return value
                answer = loads(line)
        except ProtocolError as error:
            failure = host.garbage(error, "during this call")
            self._died()
            raise failure from None
        kind = answer.get("answer")
        try:
            if kind == "raised":
                raise target_error(str(answer.get("type")), _text_or_none(answer.get("code")),
                                   str(answer.get("message")), answer.get("rejection") is True)
            if kind == "untranslatable" and isinstance(answer.get("prop"), str):
                raise Untranslatable(answer["prop"], str(answer.get("message")))
            raise ProtocolError(f"not an answer to a call: {str(answer)[:200]}")
        except ProtocolError as error:
            host.kill()
            self._died()
            raise HostFailure(f"the host wrote what is not an answer: {error}") from None

    def call(self, generation: int, op: Op, line: bytes) -> object:
        """One call on the current target, waiting for its answer."""
        self.post(generation, line)
        return self.collect(op)

    def close(self) -> None:
        self.closed = True
        if self.host is not None:
            self.host.close()
            self.host = None


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _refusal(answer: dict[str, Any]) -> UsageError:
    message = str(answer.get("message", "refused"))
    if answer.get("kind") == "usage":
        return UsageError(message)
    return TargetLoadError(message)


def _fetch_vllm(version: str) -> None:
    """Download vLLM's wheel in the judge (once, cached) so that the host's load is an
    import, timed as one."""
    from .vllm_wheels import VllmReleaseUnavailable, release_tree

    try:
        release_tree(version)
    except (VllmReleaseUnavailable, OSError) as error:
        raise TargetLoadError(f"cannot load vLLM {version}'s manager: {error}") from error


class Builder:
    """A Prepared's ``make_adapter`` for a target in a host: builds one there."""

    times_itself = True
    """Read by the lockstep driver: each request is timed here, so the judge's own
    interval timer (:mod:`kvoffload.conformance.judge.guard`) must not also run over a host's
    start-up."""

    def __init__(self, remote: RemoteTarget) -> None:
        self.remote = remote

    def __call__(self, capacity: int) -> RemoteAdapter:
        return self.remote.new_adapter(capacity)


class RemoteAdapter:
    """One target instance in the host, as an Adapter (:mod:`kvoffload.conformance.adapter_api`)."""

    times_itself = True

    def __init__(self, remote: RemoteTarget, generation: int, name: str,
                 capabilities: Capabilities) -> None:
        self.remote, self.generation = remote, generation
        self.name, self.capabilities = name, capabilities

    def _make(self, call: Call) -> Any:
        return self.remote.call(self.generation, call.op, call_line(call))

    def post(self, call: Call, now: bool = True) -> None:
        """Send ``call`` without waiting (the lockstep driver's deferred calls); with
        ``now`` False it is written at the next :meth:`flush` or wait."""
        self.remote.post(self.generation, call_line(call), now)

    def flush(self) -> None:
        """Send what was posted now (the host works while the judge goes on)."""
        host = self.remote.host
        if host is not None and host.alive:
            host.flush()

    def collect(self, op: Op) -> object:
        """The answer of the oldest call posted; raises what the target raised."""
        if self.generation != self.remote.generation:
            raise HostFailure("a call on a target that is gone (its host ended)")
        return self.remote.collect(op)

    def lookup(self, key: Key) -> Reported:
        answer: Reported = self._make(Call(Op.LOOKUP, (key,)))
        return answer

    def prepare_load(self, keys: Sequence[Key]) -> LoadOutcome:
        answer: LoadOutcome = self._make(Call(Op.PREPARE_LOAD, tuple(keys)))
        return answer

    def complete_load(self, keys: Sequence[Key], ticket: int | None = None) -> Completion | None:
        answer: Completion | None = self._make(Call(Op.COMPLETE_LOAD, tuple(keys), ticket=ticket))
        return answer

    def touch(self, keys: Sequence[Key]) -> None:
        self._make(Call(Op.TOUCH, tuple(keys)))

    def prepare_store(self, keys: Sequence[Key]) -> StoreOutcome:
        answer: StoreOutcome = self._make(Call(Op.PREPARE_STORE, tuple(keys)))
        return answer

    def complete_store(self, keys: Sequence[Key], success: bool = True,
                       ticket: int | None = None) -> Completion | None:
        answer: Completion | None = self._make(
            Call(Op.COMPLETE_STORE, tuple(keys), success=success, ticket=ticket))
        return answer

    def reset_cache(self) -> int | None:
        answer: int | None = self._make(Call(Op.RESET_CACHE))
        return answer

    def take_events(self) -> EventBatch:
        answer: EventBatch = self._make(Call(Op.TAKE_EVENTS))
        return answer

    def fail_node(self) -> None:
        """The fault the suite injects (``--fault``, D15), made in the host."""
        self._make(Call(Op.FAIL_NODE))

    def is_rejection(self, error: BaseException) -> bool:
        return isinstance(error, TargetError) and error.rejection


@contextmanager
def target_session(target: str, config: CheckConfig, obj: Any = None,
                   in_process: bool | None = None) -> Iterator[Prepared]:
    """The run's Prepared target: in a host (the default), or in this process for an
    object (``obj``), ``in_process`` (default: ``KVOFFLOAD_IN_PROCESS=1``) or where
    hosts are not supported; ``exec:`` targets always in a host."""
    local = in_process if in_process is not None else in_process_requested()
    if not is_exec_target(target) and (obj is not None or local or not SUPPORTED):
        from .targets import prepare

        yield prepare(target, config, obj)
        return
    if not SUPPORTED:
        raise UsageError("exec: targets need POSIX (select on pipes, process groups)")
    remote = RemoteTarget(target, config)
    try:
        prepared = remote.prepare()
        yield prepared
    finally:
        remote.close()


def startup_seconds(prepared: Prepared) -> float | None:
    """How long the host took to start, load and first build the target (None: the
    target runs in this process)."""
    builder = prepared.make_adapter
    return builder.remote.startup_s if isinstance(builder, Builder) else None
