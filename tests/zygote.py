"""Engine scripts run as in a fresh interpreter, without paying for LMCache's import each time.

An engine-native reproducer (docs/reproducers/, :mod:`kvoffload.conformance.command.engine_script`)
is run by ``python script.py`` in a fresh process: nothing of kvoffload is imported there,
so the divergence it shows is the engine's alone. Most of such a run is importing torch and
LMCache (about 5 s of CPU each time); the script's own calls take milliseconds.

:class:`Zygote` is one process per test session, started as ``python -c`` with the same
environment a script gets (no ``PYTHONPATH``), which imports **only** :data:`PRELOADED` (torch
and the LMCache modules every LMCache reproducer imports) and then waits. For each script it
forks a child that is what ``python script.py`` would be once those imports are done:

- the script's folder first on ``sys.path`` and ``sys.argv[0]`` the script, run by
  :func:`runpy.run_path` as ``__main__``, in the folder it is given;
- its own stdout and stderr (files, read back whole), stdin ``/dev/null``;
- its own exit status: the script's ``sys.exit`` leaves the child the way it leaves an
  interpreter (non-daemon threads joined, ``atexit`` handlers run, the streams flushed), and
  an uncaught exception prints its traceback and exits 1, as ``python script.py`` does;
  then the child ends by :func:`os._exit`, as :mod:`multiprocessing`'s forked children do
  (:func:`python_exit.end_as_python`, whose source the zygote runs, as
  tests/host_zygote.py's forked hosts end).

What the zygote may have imported before a fork: the standard library it needs itself
(:mod:`gc`, :mod:`json`, :mod:`os`, :mod:`sys`, :mod:`threading`, and what
:mod:`deferred_import` and :mod:`python_exit`, whose sources it runs, import;
:mod:`runpy` in the child, and :mod:`tempfile` where the run is given a ``TMPDIR``) and
:data:`PRELOADED` with what they import, but for transformers, aiohttp and numba: LMCache
takes four names from them and calls none on the paths its reproducers run, and importing
them was about 1.8 s of the zygote's CPU, so the zygote imports LMCache with those names deferred
(:mod:`deferred_import`: each imports its module at its first use, and a script's own
``import transformers`` gets the real module). What it may not: anything of kvoffload. Before
every fork it checks ``sys.modules`` for ``kvoffload`` and that no Python thread but its own
runs (a fork copies only the calling thread); either refuses the run (:class:`ZygoteError`).
One native thread does run: the idle worker of OpenBLAS (numpy's, which torch imports), whose
pool OpenBLAS's own fork handler rebuilds. After the imports the zygote calls
:func:`gc.freeze`, as Python's documentation advises before forking without exec: a child's
collections then skip the preloaded objects instead of touching (so copying) every page of
them, which cost about 1.2 s of CPU per run, more than the script. It imports with the
collector off (what the imports leave is frozen anyway; collecting during them was about
0.2 s of the zygote's 1.9 s) and switches it on again before the first fork, and it ends,
once closed, by :func:`python_exit.end_as_python` (its exit handlers run, not the
teardown of torch and LMCache, about 0.2 s more).

:meth:`Zygote.spawn` forks such a child without waiting for it (the zygote serves the next
runs beside it and reaps it when closed): tests/host_zygote.py makes its host zygote so,
a fork that then imports kvoffload's host (the zygote itself never does).

What differs from a fresh process: LMCache's import-time log lines go to the zygote's
stderr (discarded), not the script's; and the interpreter's teardown after the exit
handlers (every module and object freed) does not run, so finalizers of objects still
alive then do not run either. That teardown is what a fork pays most for: it writes to
every preloaded object, so copies every page of them (about 0.3 s of CPU per run,
against 0.06 s for a reproducer's whole run without it). A script that does not
reproduce is not helped: it still exits 0 or 2, and the test reading its status fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from deferred_import import import_deferring

PRELOADED = (
    "torch",
    "lmcache.utils",
    "lmcache.v1.config",
    "lmcache.v1.memory_allocators.host_memory_allocator",
    "lmcache.v1.pin_monitor",
    "lmcache.v1.storage_backend.local_cpu_backend",
)
"""Imported once by the zygote: what every LMCache reproducer imports (docs/reproducers)."""


def import_lmcache_here() -> None:
    """LMCache imported into this process as the zygote imports it (:data:`PRELOADED`
    and the disk backend, transformers, aiohttp and numba deferred:
    :mod:`deferred_import`), for the tests that run LMCache in the tests' own process:
    called before their first use of it, it spares that process their imports (about
    1.8 s of CPU). Where LMCache is
    imported already, it imports nothing. LMCache's loggers take their level at its
    import: as the suite's loader imports it (``LMCACHE_LOG_LEVEL`` ERROR unless set)."""
    os.environ.setdefault("LMCACHE_LOG_LEVEL", "ERROR")  # as lmcache_loader.lmcache_factory
    import_deferring((*PRELOADED, "lmcache.v1.storage_backend.local_disk_backend"))

