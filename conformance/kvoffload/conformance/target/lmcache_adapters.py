"""Adapters for LMCache's storage backends (``lmcache==0.5.6``), its real code.

LMCache stores KV *chunks* under ``CacheEngineKey``s; a backend answers ``contains``
and ``exists_in_put_tasks``, takes a chunk with ``submit_put_task``, hands one out with
``get_blocking`` (a ``MemoryObj`` the caller must ``ref_count_down``) and evicts with
its cache policy. Each adapter maps the spec's operations onto those calls, one chunk
per key (a caller that skips chunks the backend already holds or is writing, as
LMCache's vLLM connector skips saved prefixes; LMCache's ``store()`` allocates for every
chunk and lets ``submit_put_task`` drop a duplicate):

- ``lookup``: ``contains`` -> HIT, else ``exists_in_put_tasks`` -> PENDING (never true
  on the CPU backend), else MISS.
- ``prepare_store`` (CPU): ``allocate(busy_loop=False)`` per chunk not contained (it
  evicts LRU inside; None: no room); the chunk is being written while its buffer is held.
  (disk): a staging buffer, then ``submit_put_task``, which admits the chunk (evicting)
  or refuses it.
- ``complete_store`` (CPU): success ``submit_put_task``, failure drops the buffer; both
  ``ref_count_down`` the caller's reference. (disk): the held disk write goes on (or
  fails with an ``OSError``).
- ``prepare_load``: (CPU) ``get_blocking``, the slot is the buffer's address / chunk size;
  (disk) ``pin`` then ``get_blocking``. ``complete_load``: ``ref_count_down`` of that
  buffer (disk: and ``unpin``). Both are all or nothing, as the spec's calls are: every
  chunk is checked first (``contains``, which changes nothing; a buffer held for each
  key to complete), and a call refused leaves no chunk pinned, read or released.
- ``touch``: ``contains(pin=True)`` per chunk, ``touch_cache()``, ``unpin``.
- ``reset_cache``: ``clear()`` (the CPU backend; the disk backend has none: not generated).
- ``take_events``: none (LMCache's backends publish to a controller, not a subscriber).

What is not LMCache's own: on the disk backend the adapter holds each disk write at
its ``write_file`` until the suite completes that store (and makes the write raise an
``OSError`` for a failed store), so the store's in-flight phase lasts as long as the
suite says; and the disk backend has no slots (a chunk's file is named by its key), so
the adapter numbers the chunks the backend holds or is writing, lowest free number
first. Nothing else is replaced or mocked.

LMCache answers misuse (``get_blocking`` of an absent chunk) with ``None``; the
adapter asks ``contains`` first and refuses with :class:`Refused` (the rejection)
before it reads anything. A
``complete_load`` for a key the adapter holds no buffer of cannot be expressed in
LMCache's API (``ref_count_down`` is a method of the buffer): it is refused too.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import importlib
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from kvoffload.spec import Completion, Key, LookupResult

from ..adapter_api import Capabilities, EventBatch, LoadOutcome, Reported, StoreOutcome
from . import engine_record, lmcache_harness

CHUNK_BYTES = 4096
"""One chunk: a 4096-byte uint8 tensor (the allocator's alignment, so chunk i of a tier
sits at address i * CHUNK_BYTES and a tier of N chunks holds exactly N)."""
STAGING_CHUNKS = 4096
"""The disk backend's CPU staging pool (``local_cpu=False``: no hot cache): large
enough that its blocking allocations for reads and writes never wait."""
WAIT_S = 30.0
"""How long a disk write the suite released may take before the adapter gives up."""


class Refused(Exception):
    """LMCache's way of declining a call: ``None`` from ``get_blocking``, or a call its
    API cannot express (counts as the rejection of misuse)."""


def _lm(name: str) -> Any:
    return importlib.import_module(name)


def _torch() -> Any:
    return importlib.import_module("torch")


def _shape() -> Any:
    return _torch().Size([2, 1, 16, CHUNK_BYTES // 32])  # KV_2LTD: 2 x layers x tokens x dim


def _config(rec: Any, **values: Any) -> Any:
    """An LMCacheEngineConfig; also sets up the process-wide ``PinMonitor`` from it, as
    LMCache's engine does at start (``MemoryObj.pin`` needs it)."""
    config_cls = _lm("lmcache.v1.config").LMCacheEngineConfig
    rec.home(config_cls, "lmcache.v1.config")
    config = rec.new(config_cls, method="from_defaults", chunk_size=16, cache_policy="LRU",
                     **values, name="config")
    rec.new(_lm("lmcache.v1.pin_monitor").PinMonitor, config, method="GetOrCreate")
    return config


