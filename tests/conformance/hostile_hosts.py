"""Hostile targets of issue 22 (found by a hostile tester against the shared process):
the source of each, written to a file of its own by test_host.py and checked with
``kvoffload check FILE:Target``. Each defines ``Target``; the pieces meant to be
appended to another (a cheat, a thread) start at module level."""

from __future__ import annotations

CONFORMING = """
from kvoffload.impl import OffloadManager

class Target(OffloadManager):
    pass
"""

NOT_CONFORMING = """
from kvoffload.impl import OffloadManager
from kvoffload.spec import LookupResult

class Target(OffloadManager):
    def lookup(self, key):  # never PENDING: fails 'lookup' at once
        answer = super().lookup(key)
        return LookupResult.MISS if answer is LookupResult.PENDING else answer
"""

CHEATS = {
    "patches the runner's exploration": """
import kvoffload.conformance.command.runner as runner
runner._explore = lambda *args, **kwargs: False
""",
    "wraps Lockstep.step to swallow violations": """
from kvoffload.conformance.judge.lockstep import Lockstep
_step = Lockstep.step
def _quiet(self, call):
    try:
        return _step(self, call)
    except Exception:
        return None
Lockstep.step = _quiet
""",
    "replaces the exit status": """
import kvoffload.conformance.command.check_command as command
command.exit_status = lambda verdict, error: 0
""",
    "replaces the Hypothesis settings": """
import kvoffload.conformance.command.runner as runner
_settings = runner.settings
runner.settings = lambda **kwargs: _settings(**{**kwargs, "max_examples": 0})
""",
    "an atexit hook that forges the verdict": """
import atexit, os
def _forge():
    for fd in range(3, 64):
        try:
            os.write(fd, b"V0\\n")
        except OSError:
            pass
    os._exit(0)
atexit.register(_forge)
""",
}
"""Each appended to NOT_CONFORMING: in one process each of these gave exit 0."""

WRITES_V0_AND_EXITS = """
import os
class Target(Target):
    def touch(self, keys):
        for fd in range(1, 64):
            try:
                os.write(fd, b"V0\\n")
            except OSError:
                pass
        os._exit(0)
"""

EXITS_IN_A_CALL = """
import os
from kvoffload.impl import OffloadManager

class Target(OffloadManager):
    def complete_store(self, keys, success=True, ticket=None):
        os._exit(0)
"""

KILLS_ITSELF = """
import os, signal
from kvoffload.impl import OffloadManager

class Target(OffloadManager):
    def reset_cache(self):
        os.kill(os.getpid(), signal.SIGKILL)
"""

SLEEPS_ON_CONSTRUCTION = """
import time
from kvoffload.impl import OffloadManager
BUILT = [0]

class Target(OffloadManager):
    def __init__(self, *args, **kwargs):
        BUILT[0] += 1
        if BUILT[0] == WHEN:
            while True:
                time.sleep(1)
        super().__init__(*args, **kwargs)
"""
"""WHEN: the construction that never returns (1: the first, the adapter's)."""

IGNORES_SIGALRM_AND_LOOPS = """
import signal
from kvoffload.impl import OffloadManager
signal.signal(signal.SIGALRM, signal.SIG_IGN)

class Target(OffloadManager):
    def touch(self, keys):
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        while True:
            try:
                pass
            except BaseException:
                pass
"""

ENDLESS_THREAD = """
import threading, time
def _forever():
    while True:
        time.sleep(1)
threading.Thread(target=_forever).start()  # not a daemon: the interpreter waits for it
"""

STARTS_A_WORKER = """
import os, subprocess, sys, time
from kvoffload.impl import OffloadManager
WORKER = []

class Target(OffloadManager):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not WORKER:
            WORKER.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"]))
            with open("RECORD", "w") as out:
                out.write(f"{os.getpid()} {WORKER[0].pid}")

    def lookup(self, key):
        time.sleep(0.01)
        return super().lookup(key)
"""
"""RECORD: a file that gets "HOST_PID WORKER_PID"."""

SENDS_ITSELF_SIGINT = """
import os, signal
from kvoffload.impl import OffloadManager

class Target(OffloadManager):
    def touch(self, keys):
        os.kill(os.getpid(), signal.SIGINT)
        return super().touch(keys)
"""

FORKS_IN_A_CALL = """
import os, time
from kvoffload.impl import OffloadManager
FORKED = []

class Target(OffloadManager):
    def reset_cache(self):
        if not FORKED:
            pid = os.fork()
            if pid == 0:  # the child holds every descriptor the host had, then sleeps
                time.sleep(300)
                os._exit(0)
            FORKED.append(pid)
            with open("RECORD", "w") as out:
                out.write(str(pid))
        return super().reset_cache()
"""

CLOSES_FD_1 = """
import os
os.close(1)
"""

CHDIR = """
import os
os.chdir("WHERE")
"""

REPLACES_DIRECTORY = """
import os, shutil
class Target(Target):
    def reset_cache(self):
        if os.path.isdir("WHERE"):
            shutil.rmtree("WHERE")
        return super().reset_cache()
"""

RANDOM_CRASH = """
import random
from kvoffload.impl import OffloadManager

class Target(OffloadManager):
    def lookup(self, key):
        if random.random() < 0.05:
            raise RuntimeError("one call in twenty")
        return super().lookup(key)
"""

FORK_RETURNS = """
import os
from kvoffload.impl import OffloadManager

class Target(OffloadManager):
    def touch(self, keys):
        os.fork()  # parent and child both return from the call into the host
        return super().touch(keys)
"""
"""A fork whose child does not exit: it comes back into the host, which must not let it
answer (two processes reading the channel would split the requests)."""

REPLACES_DIRECTORY_BY_A_FILE = """
import os, shutil
class Target(Target):
    def reset_cache(self):
        if os.path.isdir("WHERE"):
            shutil.rmtree("WHERE")
            with open("WHERE", "w") as out:
                out.write("not a folder")
        return super().reset_cache()
"""

EXIT_HANDLER_TAKES_ITS_TIME = """
import atexit, os, time
from kvoffload.impl import OffloadManager

with open("RECORD.loaded", "a") as out:
    out.write(f"{os.getpid()}\\n")

def _slow_goodbye():
    time.sleep(0.3)
    with open("RECORD.ended", "a") as out:
        out.write(f"{os.getpid()}\\n")

atexit.register(_slow_goodbye)

class Target(OffloadManager):
    pass
"""
"""RECORD.loaded gets the pid of each host that loaded the target, RECORD.ended the pid
of each whose exit handler ran to its end (0.3 s, within the judge's grace after bye)."""