_SERVER = (Path(__file__).with_name("deferred_import.py").read_text()
           + Path(__file__).with_name("python_exit.py").read_text() + r'''
import gc, json, os, sys, threading


def serve(reply):
    """Answer requests until one is this process's own (a forked child's): return it."""
    detached = []
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            for pid in detached:  # reaped here, so their CPU counts to whoever reaps this
                os.waitpid(pid, 0)
            # Its exit handlers run, not the teardown of torch and LMCache (about 0.2 s
            # of CPU): nothing reads this process's end but its status.
            end_as_python(lambda: sys.exit(0))
        refused = [m for m in sys.modules if m == "kvoffload" or m.startswith("kvoffload.")]
        if refused or threading.active_count() != 1:
            threads = threading.active_count()
            reply.write(json.dumps({"refused": refused, "threads": threads}) + "\n")
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            reply.close()
            return json.loads(line)
        reply.write(json.dumps({"pid": pid}) + "\n")
        if json.loads(line).get("detach"):
            detached.append(pid)
            continue
        _, status = os.waitpid(pid, 0)
        reply.write(json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n")


def become(request):
    """This child as ``python SCRIPT ARGS`` would be: streams, folder, argv, sys.path."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, fd)
        os.close(out)
    os.chdir(request["cwd"])
    if request.get("tmpdir"):  # as TMPDIR=... in the environment of ``python SCRIPT``
        import tempfile
        os.environ["TMPDIR"] = tempfile.tempdir = request["tmpdir"]
    sys.argv = list(request["argv"])
    sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
    return sys.argv[0]


def run(script):
    """Run ``script`` as ``__main__`` and end as ``python script`` ends, but for the
    interpreter's teardown (:func:`python_exit.end_as_python`), which in a fork touches
    (so copies) every page of the preloaded modules: about 0.3 s of CPU per run, more
    than a script's own calls."""
    import runpy
    end_as_python(lambda: runpy.run_path(script, run_name="__main__"))


gc.disable()  # while importing: collections of what the imports keep, about 0.2 s
import_deferring(json.loads(sys.argv[1]))
gc.freeze()
gc.enable()  # a script's run collects as in a fresh interpreter
run(become(serve(os.fdopen(int(sys.argv[2]), "w", buffering=1))))
''')


class ZygoteError(Exception):
    """The zygote refused a run (kvoffload in its ``sys.modules``, or a second thread) or
    ended."""


class Zygote:
    """One pre-importing process; :meth:`run` runs a script in a fork of it."""

    def __init__(self, preload: tuple[str, ...] = PRELOADED) -> None:
        self.preload = preload
        self.process: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def start(self) -> None:
        """Start the zygote's imports now, without waiting for them (a test session
        starts it while its first test imports LMCache itself)."""
        self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        """The zygote's process, started by :meth:`start` or the first run."""
        if self.process is not None:
            return self.process
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.folder = tempfile.TemporaryDirectory(prefix="kvoffload-zygote-")
        read, write = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-c", _SERVER, json.dumps(list(self.preload)), str(write)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd=self.folder.name, env=env, pass_fds=(write,))
        os.close(write)
        self.replies = os.fdopen(read, "r")
        return self.process

    def _reply(self) -> dict[str, object]:
        line = self.replies.readline()
        if not line:
            assert self.process is not None
            raise ZygoteError(f"the zygote ended (exit {self.process.wait()}): is "
                              f"everything of {self.preload} installed?")
        answer: dict[str, object] = json.loads(line)
        if "refused" in answer:
            raise ZygoteError(f"the zygote is not a clean interpreter: {answer}")
        return answer

    def run(self, argv: list[str], cwd: Path | str, timeout: float,
            tmpdir: Path | None = None) -> tuple[int | None, str, str]:
        """``python *argv`` in ``cwd``: (exit status, None if it ran past ``timeout`` and
        was killed; stdout; stderr). ``tmpdir``: the run's ``TMPDIR`` (where its
        :mod:`tempfile` makes what it makes), as if it were in its environment."""
        stdin = self._start().stdin
        assert stdin is not None
        self.runs += 1
        out = Path(self.folder.name) / f"{self.runs}.out"
        err = Path(self.folder.name) / f"{self.runs}.err"
        asked = {"argv": [str(a) for a in argv], "cwd": str(Path(cwd).resolve()),
                 "stdout": str(out), "stderr": str(err)}
        if tmpdir is not None:
            asked["tmpdir"] = str(Path(tmpdir).resolve())
        stdin.write(json.dumps(asked).encode() + b"\n")
        stdin.flush()
        pid = int(str(self._reply()["pid"]))
        timer = _Alarm(timeout, pid)
        try:
            status: int | None = int(str(self._reply()["status"]))
        finally:
            timer.cancel()
        if timer.fired:
            status = None
        return status, out.read_text(), err.read_text()

    def spawn(self, argv: list[str], cwd: Path | str) -> int:
        """``python *argv`` in ``cwd`` in a fork the zygote does not wait for: its pid,
        once the zygote has forked it (its streams go to files in the zygote's folder).
        The zygote serves the next runs beside it and reaps it when it is closed: whoever
        spawns one ends it first, by its pid (tests/host_zygote.py)."""
        stdin = self._start().stdin
        assert stdin is not None
        self.runs += 1
        folder = Path(self.folder.name)
        asked = {"argv": [str(a) for a in argv], "cwd": str(Path(cwd).resolve()),
                 "stdout": str(folder / f"{self.runs}.out"),
                 "stderr": str(folder / f"{self.runs}.err"), "detach": True}
        stdin.write(json.dumps(asked).encode() + b"\n")
        stdin.flush()
        return int(str(self._reply()["pid"]))

    def close(self) -> None:
        if self.process is None:
            return
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.replies.close()
        self.folder.cleanup()
        self.process = None


class _Alarm:
    """Kill ``pid`` (the script's child) if it runs past ``seconds``."""

    def __init__(self, seconds: float, pid: int) -> None:
        import threading

        self.fired = False
        self.pid = pid
        self.timer = threading.Timer(seconds, self._fire)
        self.timer.daemon = True
        self.timer.start()

    def _fire(self) -> None:
        self.fired = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def cancel(self) -> None:
        self.timer.cancel()
