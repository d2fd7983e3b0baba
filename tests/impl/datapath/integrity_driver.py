"""A seeded random driver that checks the bytes an ``OffloadTier`` moves.

It runs random interleavings of stores, loads, completions, failures, polls, resets,
touches and misuse on a real tier, keeps its own model of what each key should hold,
and checks after every step:

* every successful load wrote into each device block exactly the bytes of the last
  successful store of its key (each store writes a pattern that depends on the key
  and on a version number, so a stale, torn or foreign block cannot match);
* a successful store left exactly those bytes in its slot;
* ``lookup`` of every key agrees with the model (MISS / PENDING / HIT), so a block
  whose store is in flight reads PENDING, and loading it raises ``NotReadable``
  with the manager unchanged;
* no slot held by a running copy (even one a reset orphaned) is handed to a new
  store, and ``prepare_store`` rejects exactly when free plus evictable slots fall
  short;
* the manager's own ``check()`` holds, and at the end nothing leaks.

Completions come from the engine: on the deterministic one the driver decides when
each job completes or fails; on the threaded (and CUDA) ones jobs end on their own,
failures are injected, and the driver pauses the workers to keep jobs in flight.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch

from kvoffload.impl.datapath import (
    DeterministicEngine,
    Finished,
    LoadTicket,
    OffloadTier,
    StoreTicket,
    ThreadedEngine,
)
from kvoffload.impl.datapath.rows import Rows
from kvoffload.spec.errors import NotReadable
from kvoffload.spec.outputs import StoreRejected
from kvoffload.spec.vocabulary import LookupResult

_MIX = 0x9E3779B97F4A7C15 - (1 << 64)  # odd, so neighbouring elements always differ


@dataclass
class Counts:
    """What one run checked."""

    operations: int = 0
    stores: int = 0
    stores_rejected: int = 0
    loads: int = 0
    loads_verified: int = 0
    stores_verified: int = 0
    bytes_verified: int = 0
    failed_stores: int = 0
    failed_loads: int = 0
    stale_completions: int = 0
    evictions: int = 0
    resets: int = 0
    resets_in_flight: int = 0
    pending_lookups: int = 0
    refused_loads: int = 0
    lookups: int = 0
    slots_checked_against_running_copies: int = 0

    def add(self, other: Counts) -> None:
        for name in vars(self):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def summary(self) -> str:
        return ", ".join(f"{name}={value}" for name, value in vars(self).items())


@dataclass
class _Job:
    ticket: StoreTicket | LoadTicket
    versions: dict[str, int] = field(default_factory=dict)
    """Store: the version written per key. Load: the version expected per key."""


class IntegrityDriver:
    """Drives ``tier`` with ``rng`` over ``num_keys`` keys and checks every byte it moves."""

    def __init__(self, tier: OffloadTier, rng: random.Random, num_keys: int = 12,
                 max_batch: int = 4) -> None:
        self.tier = tier
        self.rng = rng
        self.keys = [f"k{i}" for i in range(num_keys)]
        self.max_batch = max_batch
        self.device = Rows(tier.engine.device.blocks)
        self.pool = tier.engine.pool.rows
        width = self.device.tensor.shape[1]
        self._ramp = torch.arange(width, dtype=self.device.tensor.dtype,
                                  device=self.device.tensor.device) * _mix(self.device.tensor)
        self.counts = Counts()
        self.epoch = tier.manager.epoch
        self.ready: dict[str, int] = {}
        """READY keys (model) and the version their last successful store wrote."""
        self.storing: dict[str, int] = {}
        """STORING keys of the current epoch and the job storing them."""
        self.readers: dict[str, int] = {}
        self.slot_of: dict[str, int] = {}
        """The slot of each live key, from the ticket of its store."""
        self.jobs: dict[int, _Job] = {}
        self.busy_device: set[int] = set()
        self.next_version = 1
        self.announced: set[object] = set()

    # --- patterns ----------------------------------------------------------------

    def pattern(self, key: str, version: int) -> torch.Tensor:
        """The row a store of ``key`` at ``version`` writes: unique per (key, version)."""
        base = (int(key[1:]) + 1) * 1_000_003 + version * 7_919
        return self._ramp + base

    # --- the run ------------------------------------------------------------------

    def run(self, steps: int) -> Counts:
        ops = self._operations()
        names, weights = zip(*ops.items(), strict=True)
        for _ in range(steps):
            op = self.rng.choices(names, weights)[0]
            getattr(self, op)()
            self.counts.operations += 1
            self._check()
        self.finish()
        return self.counts

    def _operations(self) -> dict[str, float]:
        ops = {"store": 6.0, "load": 4.0, "poll": 3.0, "load_unreadable": 1.0, "touch": 0.5,
               "events": 0.5, "reset": 0.3}
        engine = self.tier.engine
        if isinstance(engine, DeterministicEngine):
            ops |= {"complete": 5.0, "fail": 1.0}
        elif isinstance(engine, ThreadedEngine):
            ops |= {"pause": 0.7, "resume": 1.0, "drain": 0.3}
        else:
            ops |= {"drain": 0.5}
        return ops

    # --- operations -------------------------------------------------------------

    def store(self) -> None:
        count = self.rng.randint(1, self.max_batch)
        keys = [self.rng.choice(self.keys) for _ in range(count)]
        blocks = self._free_device_blocks(count)
        if blocks is None:
            return
        versions = []
        for key, block in zip(keys, blocks, strict=True):
            version = self.next_version
            self.next_version += 1
            self.device.tensor[block] = self.pattern(key, version)
            versions.append(version)
        expected_new = [k for k in dict.fromkeys(keys)
                        if k not in self.ready and k not in self.storing]
        evictable = [k for k in self.ready if not self.readers.get(k) and k not in keys]
        held = self._held_slots()
        free = self.tier.manager.capacity - len(held)
        short = len(expected_new) - free
        result = self.tier.store(keys, blocks)
        self.counts.stores += 1
        if isinstance(result, StoreRejected):
            check(short > len(evictable), f"store of {keys} rejected with {free} free and "
                  f"{len(evictable)} evictable slots for {len(expected_new)} new keys")
            self.counts.stores_rejected += 1
            return
        check(short <= len(evictable), f"store of {keys} accepted without room")
        check(list(result.keys) == expected_new,
              f"store planned {result.keys}, expected the absent keys {expected_new}")
        check(len(result.evicted) == max(0, short) and set(result.evicted) <= set(evictable),
              f"evicted {result.evicted}; {max(0, short)} of {evictable} expected")
        held -= {self.slot_of[k] for k in result.evicted}
        check(not set(result.slots) & held, f"slots {result.slots} handed out while "
              f"running copies or live blocks hold {sorted(held)}")
        self.counts.slots_checked_against_running_copies += len(result.slots)
        for key in result.evicted:
            del self.ready[key]
            self.counts.evictions += 1
        if result.job_id is None:
            return
        first = {}
        for key, version in zip(keys, versions, strict=True):
            first.setdefault(key, version)
        job = _Job(result, {k: first[k] for k in result.keys})
        self.jobs[result.job_id] = job
        for key, slot in zip(result.keys, result.slots, strict=True):
            self.storing[key] = result.job_id
            self.slot_of[key] = slot
        self.busy_device.update(result.device_blocks)

    def load(self) -> None:
        candidates = list(self.ready)
        if not candidates:
            return
        count = self.rng.randint(1, self.max_batch)
        keys = [self.rng.choice(candidates) for _ in range(count)]
        blocks = self._free_device_blocks(count)
        if blocks is None:
            return
        ticket = self.tier.load(keys, blocks)
        self.counts.loads += 1
        self.jobs[ticket.job_id] = _Job(ticket, {k: self.ready[k] for k in keys})
        for key in dict.fromkeys(keys):
            self.readers[key] = self.readers.get(key, 0) + 1
        self.busy_device.update(blocks)

    def load_unreadable(self) -> None:
        """Loading a key whose store is in flight (or an absent key) must be refused."""
        storing = list(self.storing)
        absent = [k for k in self.keys if k not in self.ready and k not in self.storing]
        pool = storing if storing and (not absent or self.rng.random() < 0.8) else absent
        if not pool:
            return
        key = self.rng.choice(pool)
        keys = [key, *self.rng.sample(list(self.ready), min(1, len(self.ready)))]
        blocks = self._free_device_blocks(len(keys))
        if blocks is None:
            return
        before = self.tier.manager.view()
        try:
            self.tier.load(keys, blocks)
        except NotReadable:
            check(self.tier.manager.view() == before, "a refused load changed the manager")
            check(not set(self.tier.engine.pending()) - set(self.jobs),
                  "a refused load started a copy")
            self.counts.refused_loads += 1
            return
        raise AssertionError(f"load of {key!r} ({'STORING' if key in storing else 'ABSENT'}) "
                             "was accepted")

    def complete(self) -> None:
        engine = self.tier.engine
        assert isinstance(engine, DeterministicEngine)
        running = engine.running()
        if running:
            engine.complete(self.rng.choice(running))

    def fail(self) -> None:
        engine = self.tier.engine
        assert isinstance(engine, DeterministicEngine)
        running = engine.running()
        if running:
            engine.fail(self.rng.choice(running))

    def pause(self) -> None:
        engine = self.tier.engine
        assert isinstance(engine, ThreadedEngine)
        engine.pause()

    def resume(self) -> None:
        engine = self.tier.engine
        assert isinstance(engine, ThreadedEngine)
        engine.resume()

    def drain(self) -> None:
        engine = self.tier.engine
        if isinstance(engine, ThreadedEngine):
            engine.resume()
        self._take(self.tier.drain())

    def poll(self) -> None:
        self._take(self.tier.poll())

    def touch(self) -> None:
        self.tier.touch(self.rng.sample(self.keys, self.rng.randint(1, 3)))

    def events(self) -> None:
        events = self.tier.take_events()
        self.announced = (self.announced | events.stored) - events.removed
        check(self.announced == set(self.ready), "events do not replay to the READY set")

    def reset(self) -> None:
        if self.tier.in_flight():
            self.counts.resets_in_flight += 1
        epoch = self.tier.reset()
        check(epoch == self.epoch + 1, f"reset returned epoch {epoch}, expected {self.epoch + 1}")
        self.epoch = epoch
        self.ready.clear()
        self.storing.clear()
        self.slot_of.clear()
        self.readers.clear()
        self.counts.resets += 1

    def finish(self) -> None:
        """Let every job end, feed it to the manager, and check that nothing leaks."""
        engine = self.tier.engine
        if isinstance(engine, DeterministicEngine):
            for job_id in engine.running():
                engine.complete(job_id)
        elif isinstance(engine, ThreadedEngine):
            engine.resume()
        self._take(self.tier.drain())
        check(not self.tier.in_flight() and not self.jobs, "jobs still in flight at the end")
        view = self.tier.manager.view()
        check(not view.storing and not view.readers and not view.store_orphans
              and not view.load_orphans, f"something leaked: {view}")
        self._check()

    # --- completions ----------------------------------------------------------------

    def _take(self, finished: list[Finished]) -> None:
        for done in finished:
            job = self.jobs.pop(done.ticket.job_id)
            ticket = done.ticket
            current = ticket.epoch == self.epoch
            self.busy_device.difference_update(ticket.device_blocks)
            if not current:
                self.counts.stale_completions += 1
                check(done.completion.released == tuple(dict.fromkeys(ticket.keys)),
                      f"a stale completion did not release its slots: {done}")
            if isinstance(ticket, StoreTicket):
                self._stored(done.success, ticket, job, current)
            else:
                self._loaded(done.success, ticket, job, current)

    def _stored(self, success: bool, ticket: StoreTicket, job: _Job, current: bool) -> None:
        if not success:
            self.counts.failed_stores += 1
        if not current:
            return
        for key in ticket.keys:
            del self.storing[key]
            if success:
                self.ready[key] = job.versions[key]
        if success:
            for key, slot in zip(ticket.keys, ticket.slots, strict=True):
                self._verify(self.pool.tensor[slot], key, job.versions[key], "stored slot")
                self.counts.stores_verified += 1

    def _loaded(self, success: bool, ticket: LoadTicket, job: _Job, current: bool) -> None:
        if current:
            for key in dict.fromkeys(ticket.keys):
                self.readers[key] -= 1
                if not self.readers[key]:
                    del self.readers[key]
        if not success:
            self.counts.failed_loads += 1
            return
        for key, block in zip(ticket.keys, ticket.device_blocks, strict=True):
            self._verify(self.device.tensor[block], key, job.versions[key], "loaded block")
            self.counts.loads_verified += 1

    def _verify(self, row: torch.Tensor, key: str, version: int, what: str) -> None:
        expected = self.pattern(key, version).to(row.device)
        if not torch.equal(row, expected):
            differ = int((row != expected).sum())
            raise AssertionError(f"{what} of {key!r} differs from version {version} in "
                                 f"{differ} of {row.numel()} words")
        self.counts.bytes_verified += row.numel() * row.element_size()

    # --- the model's side ----------------------------------------------------------

    def _check(self) -> None:
        self.tier.manager.check()
        for key in self.keys:
            expected = (LookupResult.HIT if key in self.ready else
                        LookupResult.PENDING if key in self.storing else LookupResult.MISS)
            got = self.tier.lookup(key)
            if got is not expected:  # the message only then: 12 lookups a step
                raise AssertionError(f"lookup({key!r}) = {got}, the model says {expected}")
            self.counts.lookups += 1
            self.counts.pending_lookups += expected is LookupResult.PENDING

    def _held_slots(self) -> set[int]:
        """Slots of the live blocks and of every copy still running (of any epoch), as
        the model knows them from the tickets."""
        slots = {self.slot_of[k] for k in (*self.ready, *self.storing)}
        for job in self.jobs.values():
            slots.update(job.ticket.slots)
        return slots

    def _free_device_blocks(self, count: int) -> list[int] | None:
        free = [b for b in range(len(self.device)) if b not in self.busy_device]
        if len(free) < count:
            return None
        return self.rng.sample(free, count)


def _mix(rows: torch.Tensor) -> int:
    """An odd multiplier that fits the rows' integer type."""
    bits = torch.iinfo(rows.dtype).bits
    value = _MIX & ((1 << bits) - 1)
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)
