"""A discrete-event simulation, in simulated time, of a trace served through an
offloading tier: the reference manager :class:`kvoffload.impl.OffloadManager`.

At its arrival a request looks up its blocks in order. The leading blocks the tier
holds are loaded (``prepare_load``; ``complete_load`` when the load job ends); the rest
is computed and offered to ``prepare_store`` (the tier skips the blocks it holds or is
writing; ``complete_store`` when the store job ends, or the call is rejected and nothing
is stored). The request marks its blocks used with ``touch`` (:class:`Touch`: when its
jobs have ended, or at its arrival), its last block most recent (vLLM's ``touch`` leaves
the first key of a call most recent: the keys are passed last first).

Two engines (:class:`Lookup`):

- ``TRI_STATE`` (vLLM since PR #41795): a leading block whose store is in flight
  (PENDING) is part of the prefix; the request waits until those stores end, then looks
  up again and loads.
- ``TWO_STATE`` (before it): an in-flight block reads as absent: the prefix ends there,
  and the block is computed again and offered to ``prepare_store`` again while its first
  store runs.

Events at the same instant: transfers ending first (so, with zero latency, a request's
jobs end before the next request arrives), then arrivals and retries in their order.
"""

from __future__ import annotations

import enum
import heapq
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from kvoffload.impl import OffloadManager
from kvoffload.spec.outputs import StoreRejected

from .timing import ZERO, Timing
from .traces import BLOCK_TOKENS, Request

_MISS, _PENDING, _HIT = 0, 1, 2
_ENDS, _STARTS = 0, 1
"""Event kinds, in the order they run at one instant: transfers end, requests start."""
_LOAD, _STORE, _ARRIVE = 0, 1, 2
PROGRESS_EVERY = 512
"""Requests between two calls of the progress callback."""


class Lookup(enum.Enum):
    """How the engine reads a block whose store is in flight."""

    TRI_STATE = "tri-state"
    TWO_STATE = "two-state"


class Touch(enum.Enum):
    """When a request marks its blocks used (``touch``, its last block most recent)."""

    DONE = "done"
    """When its transfers have ended, every block it names: LRU then holds the request's
    blocks in its order, as a plain prefix cache refreshing them request by request."""
    ARRIVAL = "arrival"
    """At its arrival, before the lookup, as vLLM's scheduler does: a use of the blocks
    already there; the blocks the request stores are not touched by it (under ARC they
    stay in ``t1`` until another request uses them)."""


def default_touch(policy: str) -> Touch:
    """``DONE`` for LRU (the plain prefix cache's order), ``ARRIVAL`` for ARC: touching
    after the store would count the store's own request as a second use and move every
    block to ``t2`` at once, which leaves ARC no different from LRU."""
    return Touch.ARRIVAL if policy == "arc" else Touch.DONE


@dataclass
class Counters:
    """What one run did. Blocks and tokens count block references (a block named by two
    requests counts twice)."""

    requests: int = 0
    blocks: int = 0
    tokens: int = 0
    hit_blocks: int = 0
    """Leading blocks loaded from the tier (the prefix hits)."""
    hit_tokens: int = 0
    met_in_flight_requests: int = 0
    """Requests whose lookup met a leading block still being written (PENDING)."""
    met_in_flight_blocks: int = 0
    """Leading blocks found in flight: before the first MISS, in the first lookup."""
    waits: int = 0
    """Tri-state: lookups deferred until a store ended (a request can wait twice)."""
    wait_ms: float = 0.0
    computed_blocks: int = 0
    computed_tokens: int = 0
    recomputed_blocks: int = 0
    """Blocks computed while the tier was writing them (their store in flight)."""
    recomputed_tokens: int = 0
    duplicate_stores: int = 0
    """Recomputed blocks offered to an accepted ``prepare_store`` while their first store
    ran: the tier skips them; a tier that also reads in flight as absent writes them twice."""
    stored_blocks: int = 0
    """Blocks written to the tier (the new keys of accepted store plans)."""
    loaded_blocks: int = 0
    rejections: int = 0
    """``prepare_store`` calls rejected (nothing evictable enough: pinned or in flight)."""
    rejected_blocks: int = 0
    evictions: int = 0
    end_ms: float = 0.0
    """When the last transfer ended."""


@dataclass
class Run:
    """One simulation's configuration and its counters."""

    trace: str
    policy: str
    capacity: int
    lookup: Lookup
    timing: Timing
    touch: Touch
    counters: Counters = field(default_factory=Counters)
    manager: OffloadManager | None = field(default=None, repr=False, compare=False)
    """The tier after the run (for checks); None in a run rebuilt from a report."""

    @property
    def capacity_tokens(self) -> int:
        return self.capacity * BLOCK_TOKENS


def simulate(requests: Sequence[Request], capacity: int, policy: str = "lru",
             lookup: Lookup = Lookup.TRI_STATE, timing: Timing = ZERO, *,
             touch: Touch | None = None, trace: str = "trace",
             progress: Callable[[int], None] | None = None) -> Run:
    """Serve ``requests`` through an :class:`OffloadManager` of ``capacity`` blocks.

    ``touch`` defaults to :func:`default_touch` of the policy. ``progress`` is called
    with the number of requests served so far, every :data:`PROGRESS_EVERY` requests.
    The manager is left quiescent (every job ended) in :attr:`Run.manager`.

    raises: BadCapacity, UnknownPolicy
    """
    manager = OffloadManager(capacity, policy, net_events=False)
    policy_name = manager.policy.value
    run = Run(trace, policy_name, capacity, lookup, timing,
              default_touch(policy_name) if touch is None else touch, manager=manager)
    _Simulation(manager, run, progress).play(requests)
    return run


