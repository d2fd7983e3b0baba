"""LMCache: 'lookup' diverges from the kvoffload spec, in its own API.

Found by `kvoffload check lmcache==0.5.6`: lookup answers MISS iff absent, PENDING iff its store is in flight, HIT iff READY (safe profile: PENDING may read as MISS, never as HIT); vLLM's RETRY only where the spec says PENDING.
lookup('a') must answer MISS (strict profile); the target answered PENDING

The operations of the spec's API, as kvoffload made them (tier of 1):
    1. prepare_store(['a'])
    2. complete_store(['a'], success=False)
    3. lookup('a')

Below, each operation (``step``) is followed by exactly the LMCache calls kvoffload's
adapter made for it, and each call's answer is compared with the answer LMCache gave
under kvoffload. Run it with plain `python` (no kvoffload needed). It prints every call
and answer, then the divergent operation's calls next to what the spec demands. Exit
status 1: LMCache answered every call as under kvoffload, so the divergence is its own;
0: some answer differs (not reproduced outside kvoffload).
The disk writes are held: lmcache_harness's HeldWrites replaces the disk backend's
write_file by one that waits until the write is released (HeldWrite.release), so a store
stays in flight as long as the caller says, and a store released with success=False
makes write_file raise OSError, as a full or failing disk would.
"""

# --- the reproducer's helpers (copied into every script from here on) ---
import dataclasses
import enum
import linecache
import sys
from typing import Any

NAMED: dict[str, Any] = {}
"""Objects the script named (keys, buffers), by name: an answer holding one is written
as its name."""
SAME = [0]
"""How many answers were the same as under kvoffload."""
OTHER: list[tuple[str, Any, Any]] = []
"""The answers that were not: (line, answer, answer under kvoffload)."""
STEPS: list[tuple[str, list[tuple[str, Any]]]] = []


def plain(value: Any, named: dict[str, Any] | None = None) -> Any:
    """An answer in a form that compares across processes: literals as they are,
    sequences item by item, dataclasses field by field, named objects by name, any
    other object by its type."""
    named = NAMED if named is None else named
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    for name, known in named.items():
        try:
            if value is known or (type(value) is type(known) and bool(value == known)
                                  and type(value).__module__ != "builtins"):
                return "<" + name + ">"
        except Exception:
            continue
    if isinstance(value, enum.Enum):
        return "<" + type(value).__name__ + "." + value.name + ">"
    if isinstance(value, (list, tuple)):
        return [plain(item, named) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((plain(item, named) for item in value), key=repr)
    if isinstance(value, dict):
        return [[plain(k, named), plain(v, named)] for k, v in value.items()]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"type": type(value).__name__,
                **{f.name: plain(getattr(value, f.name), named)
                   for f in dataclasses.fields(value)}}
    if callable(getattr(value, "tolist", None)):
        return plain(value.tolist(), named)
    return "<" + type(value).__name__ + ">"


def _note(line: str, got: Any, expected: Any) -> None:
    same = got == expected
    SAME[0] += same
    if not same:
        OTHER.append((line, got, expected))
    if STEPS:
        STEPS[-1][1].append((line, got))
    print("    " + line + "\n        -> " + repr(got)
          + ("" if same else "   (under kvoffload: " + repr(expected) + ")"))


def saw(value: Any, expected: Any, name: str | None = None) -> None:
    """The answer of the call on the line above, printed and compared with ``expected``
    (what the engine answered under kvoffload); ``name``: the script names it so."""
    frame = sys._getframe(1)
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno - 1).strip()
    _note(line, plain(value), expected)
    if name is not None:
        NAMED[name] = value


def made(value: Any, name: str) -> Any:
    """An object the script makes (a key, a backend), named so in the answers."""
    NAMED[name] = value
    return value


def raises(expected: str | None) -> "_Raises":
    """The call in this ``with`` raises (``expected``: its class's name, or None)."""
    return _Raises(expected)


class _Raises:

    def __init__(self, expected: str | None) -> None:
        self.expected = expected

    def __enter__(self) -> "_Raises":
        frame = sys._getframe(1)
        self.line = linecache.getline(frame.f_code.co_filename, frame.f_lineno + 1).strip()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: Any) -> bool:
        got = None if kind is None else "raises " + kind.__name__
        _note(self.line, got, None if self.expected is None else "raises " + self.expected)
        return kind is not None and issubclass(kind, Exception)