class _Keys:
    """Spec keys <-> LMCache's ``CacheEngineKey`` (the key's text hashed to chunk_hash)."""

    def __init__(self, rec: Any) -> None:
        self._to: dict[Key, Any] = {}
        self._from: dict[Any, Key] = {}
        self._cls = _lm("lmcache.utils").CacheEngineKey
        self._dtype = _torch().uint8
        self._rec = rec

    def __call__(self, key: Key) -> Any:
        raw = self._to.get(key)
        if raw is None:
            raw = self._rec.new(self._cls, model_name="kvoffload", world_size=1, worker_id=0,
                                chunk_hash=len(self._to) + 1, dtype=self._dtype,
                                name=engine_record.identifier(key))
            self._to[key], self._from[raw] = raw, key
        return raw

    def back(self, raw: Any) -> Key:
        return self._from[raw]


def _capabilities(touch: bool, reset: bool) -> Capabilities:
    """No events, no job names (tickets or epochs), misuse answered by None, a lookup
    that can say PENDING (the disk backend does; the CPU backend's never does)."""
    no_job_names = {f.name: False for f in dataclasses.fields(Capabilities)
                    if f.name in ("completion_epochs", "completion_tickets")}
    return Capabilities(touch=touch, reset=reset, events=False, typed_misuse=False,
                        strict_lookup=True, **no_job_names)


def _take(held: list[tuple[int, Any]], resets: int) -> Any:
    """The buffer a completion without a job name releases: the oldest one started since
    the last reset (the live block's job), else the oldest from before it: what the
    spec's vLLM form matches, and what a caller holding each job's buffer would release."""
    index = next((i for i, (since, _) in enumerate(held) if since == resets), 0)
    return held.pop(index)[1]


def _outcome(
    stored: list[Key], slots: list[int], evicted: list[Key], full: bool
) -> StoreOutcome:
    """Rejected if the backend found no room (``full``) and took or evicted nothing for
    the call (it reports no shortfall); else accepted with what it did."""
    if full and not stored and not evicted:
        return StoreOutcome(False)
    return StoreOutcome(True, tuple(stored), tuple(slots), tuple(evicted))


