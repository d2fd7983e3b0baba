"""``OffloadTier``: the manager, the host pool and a transfer engine, together.

``store(keys, device_blocks)`` asks the manager for slots (``prepare_store``) and
submits one copy job for the new keys; ``load(keys, device_blocks)`` pins READY
blocks (``prepare_load``) and submits one copy job back; ``poll()`` feeds every
ended job to the manager (``complete_store`` / ``complete_load``) in the ticket form,
naming the ticket of the plan the job was made for. So a job ends exactly its own
plan: one that a reset left running frees the slot the manager held back for it
(DESIGN.md point 7), and never before, so no slot of a running copy is handed to
another block; a late or repeated report of a finished job is ignored.

Calls are checked before the manager is asked, so a rejected call changes nothing.
The tier owns its engine: submit copies through the tier only. Not thread-safe, like
the manager: one scheduler thread drives a tier (the engine's copies run elsewhere).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvoffload.impl import OffloadManager
from kvoffload.spec.errors import BadCapacity, InvariantViolation
from kvoffload.spec.outputs import Completion, Events, StoreRejected
from kvoffload.spec.vocabulary import CopyKind, Key, LookupResult, Policy, Ticket

from .engine import TransferEngine
from .errors import BadBlockIds, BusyBlock
from .jobs import JobResult
from .layout import layout_of
from .pool import HostBlockPool


@dataclass(frozen=True)
class StoreTicket:
    """A store the tier started: ``keys[i]`` is copied from ``device_blocks[i]`` into
    ``slots[i]`` by job ``job_id`` (None when every key was already present).

    ``evicted``: keys the manager dropped to make room; ``epoch``: the plan's epoch;
    ``plan_ticket``: the manager's ticket naming the plan's job (its completion names it).
    """

    job_id: int | None
    keys: tuple[Key, ...]
    device_blocks: tuple[int, ...]
    slots: tuple[int, ...]
    evicted: tuple[Key, ...]
    epoch: int
    plan_ticket: Ticket


@dataclass(frozen=True)
class LoadTicket:
    """A load the tier started: ``keys[i]`` is copied from ``slots[i]`` into
    ``device_blocks[i]`` by job ``job_id`` (a key named twice is copied twice; None
    when no key was named); ``plan_ticket``: the manager's ticket naming the plan's job."""

    job_id: int | None
    keys: tuple[Key, ...]
    device_blocks: tuple[int, ...]
    slots: tuple[int, ...]
    epoch: int
    plan_ticket: Ticket


@dataclass(frozen=True)
class Finished:
    """A job ended and the manager was told: ``completion`` is what the manager did.

    A successful load's device blocks hold the stored bytes; after a failed load
    they hold undefined bytes. A failed store's keys are ABSENT again.
    """

    ticket: StoreTicket | LoadTicket
    success: bool
    completion: Completion
    error: str | None = None

    @property
    def kind(self) -> CopyKind:
        return CopyKind.STORE if isinstance(self.ticket, StoreTicket) else CopyKind.LOAD


class OffloadTier:
    """Offloads KV blocks of one device tensor into a host pool, and brings them back.

    ``manager.capacity`` must equal ``engine.pool.num_blocks``: slot ``s`` of the
    manager is row ``s`` of the pool.

    raises: BadCapacity
    """

    def __init__(self, manager: OffloadManager, engine: TransferEngine) -> None:
        if manager.capacity != engine.pool.num_blocks:
            raise BadCapacity(f"the manager's capacity ({manager.capacity}) must equal the "
                              f"pool's number of blocks ({engine.pool.num_blocks})")
        self.manager = manager
        self.engine = engine
        self._tickets: dict[int, StoreTicket | LoadTicket] = {}

    # --- the scheduler's questions -------------------------------------------------

    def lookup(self, key: Key) -> LookupResult:
        """MISS, PENDING (its store is in flight: do not load, do not recompute) or HIT."""
        return self.manager.lookup(key)

    def touch(self, keys: Sequence[Key]) -> None:
        self.manager.touch(keys)

    def take_events(self) -> Events:
        return self.manager.take_events()

    # --- moving blocks -------------------------------------------------------------

    def store(self, keys: Sequence[Key],
              device_blocks: Sequence[int]) -> StoreTicket | StoreRejected:
        """Offload ``device_blocks[i]`` under ``keys[i]``; keys already STORING or READY
        are skipped (a repeated key: its first device block). Rejected whole, with
        nothing changed, when the manager cannot find the slots.

        The device blocks must keep their bytes until the store has ended.

        raises: BadBlockIds, BusyBlock, EngineClosed
        """
        keys, blocks = tuple(keys), tuple(device_blocks)
        _check_lengths(keys, blocks)
        self.engine.check_device_blocks(CopyKind.STORE, blocks)
        source: dict[Key, int] = {}
        for key, block in zip(keys, blocks, strict=True):
            source.setdefault(key, block)  # a repeated key: the first occurrence wins
        plan = self.manager.prepare_store(keys)
        if isinstance(plan, StoreRejected):
            return plan
        chosen = tuple(source[k] for k in plan.keys)
        if not plan.keys:
            return StoreTicket(None, (), (), (), plan.evicted, plan.epoch, plan.ticket)
        try:
            job_id = self.engine.submit_store(chosen, plan.slots)
        except BaseException as error:
            self.manager.complete_store(plan.keys, success=False, ticket=plan.ticket)
            raise _busy_slot(error) from error
        ticket = StoreTicket(job_id, plan.keys, chosen, plan.slots, plan.evicted, plan.epoch,
                             plan.ticket)
        self._tickets[job_id] = ticket
        return ticket

    def load(self, keys: Sequence[Key], device_blocks: Sequence[int]) -> LoadTicket:
        """Copy READY blocks ``keys[i]`` into ``device_blocks[i]``.

        raises: NotReadable (a key absent or still being stored), BadBlockIds, BusyBlock,
        EngineClosed
        """
        keys, blocks = tuple(keys), tuple(device_blocks)
        _check_lengths(keys, blocks)
        self.engine.check_device_blocks(CopyKind.LOAD, blocks)
        plan = self.manager.prepare_load(keys)
        slot_of = dict(zip(plan.keys, plan.slots, strict=True))
        slots = tuple(slot_of[k] for k in keys)
        if not keys:
            return LoadTicket(None, (), (), (), plan.epoch, plan.ticket)
        try:
            job_id = self.engine.submit_load(slots, blocks)
        except BaseException as error:
            self.manager.complete_load(plan.keys, ticket=plan.ticket)
            raise _busy_slot(error) from error
        ticket = LoadTicket(job_id, keys, blocks, slots, plan.epoch, plan.ticket)
        self._tickets[job_id] = ticket
        return ticket

    def poll(self) -> list[Finished]:
        """Tell the manager about every job that has ended since the last poll."""
        return [self._finish(self._tickets.pop(result.job_id), result)
                for result in self.engine.poll()]

    def drain(self, timeout: float | None = None) -> list[Finished]:
        """Wait for the engine's jobs to end (as far as it can wait), then :meth:`poll`."""
        self.engine.wait(timeout)
        return self.poll()

    def in_flight(self) -> tuple[StoreTicket | LoadTicket, ...]:
        """The tickets whose jobs have not been polled yet."""
        return tuple(self._tickets.values())

    def reset(self) -> int:
        """``reset_cache``: every block goes; running copies keep their slots until they
        end (their completions name their plans' tickets). Returns the new epoch."""
        return self.manager.reset_cache()

    def close(self) -> None:
        self.engine.close()

    def _finish(self, ticket: StoreTicket | LoadTicket, result: JobResult) -> Finished:
        """Complete one ended job in the manager, naming the ticket of its plan."""
        if isinstance(ticket, StoreTicket):
            completion = self.manager.complete_store(ticket.keys, success=result.success,
                                                     ticket=ticket.plan_ticket)
        else:
            completion = self.manager.complete_load(tuple(dict.fromkeys(ticket.keys)),
                                                    ticket=ticket.plan_ticket)
        return Finished(ticket, result.success, completion, result.error)