def step(text: str) -> None:
    """One operation of the spec's API, made on the engine by the calls after it."""
    STEPS.append((text, []))
    print(text)


def finish(failing: str, spec_table: str, what: str) -> int:
    """Print the divergent operation's calls beside the spec's demand; the exit status."""
    print()
    same = not OTHER
    calls = [answers for text, answers in STEPS if text.split(". ", 1)[-1] == failing]
    print("the divergence, at " + failing + ":")
    for line, got in (calls[-1] if calls else []):
        print("    " + line + "  -> " + repr(got))
    print("what the spec demands, next to what " + what + " showed under kvoffload:")
    print(spec_table)
    if same:
        print("REPRODUCED: every call answered as it did under kvoffload ("
              + str(SAME[0]) + " answers): " + what + " diverges from the spec here")
        return 1
    print("NOT REPRODUCED: " + str(len(OTHER)) + " answer(s) differ from those under "
          "kvoffload; the first: " + OTHER[0][0] + " -> " + repr(OTHER[0][1]))
    return 0


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



from lmcache.v1.config import LMCacheEngineConfig
from lmcache.v1.pin_monitor import PinMonitor
from lmcache.v1.memory_allocators.host_memory_allocator import HostMemoryAllocator
from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend
from lmcache.v1.storage_backend.local_disk_backend import LocalDiskBackend
from lmcache.utils import CacheEngineKey
import torch

SPEC = "                   spec         target\n-----------------  -----------  -----------\ncall               lookup('a')  lookup('a')\nanswer             MISS         PENDING\nspec state of 'a'  ABSENT"


def main():
    directory = scratch_directory('lmcache-disk-')
    config = made(LMCacheEngineConfig.from_defaults(chunk_size=16, cache_policy='LRU', local_cpu=False, max_local_cpu_size=0.015625, local_disk=directory, max_local_disk_size=3.814697265625e-06, extra_config={'disk_io_threads': 4}), 'config')
    v1 = made(PinMonitor.GetOrCreate(config), 'v1')
    allocator = made(HostMemoryAllocator(16777216), 'allocator')
    staging = made(LocalCPUBackend(config, memory_allocator=allocator), 'staging')
    loop = start_loop()
    backend = made(LocalDiskBackend(config, loop, staging), 'backend')
    writes = made(HeldWrites(backend), 'writes')
    step("1. prepare_store(['a'])")
    key_a = made(CacheEngineKey(model_name='kvoffload', world_size=1, worker_id=0, chunk_hash=1, dtype=torch.uint8), 'key_a')
    answer = backend.contains(key_a)
    saw(answer, False)
    answer = backend.exists_in_put_tasks(key_a)
    saw(answer, False)
    answer = list(backend.dict)
    saw(answer, [])
    v2 = staging.allocate(torch.Size([2, 1, 16, 128]), torch.uint8, busy_loop=False)
    saw(v2, '<TensorMemoryObj>', 'v2')
    v3 = writes.expect(key_a)
    saw(v3, '<HeldWrite>', 'v3')
    answer = backend.submit_put_task(key_a, v2, on_complete_callback=v3.on_complete)
    saw(answer, None)
    answer = v2.ref_count_down()
    saw(answer, None)
    answer = list(backend.dict)
    saw(answer, [])
    answer = list(backend.dict)
    saw(answer, [])
    answer = backend.exists_in_put_tasks(key_a)
    saw(answer, True)
    step("2. complete_store(['a'], success=False)")
    answer = v3.release(False, 30.0)
    saw(answer, True)
    answer = list(backend.dict)
    saw(answer, [])
    answer = backend.exists_in_put_tasks(key_a)
    saw(answer, True)
    step("3. lookup('a')")
    answer = backend.contains(key_a)
    saw(answer, False)
    answer = backend.exists_in_put_tasks(key_a)
    saw(answer, True)
    return finish("lookup('a')", SPEC, 'LMCache')


if __name__ == "__main__":
    try:
        status = main()
    except Exception:
        import traceback

        traceback.print_exc()
        print("the script failed before it could compare the answers")
        status = 2
    sys.exit(status)