class _Base:
    """What both backends share: keys, held buffers, lookup, touch."""

    name = "lmcache"
    backend: Any

    def __init__(self) -> None:
        self.rec = engine_record.active()
        """What this tier's engine calls are written down with (:mod:`.engine_record`)."""
        self.keys = _Keys(self.rec)
        self.reads: dict[Key, list[tuple[int, Any]]] = {}
        """Buffers ``get_blocking`` handed out and not yet released, oldest first, each
        with the number of resets before it."""
        self.resets = 0

    def _resident(self) -> frozenset[Key]:
        raise NotImplementedError

    def _store_one(self, key: Key, raw: Any, evicted: list[Key]) -> int | None:
        """Start writing one chunk: its slot, or None if the backend found no room; adds
        what the allocation evicted to ``evicted``."""
        raise NotImplementedError

    def prepare_store(self, keys: Sequence[Key]) -> StoreOutcome:
        """Each new key's chunk in turn. LMCache allocates one chunk at a time: what it
        allocated (and evicted) for this call's earlier chunks stays when a later one
        finds no room; the outcome reports exactly that."""
        stored: list[Key] = []
        slots: list[int] = []
        evicted: list[Key] = []
        for key in dict.fromkeys(keys):
            raw = self.keys(key)
            if self.backend.contains(raw) or self.backend.exists_in_put_tasks(raw):
                continue
            slot = self._store_one(key, raw, evicted)
            if slot is None:
                return _outcome(stored, slots, evicted, full=True)
            stored.append(key)
            slots.append(slot)
        return _outcome(stored, slots, evicted, full=False)

    def _taken(self, held: dict[Key, list[tuple[int, Any]]],
               keys: Sequence[Key]) -> Iterator[tuple[Key, Any]]:
        """Each distinct key's held buffer (or write) that a completion releases; keys
        with none held are passed over."""
        for key in dict.fromkeys(keys):
            queue = held.get(key)
            if queue:
                yield key, _take(queue, self.resets)

    def lookup(self, key: Key) -> Reported:
        raw = self.keys(key)
        if self.backend.contains(raw):
            return LookupResult.HIT
        if self.backend.exists_in_put_tasks(raw):
            return LookupResult.PENDING
        return LookupResult.MISS

    def touch(self, keys: Sequence[Key]) -> None:
        pinned = [raw for raw in map(self.keys, keys) if self.backend.contains(raw, pin=True)]
        self.backend.touch_cache()
        for raw in pinned:
            self.backend.unpin(raw)

    def take_events(self) -> EventBatch:
        raise Refused("LMCache's backends publish no events to a subscriber")

    def is_rejection(self, error: BaseException) -> bool:
        return isinstance(error, Refused)

    def _readable(self, keys: Sequence[Key]) -> list[Key]:
        """The call's distinct keys, once every one is on the backend (``contains``,
        which changes nothing); else :class:`Refused` before any engine call that does:
        a refused load pins and reads nothing (all or nothing)."""
        distinct = list(dict.fromkeys(keys))  # a key named twice is read once
        absent = [key for key in distinct if not self.backend.contains(self.keys(key))]
        if absent:
            raise Refused(f"contains({absent[0]!r}) is False: the chunk cannot be read")
        return distinct

    def _held_reads(self, keys: Sequence[Key]) -> list[Key]:
        """The call's distinct keys, once every one has a ``get_blocking`` buffer held;
        else :class:`Refused` before any is released (all or nothing)."""
        distinct = list(dict.fromkeys(keys))  # a key named twice is completed once
        missing = [key for key in distinct if not self.reads.get(key)]
        if missing:
            raise Refused(f"no get_blocking buffer of {missing[0]!r} is held, so there is "
                          "nothing to ref_count_down")
        return distinct

    def _release_read(self, key: Key) -> Any:
        obj = _take(self.reads[key], self.resets)
        obj.ref_count_down()
        return obj


