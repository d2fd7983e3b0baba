"""A trace's call stream, made in lockstep: the workload of ``kvoffload check --trace``.

Each request, at its arrival (after the jobs that ended by then have completed, in the
order they ended):

1. ``touch`` of its blocks, last block first (vLLM's scheduler touches at arrival; the
   call's first key ends most recent), if the target has ``touch``;
2. ``lookup`` of its blocks in order, up to the first block that is not a HIT;
3. ``prepare_load`` of the leading HITs: a load job;
4. ``prepare_store`` of the rest (the tier skips the blocks it holds or is writing, so a
   block met PENDING is named again, as vLLM's scheduler names it): a store job of the
   plan's new keys, unless the call is rejected.

A job ends after a delay drawn from the seed: its blocks times :data:`BLOCK_MS`, times
a factor drawn uniformly from :data:`SPREAD`, so jobs end out of order and later
requests meet blocks still being written (PENDING). Each request's draws come from a
generator seeded by the seed and the request's index alone, so a window of the trace
replays with the same delays and completion forms as the whole trace
(:func:`request_random`). A completion names its job's ticket one time in two where
the target's plans carry tickets, else it is vLLM's form. Every :data:`EVENTS_EVERY`
requests the events are taken. After the last request every job completes, then the
lockstep's drain checks that nothing leaked.

Every call goes through :meth:`~kvoffload.conformance.judge.lockstep.Lockstep.step`: the
same judge as the random runs. The stream is drawn from the spec's answers (equal to
the target's until the first divergence, which ends the run).
"""

from __future__ import annotations

import heapq
import math
import random
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kvoffload.spec import Call, Key, LoadPlan, LookupResult, Op, Phase, StorePlan, excluded_by

from ..adapter_api import Capabilities
from ..config import CheckConfig
from ..judge.lockstep import Lockstep
from .timing import DEFAULT
from .traces import Request

BLOCK_MS = DEFAULT.store_ms
"""The nominal time a job takes per block: the traffic simulator's default (a 160 MiB
block at 25 GB/s, 6.71 ms)."""
SPREAD = (0.25, 2.0)
"""Each job's delay is its nominal time times a factor drawn uniformly from this range."""
EVENTS_EVERY = 64
"""Requests between two ``take_events`` (where the target has events)."""


def request_random(seed: int, index: int) -> random.Random:
    """The draws of request ``index`` (delays, completion forms): a function of the seed
    and the index only, so any window of the trace replays them unchanged."""
    return random.Random(f"kvoffload-trace/{seed}/{index}")


@dataclass
class Tally:
    """What a trace run did, for the report."""

    requests: int = 0
    lookups: int = 0
    pending: int = 0
    """Lookups answered PENDING: a block met while its store was in flight."""
    loads: int = 0
    stores: int = 0
    rejected: int = 0
    calls: int = 0


@dataclass(order=True)
class _Job:
    """A job running in simulated time: the completion to send when it ends."""

    end_ms: float
    seq: int
    call: Call = field(compare=False)
    request: int = field(compare=False)


