"""Python hosts without paying their start-up in each: LMCache's import, or the host's own.

A check of ``lmcache==X`` runs its target in the suite's Python host
(``python -m kvoffload.conformance.target.host``, :mod:`kvoffload.conformance.target.remote`),
and most of such a host's start is importing torch and LMCache: about 3.5 s of CPU for a
record replay whose calls take milliseconds (:func:`.engine_script.record`, one per
engine-native reproducer). :class:`HostZygote` is one process per test session that has
those imports and the host's, and forks a host per run:

- **Made from the LMCache zygote** (:mod:`zygote`): a fork of it that the zygote does not
  wait for (:meth:`zygote.Zygote.spawn`), so torch and LMCache are imported once per
  session for both. The fork takes the host's environment (kvoffload's folders on
  ``PYTHONPATH`` and ``sys.path``, ``LMCACHE_LOG_LEVEL=ERROR`` as ``lmcache_loader`` sets
  it, and LMCache's loggers, made at the zygote's import, set to that level), imports the
  host module and the LMCache adapters, calls :func:`gc.freeze` and waits on a Unix socket.
- **Or without LMCache** (no spawner): ``python server.py``, the same server importing
  only the host and the reference (:data:`PYTHON_PRELOADED`). A plain host's start (an
  interpreter importing the host, the spec and the reference) is most of what a host
  costs in a small check: in one of 3 examples of 10 calls, a host took 0.20 s of CPU, a
  fork of this zygote and its launcher 0.08 s (tests/conftest.py's ``python_hosts``, for
  the tests that run the judge in their own process).
- **The host command** (:meth:`HostZygote.command`) replaces the judge's: a small launcher,
  ``host_launcher SOCKET`` (host_launcher.c, built once by ``cc``: no interpreter's
  start, about 10 ms of CPU less a host) or, without a C compiler, ``python -S -c
  LAUNCHER SOCKET`` (built-in modules only, the same steps), hands the zygote its standard
  descriptors and its lifeline and then waits; the zygote forks a child that takes them
  as 0, 1 and 2, leads a session of its own, and runs the host module as ``python -m``
  would, with the arguments the judge gave; the launcher exits with the child's exit
  status (or dies of its signal).
- **The host's end**: as ``python -m`` ends it (threads joined, the target's exit
  handlers run, the streams flushed, the same exit status), but without the
  interpreter's teardown (:mod:`python_exit`), which in a fork writes to every preloaded
  object: 15 against 2 ms of CPU per host in a fork of the plain zygote, more after a
  check.

What a test sees differs from a plain host only in the process that the judge waits for
(the launcher), in the environment (the zygote's, made when the session first asked for
it, not the judge's at each host's start, but for the scratch folder the judge made for
this host: ``TMPDIR`` and ``KVOFFLOAD_SCRATCH``, which the launcher passes on), in what
the host had imported before its ``hello`` and in the finalizers of objects alive at its
end (the teardown's, not run); the protocol, the channel, the lifeline and
the target's code are the host's own. A host killed by the judge's group kill leaves the
child to end when its lifeline or channel closes, as a host whose judge died does. Before
every fork the zygote checks that no Python thread but its own runs (a fork copies only
the calling thread) and refuses otherwise: the launcher then exits 1 with the reason on
standard error, and the judge reports a host that ended while loading.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from zygote import Zygote

PRELOADED = (
    "kvoffload.conformance.target.host",
    "kvoffload.conformance.config",
    "kvoffload.conformance.target.targets",
    "kvoffload.conformance.target.lmcache_loader",
    "kvoffload.conformance.target.lmcache_adapters",
    "lmcache.v1.storage_backend.local_disk_backend",
)
"""What each host of an LMCache target imports before its first call, besides what the
LMCache zygote has imported (:data:`zygote.PRELOADED`)."""

PYTHON_PRELOADED = (
    "kvoffload.conformance.target.host",
    "kvoffload.conformance.config",
    "kvoffload.conformance.target.targets",
    "kvoffload.conformance.target.lmcache_loader",
    "kvoffload.conformance.target.native",
    "kvoffload.conformance.target.vllm_adapters",
    "kvoffload.conformance.target.mooncake_adapter",
    "kvoffload.impl",
)
"""What a host of a Python target imports by its first ``built`` (the reference's, and
that of the tests' targets built on it), for a host zygote without LMCache."""

_SERVER = Path(__file__).with_name("python_exit.py").read_text() + r'''
import array, gc, json, logging, os, select, signal, socket, sys, threading

with open(sys.argv[3]) as given:  # the host's environment, as remote gives it a host
    os.environ.clear()
    os.environ.update(json.load(given))
sys.path[1:1] = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
for name, logger in logging.Logger.manager.loggerDict.items():  # made at the zygote's import
    if name.split(".")[0] == "lmcache" and isinstance(logger, logging.Logger):
        logger.setLevel(os.environ["LMCACHE_LOG_LEVEL"])  # the LMCache hosts' env sets it
for name in json.loads(sys.argv[2]):
    __import__(name)
gc.freeze()
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sys.argv[1] + ".new")
server.listen(16)
os.rename(sys.argv[1] + ".new", sys.argv[1])  # the launchers connect once it listens
wake_read, wake_write = os.pipe()
os.set_blocking(wake_write, False)
signal.set_wakeup_fd(wake_write)
signal.signal(signal.SIGCHLD, lambda *_: None)
waiting = {}  # child pid -> its launcher's connection


def take(connection):
    """One launcher's request: (its message, the descriptors it passed). The message is
    NUL-terminated fields: the folder, ``NAME=VALUE`` of the scratch variables, an empty
    field, then the host's arguments (what a launcher in C writes as easily)."""
    fds = array.array("i")
    data, ancillary, _, _ = connection.recvmsg(1 << 16, socket.CMSG_LEN(16 * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    fields = [os.fsdecode(field) for field in data.split(b"\0")]
    if len(fields) < 3 or fields[-1] != "" or "" not in fields[1:]:
        for fd in fds:
            os.close(fd)
        raise ValueError(f"not a request: {data!r}")
    end = fields.index("", 1)
    scratch = dict(entry.partition("=")[::2] for entry in fields[1:end])
    return {"cwd": fields[0], "scratch": scratch, "argv": fields[end + 1:-1]}, list(fds)


def answer(connection, message):
    """Send a launcher its answer (``status N`` or ``refused N``) and close its
    connection: unless it is gone (the judge kills a host's launcher on a refusal, a
    timeout or a dead channel, often before the forked host ends), which is nothing to
    the zygote."""
    try:
        connection.sendall(" ".join(f"{k} {v}" for k, v in message.items()).encode())
    except OSError:
        pass
    connection.close()


def become_host(request, fds):
    """This child as ``python -m kvoffload.conformance.target.host ARGS`` would be."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in (server.fileno(), wake_read, wake_write):
        os.close(fd)
    for connection in waiting.values():
        connection.close()
    os.setsid()
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    argv = list(request["argv"])
    if len(fds) > 3:
        argv[argv.index("--lifeline") + 1] = str(fds[3])
    for fd in fds[:3]:
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    for name, value in request["scratch"].items():  # the folder the judge made for it
        os.environ[name] = value
    if "tempfile" in sys.modules:
        sys.modules["tempfile"].tempdir = None  # read TMPDIR again
    sys.argv = ["-m", *argv]
    # Run as ``python -m`` runs it: a fresh ``__main__`` (the host notes its own pid at
    # import; the copy the zygote imported has the zygote's), its imports already made,
    # and the module not in sys.modules under its own name (nor runpy's warning that it is).
    # It ends as ``python -m`` ends it, but for the interpreter's teardown, which in a
    # fork copies every page of the preloaded modules (python_exit.py).
    import runpy
    del sys.modules["kvoffload.conformance.target.host"]
    end_as_python(lambda: runpy.run_module("kvoffload.conformance.target.host",
                                           run_name="__main__", alter_sys=True))


while True:
    ready = select.select([server, wake_read], [], [])[0]
    if wake_read in ready:
        os.read(wake_read, 512)
        while waiting:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            answer(waiting.pop(pid), {"status": os.waitstatus_to_exitcode(status)})
    if server in ready:
        connection, _ = server.accept()
        try:
            request, fds = take(connection)
        except (OSError, EOFError, ValueError):  # the launcher was killed before its request
            connection.close()
            continue
        if threading.active_count() != 1:
            answer(connection, {"refused": threading.active_count()})
        else:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                become_host(request, fds)
            waiting[pid] = connection
        for fd in fds:
            os.close(fd)
'''

_LAUNCHER = r'''
# Built-in modules only (no socket or signal, whose imports cost more than the rest of
# the launcher). What host_launcher.c does, where no C compiler is found.
import _signal, _socket, array, os, sys, time
argv = sys.argv[2:]
for _ in range(6000):  # the zygote imports LMCache before it listens: up to 5 minutes
    if os.path.exists(sys.argv[1]):
        break
    time.sleep(0.05)
fds = [0, 1, 2]
if "--lifeline" in argv:
    fds.append(int(argv[argv.index("--lifeline") + 1]))
connection = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
connection.connect(sys.argv[1])
scratch = [f"{name}={os.environ[name]}" for name in ("TMPDIR", "KVOFFLOAD_SCRATCH")
           if name in os.environ]
request = b"".join(os.fsencode(field) + b"\0" for field in [os.getcwd(), *scratch, "", *argv])
connection.sendmsg([request], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", fds))])
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0)
os.dup2(null, 1)
for fd in fds[3:]:
    os.close(fd)
answer = b""
while True:
    chunk = connection.recv(4096)
    if not chunk:
        break
    answer += chunk
kind, _, value = answer.decode().partition(" ")
if kind != "status":
    value = value if kind == "refused" else "the host zygote ended"
    sys.stderr.write(f"host zygote refused the run (Python threads: {value})\n")
    sys.exit(1)
status = int(value)
if status < 0:
    if -status not in (_signal.SIGKILL, _signal.SIGSTOP):
        _signal.signal(-status, _signal.SIG_DFL)
    os.kill(os.getpid(), -status)
sys.exit(status)
'''


LAUNCHER_SOURCE = Path(__file__).with_name("host_launcher.c")
LAUNCHER_FLAGS = ("-std=c11", "-O2", "-Wall", "-Werror")


@functools.cache
def compiled_launcher() -> Path | None:
    """``host_launcher.c`` built by ``cc`` (None without a C compiler): a host's
    launcher without an interpreter's start, about 10 ms of CPU less a host. Kept
    between sessions by tests/cpp_build.py (under a key of the compiler's version, the
    flags and the source; ``KVOFFLOAD_NO_BUILD_CACHE=1``: built anew in a folder of the
    session)."""
    compiler = shutil.which("cc")
    if compiler is None:
        return None
    from cpp_build import kept_build

    return kept_build(compiler, LAUNCHER_FLAGS, LAUNCHER_SOURCE)


class HostZygote:
    """One pre-importing host process; :meth:`command` is a host command forking it.

    Made by ``spawner`` (a fork of the LMCache zygote, which has imported torch and
    LMCache) or, without one, started as ``python server.py`` (a plain interpreter that
    imports only ``preload``: :data:`PYTHON_PRELOADED`)."""

    def __init__(self, env: dict[str, str], spawner: Zygote | None,
                 preload: tuple[str, ...] = PRELOADED) -> None:
        self.env = env
        self.spawner = spawner
        self.preload = preload
        self.folder = tempfile.TemporaryDirectory(prefix="kvoffload-hostzygote-")
        self.socket = str(Path(self.folder.name) / "hosts")
        self.pid: int | None = None
        self.process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        """The host command: ``host_launcher SOCKET`` (:func:`compiled_launcher`), or
        ``python -S -c LAUNCHER SOCKET`` without a C compiler (the judge appends the
        host's own arguments, ``--lifeline FD``). Makes the zygote on first use (the
        launcher waits until it listens)."""
        if self.pid is None:
            folder = Path(self.folder.name)
            (folder / "server.py").write_text(_SERVER)
            (folder / "env.json").write_text(json.dumps(self.env))
            argv = [str(folder / "server.py"), self.socket, json.dumps(list(self.preload)),
                    str(folder / "env.json")]
            if self.spawner is not None:
                self.pid = self.spawner.spawn(argv, folder)
            else:  # without PYTHONPATH, as the LMCache zygote starts: the server sets
                # the hosts' environment and sys.path from env.json itself
                self.process = subprocess.Popen(
                    [sys.executable, *argv], cwd=folder, stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
                self.pid = self.process.pid
        launcher = compiled_launcher()
        if launcher is not None:
            return [str(launcher), self.socket]
        return [sys.executable, "-S", "-c", _LAUNCHER, self.socket]

    def close(self) -> None:
        """End the zygote (reaped here, or by the LMCache zygote, its parent, when that
        is closed)."""
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            if self.process is not None:
                self.process.wait()
                self.process = None
            self.pid = None
        self.folder.cleanup()
