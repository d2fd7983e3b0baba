"""What the LMCache adapters do around LMCache's calls, shared with their reproducers.

The disk adapter holds each of ``LocalDiskBackend``'s writes at ``write_file`` until the
suite completes the store (and fails it with an ``OSError`` for a failed store), and
runs the backends on one asyncio loop in a thread. An engine-native reproducer
(:mod:`kvoffload.conformance.command.engine_script`) must do the same with LMCache alone, so this
module's source, from the marker line on, is copied into it as it is: standard library only.
"""

# --- the LMCache harness (copied into reproducers from here on) ---
import asyncio
import atexit
import shutil
import tempfile
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def scratch_directory(prefix: str) -> str:
    """A new temporary directory, removed when the process exits (by a return, an exit
    status or an exception; not when it is killed). Removed by ``atexit``, which runs
    after the threads are joined (a held disk write is released at exit, then its
    thread joined), so nothing is written into it once it is gone."""
    directory = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


def start_loop() -> asyncio.AbstractEventLoop:
    """An asyncio loop in a daemon thread, as LMCache's storage manager runs one for its
    backends; its default pool has room for every write that is held (LMCache runs each
    disk write with ``asyncio.to_thread``, and a held write keeps its thread)."""
    loop = asyncio.new_event_loop()
    loop.set_default_executor(ThreadPoolExecutor(max_workers=64))
    threading.Thread(target=loop.run_forever, name="lmcache-loop", daemon=True).start()
    return loop


class HeldWrite:
    """One disk write, held at ``write_file`` until :meth:`release`."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.done = threading.Event()
        self.success = True

    def on_complete(self, key: Any) -> None:
        """``submit_put_task``'s ``on_complete_callback``: the write went through."""
        self.done.set()

    def release(self, success: bool, timeout: float) -> bool:
        """Let the write go on (``success`` False: ``write_file`` raises ``OSError``);
        True once it has finished (written, or raised) within ``timeout`` seconds."""
        self.success = success
        self.go.set()
        return self.done.wait(timeout)


def _release_at_exit(ref: Any) -> Any:
    """What runs at exit for one HeldWrites (a weak reference: it keeps none alive)."""
    def release() -> None:
        held = ref()
        if held is not None:
            held.release_all()
    return release


class HeldWrites:
    """``backend.write_file`` replaced by one that waits for its write's release: a
    store stays in flight (in the put tasks) for as long as the caller says."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.original = backend.write_file
        self.lock = threading.Lock()
        self.expected: dict[str, HeldWrite] = {}
        self.all: list[HeldWrite] = []
        backend.write_file = self.write_file
        register = getattr(threading, "_register_atexit", None)
        if register is not None:  # before the pools join their (held) threads at exit
            register(_release_at_exit(weakref.ref(self)))

    def expect(self, key: Any) -> HeldWrite:
        """The write that the next ``submit_put_task`` of ``key`` starts."""
        write = HeldWrite()
        with self.lock:
            self.expected[self.backend._key_to_path(key)] = write
            self.all.append(write)
        return write

    def forget(self, key: Any) -> None:
        """``submit_put_task`` of ``key`` started no write (the backend refused it)."""
        with self.lock:
            self.expected.pop(self.backend._key_to_path(key), None)

    def write_file(self, buffer: Any, path: str) -> None:
        with self.lock:
            write = self.expected.pop(path, None)
        if write is None:
            write = HeldWrite()
            write.go.set()
        write.go.wait()
        try:
            if not write.success:
                raise OSError("the store was failed: this write raises (" + path + ")")
            self.original(buffer, path)
        except BaseException:
            write.done.set()  # no completion callback follows a write that raised
            raise

    def release_all(self) -> None:
        """Let every write still held go on, failing (at exit, or when a tier closes)."""
        for write in list(self.all):
            if not write.go.is_set():
                write.success = False
                write.go.set()