class TraceCalls:
    """Makes a trace's call stream on one :class:`Lockstep` (see the module docstring).

    ``starts[i]`` is how many calls the lockstep had made when the ``i``-th request of
    the window began: :meth:`request_of` maps a failing call back to its request.
    """

    def __init__(self, run: Lockstep, config: CheckConfig, capabilities: Capabilities,
                 on_request: Callable[[Tally], None] | None = None) -> None:
        self.run = run
        self.config = config
        self.caps = capabilities
        self.limit = config.max_keys_per_call or 0
        self.seed = config.seed or 0
        self.on_request = on_request
        self.tally = Tally()
        self.jobs: list[_Job] = []
        self.seq = 0
        self.starts: list[int] = []

    def play(self, requests: Sequence[Request], first: int = 0) -> None:
        """Requests ``first .. first + len(requests) - 1`` of the trace, then every job's
        completion and the drain; raises PropertyViolation at the first divergence."""
        for index, request in enumerate(requests, first):
            self.starts.append(len(self.run.trace))
            self._finish_until(request.arrival_ms)
            self._serve(index, request)
            self.tally.requests += 1
            if self.caps.events and self.tally.requests % EVENTS_EVERY == 0:
                self._make(Call(Op.TAKE_EVENTS))
            if self.on_request is not None:
                self.on_request(self.tally)
        self._finish_until(math.inf)
        self.run.drain(stale_completions=not self.config.assumes("no-stale-completions"))
        self.run.settle()

    def request_of(self, step: int) -> int:
        """The window's request (0-based) during which call number ``step`` (1-based, a
        violation's ``step``) was made; the last one for a call of the drain."""
        return max(0, bisect_right(self.starts, step - 1) - 1)

    def _serve(self, index: int, request: Request) -> None:
        rng = request_random(self.seed, index)
        keys = request.blocks
        if self.caps.touch:
            self._in_calls(Op.TOUCH, keys[::-1])
        hits = 0
        for key in keys:
            answer = self._make(Call(Op.LOOKUP, (key,)))
            self.tally.lookups += 1
            if answer is LookupResult.PENDING:
                self.tally.pending += 1
            if answer is not LookupResult.HIT:
                break
            hits += 1
        now = request.arrival_ms
        for plan in self._in_calls(Op.PREPARE_LOAD, keys[:hits]):
            if isinstance(plan, LoadPlan) and plan.keys:
                self.tally.loads += 1
                self._start(Call(Op.COMPLETE_LOAD, plan.keys, ticket=self._ticket(rng, plan)),
                            now, rng, index)
        for plan in self._in_calls(Op.PREPARE_STORE, self._storable(keys[hits:])):
            if isinstance(plan, StorePlan) and plan.keys:
                self.tally.stores += 1
                self._start(Call(Op.COMPLETE_STORE, plan.keys, ticket=self._ticket(rng, plan)),
                            now, rng, index)
            elif not isinstance(plan, StorePlan):
                self.tally.rejected += 1

    def _storable(self, keys: tuple[Key, ...]) -> tuple[Key, ...]:
        """The keys to offer ``prepare_store``: all of them, less those being written
        where the configuration assumes no store of a key in flight."""
        call = Call(Op.PREPARE_STORE, keys)
        if keys and excluded_by(self.run.state, call, self.config.assumptions) is not None:
            state = self.run.state
            return tuple(k for k in keys if state.phase(k) is not Phase.STORING)
        return keys

    def _ticket(self, rng: random.Random, plan: LoadPlan | StorePlan) -> int | None:
        """The plan's ticket one time in two where the target has tickets (else None:
        vLLM's form)."""
        named = rng.random() < 0.5
        return plan.ticket if self.caps.completion_tickets and named else None

    def _start(self, completion: Call, now: float, rng: random.Random, index: int) -> None:
        low, high = SPREAD
        end = now + len(completion.keys) * BLOCK_MS * rng.uniform(low, high)
        self.seq += 1
        heapq.heappush(self.jobs, _Job(end, self.seq, completion, index))

    def _finish_until(self, now: float) -> None:
        """Complete, in the order they end, the jobs that have ended by ``now``."""
        while self.jobs and self.jobs[0].end_ms <= now:
            self._make(heapq.heappop(self.jobs).call)

    def _in_calls(self, op: Op, keys: tuple[Key, ...]) -> list[object]:
        """``op`` on ``keys`` in calls of at most ``--max-keys-per-call`` keys; none for
        no keys. The spec's outputs, in order."""
        size = self.limit or len(keys)
        return [self._make(Call(op, keys[start:start + size]))
                for start in range(0, len(keys), size or 1)]

    def _make(self, call: Call) -> object:
        self.tally.calls += 1
        return self.run.step(call)