def open_tier(device_blocks: torch.Tensor, num_blocks: int, policy: str | Policy = "lru",
              *, workers: int = 1) -> OffloadTier:
    """A tier of ``num_blocks`` host blocks for ``device_blocks``: a CUDA engine when the
    device tensor is on a GPU, else a threaded CPU engine.

    raises: LayoutMismatch, BadCapacity, UnknownPolicy
    """
    pool = HostBlockPool(num_blocks, layout_of(device_blocks))
    engine: TransferEngine
    if device_blocks.is_cuda:
        from .cuda import CudaEngine

        engine = CudaEngine(pool, device_blocks)
    else:
        from .threaded import ThreadedEngine

        engine = ThreadedEngine(pool, device_blocks, workers=workers)
    return OffloadTier(OffloadManager(num_blocks, policy), engine)


def _check_lengths(keys: tuple[Key, ...], blocks: tuple[int, ...]) -> None:
    if len(keys) != len(blocks):
        raise BadBlockIds(f"keys and device blocks pair one to one; got {len(keys)} keys and "
                          f"{len(blocks)} device blocks")


def _busy_slot(error: BaseException) -> BaseException:
    """A running copy still holds a slot the manager handed out: a bookkeeping bug."""
    if isinstance(error, BusyBlock):
        return InvariantViolation("slots_of_running_copies_are_held", str(error))
    return error