class _Simulation:
    """The event loop and the engine's steps for one run."""

    def __init__(self, manager: OffloadManager, run: Run,
                 progress: Callable[[int], None] | None) -> None:
        self.manager = manager
        self.run = run
        self.c = run.counters
        self.tri = run.lookup is Lookup.TRI_STATE
        self.touch_at_arrival = run.touch is Touch.ARRIVAL
        self.store_ms, self.load_ms = run.timing.store_ms, run.timing.load_ms
        self.lookup = manager.lookup_function(_HIT, _PENDING, _MISS)
        self.in_flight: dict[Hashable, float] = {}
        """Each STORING key: when its store ends (the manager's STORING set, with times)."""
        self.jobs: dict[int, int] = {}
        """Each request with jobs running: how many."""
        self.events: list[tuple[float, int, int, int, object, object]] = []
        self.seq = 0
        self.progress = progress
        self.requests: Sequence[Request] = ()

    def play(self, requests: Sequence[Request]) -> None:
        events, c, progress = self.events, self.c, self.progress
        self.requests = requests
        events.extend((r.arrival_ms, _STARTS, i, _ARRIVE, i, 0) for i, r in enumerate(requests))
        heapq.heapify(events)
        self.seq = len(requests)
        pop = heapq.heappop
        while events:
            now, _, _, what, one, other = pop(events)
            if what == _ARRIVE:
                index: int = one  # type: ignore[assignment]  # _ARRIVE carries an index
                request = requests[index]
                if other == 0:
                    self.account(request)
                    if progress is not None and c.requests % PROGRESS_EVERY == 0:
                        progress(c.requests)
                self.serve(index, request, now, first=other == 0)
            else:
                self.finish(what, one, other, now)  # type: ignore[arg-type]  # a job's keys
        if progress is not None:
            progress(c.requests)

    def account(self, request: Request) -> None:
        c = self.c
        c.requests += 1
        c.blocks += len(request.blocks)
        c.tokens += request.tokens

    def serve(self, index: int, request: Request, now: float, first: bool) -> None:
        """Look up, then load the prefix and store the rest, or (tri-state) wait."""
        keys, lookup, c = request.blocks, self.lookup, self.c
        if self.touch_at_arrival:
            self.manager.touch(keys[::-1])
        run = pending = 0
        first_pending = -1
        for key in keys:  # the leading blocks the tier holds or is writing
            answer = lookup(key)
            if answer == _MISS:
                break
            if answer == _PENDING:
                pending += 1
                if first_pending < 0:
                    first_pending = run
            run += 1
        if pending and first:
            c.met_in_flight_requests += 1
            c.met_in_flight_blocks += pending
        if pending and self.tri:
            in_flight = self.in_flight
            until = max(in_flight[k] for k in keys[:run] if k in in_flight)
            c.waits += 1
            c.wait_ms += until - now
            self.push(until, _STARTS, _ARRIVE, index, 1)
            return
        prefix = first_pending if pending else run
        jobs = self.load(index, keys[:prefix], now) + self.store(index, request, prefix, now)
        c.hit_blocks += prefix
        c.hit_tokens += prefix * BLOCK_TOKENS if prefix < len(keys) else request.tokens
        if jobs:
            self.jobs[index] = jobs
        elif not self.touch_at_arrival:
            self.manager.touch(keys[::-1])

    def load(self, index: int, prefix: tuple[Hashable, ...], now: float) -> int:
        """Load the prefix (all READY); 1 if a load job runs, else 0."""
        if not prefix:
            return 0
        self.manager.prepare_load(prefix)
        self.c.loaded_blocks += len(prefix)
        self.push(now + len(prefix) * self.load_ms, _ENDS, _LOAD, prefix, index)
        return 1

    def store(self, index: int, request: Request, prefix: int, now: float) -> int:
        """Compute the blocks after the prefix and offer them to the tier; 1 if a store
        job runs, else 0."""
        rest = request.blocks[prefix:]
        if not rest:
            return 0
        c, in_flight = self.c, self.in_flight
        c.computed_blocks += len(rest)
        c.computed_tokens += request.tokens - prefix * BLOCK_TOKENS
        again = sum(map(in_flight.__contains__, rest))
        if again:
            c.recomputed_blocks += again
            c.recomputed_tokens += sum(request.block_tokens(prefix + i)
                                       for i, k in enumerate(rest) if k in in_flight)
        plan = self.manager.prepare_store(rest)
        if isinstance(plan, StoreRejected):
            c.rejections += 1
            c.rejected_blocks += plan.needed
            return 0
        c.duplicate_stores += again
        c.evictions += len(plan.evicted)
        new = plan.keys
        if not new:
            return 0
        c.stored_blocks += len(new)
        end = now + len(new) * self.store_ms
        in_flight.update(dict.fromkeys(new, end))
        self.push(end, _ENDS, _STORE, new, index)
        return 1

    def finish(self, what: int, keys: tuple[Hashable, ...], index: int, now: float) -> None:
        """A transfer ended: complete it; the request's last job touches its blocks."""
        manager = self.manager
        if what == _STORE:
            manager.complete_store(keys)
            in_flight = self.in_flight
            for key in keys:
                del in_flight[key]
        else:
            manager.complete_load(keys)
        self.c.end_ms = now
        left = self.jobs[index] - 1
        if left:
            self.jobs[index] = left
        else:
            del self.jobs[index]
            if not self.touch_at_arrival:
                manager.touch(self.requests[index].blocks[::-1])

    def push(self, time: float, kind: int, what: int, one: object, other: object) -> None:
        self.seq += 1
        heapq.heappush(self.events, (time, kind, self.seq, what, one, other))