class CpuAdapter(_Base):
    """``LocalCPUBackend`` with a ``HostMemoryAllocator`` of ``capacity`` chunks."""

    name = "lmcache-cpu"

    def __init__(self, capacity: int) -> None:
        super().__init__()
        allocator = _lm("lmcache.v1.memory_allocators.host_memory_allocator")
        backend_cls = _lm("lmcache.v1.storage_backend.local_cpu_backend").LocalCPUBackend
        rec = self.rec
        config = _config(rec, local_cpu=True,
                         max_local_cpu_size=capacity * CHUNK_BYTES / 1024**3)
        memory = rec.new(allocator.HostMemoryAllocator, capacity * CHUNK_BYTES,
                         name="allocator")
        self.backend = rec.wrap(rec.new(backend_cls, config, memory_allocator=memory,
                                        name="backend"), "backend")
        self.writing: dict[Key, list[tuple[int, Any]]] = {}
        """Buffers allocated for a store and not yet put (the chunk being written)."""
        self.capabilities = _capabilities(touch=True, reset=True)

    def _resident(self) -> frozenset[Key]:
        return frozenset(self.keys.back(raw) for raw in self.backend.get_keys())

    def _store_one(self, key: Key, raw: Any, evicted: list[Key]) -> int | None:
        before = self._resident()
        obj = self.backend.allocate(_shape(), _torch().uint8, busy_loop=False)
        evicted.extend(sorted(before - self._resident(), key=repr))
        if obj is None:
            return None
        self.writing.setdefault(key, []).append((self.resets, obj))
        return int(obj.metadata.address // CHUNK_BYTES)

    def complete_store(
        self, keys: Sequence[Key], success: bool, ticket: int | None
    ) -> Completion | None:
        for key, obj in self._taken(self.writing, keys):
            if success:
                self.backend.submit_put_task(self.keys(key), obj)
            obj.ref_count_down()
        return None

    def prepare_load(self, keys: Sequence[Key]) -> LoadOutcome:
        taken: list[tuple[Key, Any]] = []
        for key in self._readable(keys):
            obj = self.backend.get_blocking(self.keys(key))
            if obj is None:  # cannot happen after contains(): undo what this call took
                for _, earlier in taken:
                    earlier.ref_count_down()
                raise Refused(f"get_blocking({key!r}) returned None")
            taken.append((key, obj))
        slot = {key: int(obj.metadata.address // CHUNK_BYTES) for key, obj in taken}
        for key, obj in taken:
            self.reads.setdefault(key, []).append((self.resets, obj))
        return LoadOutcome(None, tuple(slot[k] for k in keys))

    def complete_load(self, keys: Sequence[Key], ticket: int | None) -> Completion | None:
        for key in self._held_reads(keys):
            self._release_read(key)
        return None

    def reset_cache(self) -> int | None:
        self.backend.clear()
        self.resets += 1
        return None


class _Loop:
    """One asyncio loop in a daemon thread, shared by every disk backend (as LMCache's
    storage manager runs one loop for its backends)."""

    _loop: asyncio.AbstractEventLoop | None = None
    _lock = threading.Lock()

    @classmethod
    def get(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None:
                cls._loop = lmcache_harness.start_loop()
            return cls._loop


_OPEN: list[DiskAdapter] = []
"""Disk adapters not yet closed: each new one closes the older ones (their executor
threads and temporary directories), since the suite builds one per example. Held here
(not by weak reference): an adapter nobody uses any more still has its writes held in
the shared loop's threads until it is closed."""


def _at_exit() -> None:
    """Fail the writes still held and remove the open adapters' directories, before
    Python joins the pools' threads (a held write would keep its thread for ever)."""
    for adapter in _OPEN:
        adapter.release_writes()
        shutil.rmtree(adapter.directory, ignore_errors=True)


# Runs before concurrent.futures joins its workers (registered after it, run first);
# atexit would run after that join.
_register_at_exit = getattr(threading, "_register_atexit", atexit.register)
_register_at_exit(_at_exit)


class DiskAdapter(_Base):
    """``LocalDiskBackend`` in a temporary directory, ``capacity`` chunks of disk."""

    name = "lmcache-disk"

    def __init__(self, capacity: int) -> None:
        super().__init__()
        for old in _OPEN:
            old.close()
        _OPEN.clear()
        self.capacity = capacity
        self.directory = tempfile.mkdtemp(prefix="kvoffload-lmcache-disk-")
        rec = self.rec
        rec.made(self.directory, "directory",  # scratch_directory: carried below
                 "directory = scratch_directory('lmcache-disk-')")
        cpu_module = _lm("lmcache.v1.storage_backend.local_cpu_backend")
        disk_module = _lm("lmcache.v1.storage_backend.local_disk_backend")
        allocator = _lm("lmcache.v1.memory_allocators.host_memory_allocator")
        config = _config(rec, local_cpu=False,
                         max_local_cpu_size=STAGING_CHUNKS * CHUNK_BYTES / 1024**3,
                         local_disk=self.directory,
                         max_local_disk_size=capacity * CHUNK_BYTES / 1024**3,
                         extra_config={"disk_io_threads": 2 * capacity + 2})
        memory = rec.new(allocator.HostMemoryAllocator, STAGING_CHUNKS * CHUNK_BYTES,
                         name="allocator")
        self.staging = rec.wrap(rec.new(cpu_module.LocalCPUBackend, config,
                                        memory_allocator=memory, name="staging"), "staging")
        rec.carry(lmcache_harness, "# --- the LMCache harness")
        rec.note("The disk writes are held: lmcache_harness's HeldWrites replaces the disk "
                 "backend's write_file by one that waits until the write is released "
                 "(HeldWrite.release), so a store stays in flight as long as the caller "
                 "says, and a store released with success=False makes write_file raise "
                 "OSError, as a full or failing disk would.")
        rec.made(_Loop.get(), "loop", "loop = start_loop()")
        self.backend = rec.wrap(rec.new(disk_module.LocalDiskBackend, config, _Loop.get(),
                                        self.staging, name="backend"), "backend")
        self.held = rec.wrap(rec.new(lmcache_harness.HeldWrites, self.backend,
                                     name="writes"), "writes")
        self.pending: dict[Key, list[tuple[int, Any]]] = {}
        self.slot: dict[Key, int] = {}
        self.closed = False
        self.capabilities = _capabilities(
            touch=True, reset=callable(getattr(self.backend, "clear", None)))
        _OPEN.append(self)

    def close(self) -> None:
        """Fail every held write, shut the backend's threads down, remove the directory."""
        if self.closed:
            return
        self.closed = True
        self.release_writes()
        self.backend.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def release_writes(self) -> None:
        """Let every held write go on, failing."""
        engine_record.real(self.held).release_all()

    def _resident(self) -> frozenset[Key]:
        with self.backend.disk_lock:
            raws = list(self.backend.dict)
        self.rec.seen("list(backend.dict)", raws)  # the chunks on disk, as a script reads them
        return frozenset(self.keys.back(raw) for raw in raws)

    def _held(self) -> set[Key]:
        """Chunks the backend holds disk space for: on disk, or being written."""
        held = set(self._resident())
        held.update(k for k in self.slot if self.backend.exists_in_put_tasks(self.keys(k)))
        return held

    def _renumber(self) -> None:
        held = self._held()
        for key in [k for k in self.slot if k not in held]:
            del self.slot[key]

    def _new_slot(self, key: Key) -> int:
        used = set(self.slot.values())
        slot = next(i for i in range(len(used) + 1) if i not in used)
        self.slot[key] = slot
        return slot

    def _store_one(self, key: Key, raw: Any, evicted: list[Key]) -> int | None:
        before = self._resident()
        obj = self.staging.allocate(_shape(), _torch().uint8, busy_loop=False)
        if obj is None:
            raise RuntimeError("the disk backend's staging pool is exhausted")
        write = self.held.expect(raw)
        self.backend.submit_put_task(raw, obj, on_complete_callback=write.on_complete)
        obj.ref_count_down()
        evicted.extend(sorted(before - self._resident(), key=repr))
        self._renumber()
        if not self.backend.exists_in_put_tasks(raw):
            self.held.forget(raw)
            return None  # one chunk at a time, as on the CPU backend
        self.pending.setdefault(key, []).append((self.resets, write))
        return self._new_slot(key)

    def complete_store(
        self, keys: Sequence[Key], success: bool, ticket: int | None
    ) -> Completion | None:
        for key, write in self._taken(self.pending, keys):
            if not write.release(success, WAIT_S):
                raise RuntimeError(f"the disk write of {key!r} did not finish in {WAIT_S} s")
        self._renumber()
        return None

    def prepare_load(self, keys: Sequence[Key]) -> LoadOutcome:
        """``pin`` then ``get_blocking`` per chunk, once every chunk is on disk (a read
        refreshes the chunk in LMCache's LRU, which no undo could put back)."""
        distinct = self._readable(keys)
        missing = [key for key in distinct if key not in self.slot]
        if missing:
            raise RuntimeError(f"the adapter numbered no slot for {missing[0]!r}, which is "
                               "on disk")
        taken: list[tuple[Key, Any]] = []
        for key in distinct:
            raw = self.keys(key)
            obj = self.backend.get_blocking(raw) if self.backend.pin(raw) else None
            if obj is None:  # cannot happen after contains(): undo what this call took
                self.backend.unpin(raw)
                for earlier, held in taken:
                    held.ref_count_down()
                    self.backend.unpin(self.keys(earlier))
                raise Refused(f"pin or get_blocking({key!r}) failed")
            taken.append((key, obj))
        for key, obj in taken:
            self.reads.setdefault(key, []).append((self.resets, obj))
        return LoadOutcome(None, tuple(self.slot[k] for k in keys))

    def complete_load(self, keys: Sequence[Key], ticket: int | None) -> Completion | None:
        for key in self._held_reads(keys):
            self._release_read(key)
            self.backend.unpin(self.keys(key))
        self._renumber()
        return None

    def reset_cache(self) -> int | None:
        self.backend.clear()
        self.resets += 1
        self._renumber()
        return None
