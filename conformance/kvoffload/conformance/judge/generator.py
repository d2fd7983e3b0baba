"""The one call generator: every random call sequence the suite makes comes from here.

``kvoffload check``, the pytest plugin and the self-test draw from it inside the
Hypothesis machine (:mod:`.machine`: one integer per step seeds a burst of calls);
``kvoffload corpus write`` draws from it with plain seeded generators to find the trace
that kills each seeded variant (:mod:`kvoffload.conformance.corpus.corpus_write`). Every call is
drawn from the spec's state only (never from the target's), through a :class:`Driver` that makes the
call and returns the spec's output; each enabled assumption stops the calls it excludes (the spec's
``Assumption.excludes`` has the final word on every call).

Each call picks its operation by weights that depend on the spec's state (an operation
with nothing to act on has weight 0, the role a precondition plays) and then its
arguments. Each example switches a random fifth of the operations off ("swarm
testing"), which reaches states that need long runs without, say, resets. The alphabet
covers the whole API plus what real schedulers and workers send on bad days: duplicate
keys, failed stores, resets with copies in flight, misuse, and completions from before
a reset.
"""

from __future__ import annotations

import random
from bisect import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import accumulate
from typing import Protocol

from kvoffload.spec import (
    Assumption,
    CacheState,
    Call,
    CopyKind,
    Key,
    LoadPlan,
    Op,
    Phase,
    StorePlan,
)

from ..adapter_api import Capabilities
from ..config import CheckConfig
from .lockstep import assumed_away

BURST = 8
"""Calls per burst: the machine makes one burst per Hypothesis step, which divides
Hypothesis's per-step cost among them (``--steps`` still counts calls)."""

WEIGHTS: dict[str, float] = {
    "lookup": 3, "prepare_store": 3, "store_and_complete": 3, "complete_store": 3,
    "complete_store_unmatched": 1, "prepare_load": 2, "complete_load": 2, "touch": 2,
    "reset_cache": 1, "take_events": 1.5, "complete_stale": 3, "complete_finished": 2,
    "prepare_load_not_ready": 1, "complete_load_unmatched": 1, "complete_unknown_ticket": 0.5,
    "fail_node": 0.1,
}
"""Relative frequency of each kind of call, where it is possible at all."""

NEEDS: dict[str, str] = {
    "complete_store": "storing", "prepare_load": "ready", "complete_load": "reading",
    "complete_stale": "orphans", "reset_cache": "reset",
}
"""The operations possible only in some states: the fact about the spec's state each
needs (see :meth:`CallGenerator._facts`)."""

FACTS = ("storing", "reading", "orphans", "ready", "reset")
"""The facts :meth:`CallGenerator._facts` reads off the spec's state, in its order."""


_Options = tuple[tuple[str, ...], tuple[float, ...], float]
"""The operations possible, their cumulative weights and their total (see
:meth:`CallGenerator._choices`)."""


def key_pool(capacity: int) -> tuple[str, ...]:
    """The keys calls are drawn from: a few more than fit, so stores must evict."""
    count = capacity + 3
    return tuple(chr(ord("a") + i) if i < 26 else f"k{i}" for i in range(count))


@dataclass(frozen=True)
class _Group:
    """The keys one plan handed out: a job whose completions the machine will send,
    named by the spec's ticket (the lockstep driver tells the target its own)."""

    kind: CopyKind
    epoch: int
    ticket: int
    keys: tuple[Key, ...]


def key_list(rng: random.Random, pool: Sequence[Key], unique: bool,
             at_most: int = 0, limit: int = 0) -> tuple[Key, ...]:
    """1 .. ``at_most`` keys from ``pool`` (default: one more than fit, as the pool has
    three more), never more than ``limit`` (``--max-keys-per-call``; 0: no limit);
    repeats allowed unless ``unique``."""
    count = rng.randint(1, min(at_most or len(pool) - 2, limit or len(pool)))
    if unique:
        return tuple(rng.sample(list(pool), min(count, len(pool))))
    return tuple(rng.choice(pool) for _ in range(count))


@dataclass(frozen=True)
class Rules:
    """What a target and a configuration allow the generator to send."""

    unique: bool
    limit: int
    stale: bool
    reset_in_flight: bool
    tickets: bool
    """Completions may name their job's ticket (the target's API has them)."""
    assumptions: tuple[Assumption, ...]
    allowed: dict[str, bool] = field(default_factory=dict)
    """Operations this target and configuration allow at all (absent: allowed)."""

    @classmethod
    def of(cls, config: CheckConfig, caps: Capabilities) -> Rules:
        stale = not config.assumes("no-stale-completions")
        misuse = not config.assumes("no-misuse")
        return cls(
            unique=config.assumes("unique-keys"), limit=config.max_keys_per_call or 0,
            stale=stale, reset_in_flight=not config.assumes("no-reset-in-flight"),
            tickets=caps.completion_tickets, assumptions=tuple(config.assumptions),
            allowed={
                "touch": caps.touch, "reset_cache": caps.reset, "take_events": caps.events,
                "complete_stale": stale and caps.reset, "complete_finished": stale,
                "prepare_load_not_ready": misuse, "complete_load_unmatched": misuse,
                "complete_unknown_ticket": stale and caps.completion_tickets,
                "fail_node": config.injects_faults,
            })


class Driver(Protocol):
    """Where generated calls go: the spec's state now, and a way to make one call."""

    @property
    def state(self) -> CacheState: ...

    def make(self, call: Call) -> object:
        """Make ``call``; the spec's output (None: the call was not made)."""


class CallGenerator:
    """Draws calls from the spec's state and makes them through a :class:`Driver`."""

    def __init__(self, rules: Rules, driver: Driver) -> None:
        self.rules = rules
        self.driver = driver
        self.groups: list[_Group] = []
        self.finished: list[_Group] = []
        """Jobs that finished (every key completed or dropped), for late duplicates."""
        self.enabled: tuple[tuple[str, float, str | None], ...] = ()
        self.keys: tuple[Key, ...] = ()
        self.gone: list[Key] = []
        """Keys evicted (or dropped by a reset) so far, oldest first."""
        self._options: tuple[CacheState | None, _Options] = (None, ((), (), 0.0))
        self._by_facts: dict[tuple[bool, ...], _Options] = {}
        """This example's operations possible, by the facts of a state (at most 32)."""

    @property
    def state(self) -> CacheState:
        return self.driver.state

    def begin(self, capacity: int, mix: int) -> None:
        """A fresh example on a tier of ``capacity`` slots: its keys, and the op mix
        ``mix`` seeds (a fifth of the operations off)."""
        self.keys = key_pool(capacity)
        self.groups = []
        rng = random.Random(mix)
        enabled = []
        for name, weight in WEIGHTS.items():
            off = name != "prepare_store" and rng.random() < 0.2
            if not off and self.rules.allowed.get(name, True):
                enabled.append((name, weight, NEEDS.get(name)))
        self.enabled = tuple(enabled)
        self._by_facts = {}

    def burst(self, x: int) -> None:
        """BURST calls, each chosen and built from ``x``'s generator.

        Each operation is ``rng.choices(names, cum_weights=cumulative)[0]`` as the
        standard library computes it (one ``random()``, scaled by the total and bisected
        into the cumulative weights), without its checks and its list of one: the same
        draw in 0.4 of its 1.7 microseconds (test_conformance_machine.py compares them)."""
        rng = random.Random(x)
        draw = rng.random
        for _ in range(BURST):
            names, cumulative, total = self._choices()
            getattr(self, names[bisect(cumulative, draw() * total, 0, len(names) - 1)])(rng)

    def forget_jobs(self) -> None:
        """The driver replaced its target: no job of the old one is running."""
        self.groups = []

    def _do(self, call: Call) -> object:
        """Make ``call`` (unless an assumption excludes it); note the jobs it starts."""
        assumptions = self.rules.assumptions
        if assumptions and assumed_away(self.state, call, assumptions):
            return None
        output = self.driver.make(call)
        if isinstance(output, StorePlan):
            self.gone.extend(output.evicted)
            if output.keys:
                self.groups.append(_Group(CopyKind.STORE, output.epoch, output.ticket,
                                          output.keys))
        elif isinstance(output, LoadPlan) and output.keys:
            self.groups.append(_Group(CopyKind.LOAD, output.epoch, output.ticket, output.keys))
        return output

    def _facts(self, state: CacheState) -> tuple[bool, ...]:
        """What the state-dependent operations need, read off the spec's state (in one
        pass over its blocks: this runs at nearly every call), in :data:`FACTS`' order."""
        storing = reading = ready = False
        phase_storing, phase_ready = Phase.STORING, Phase.READY
        for block in state.blocks:
            if block.phase is phase_storing:
                storing = True
            elif block.phase is phase_ready:
                ready = True
            if block.loads:  # readers
                reading = True
        orphans = bool(state.orphans)
        return (storing, reading, orphans, ready,
                self.rules.reset_in_flight or not (storing or reading or orphans))

    def _choices(self) -> tuple[tuple[str, ...], tuple[float, ...], float]:
        """The operations possible now, their cumulative weights, as ``random.choices``
        sums the weights itself, and their total as a float, as it takes it (read again
        only when the spec's state changed since the last call, and made once per example
        for each set of facts that state has)."""
        state = self.state
        cached, options = self._options
        if cached is state:
            return options
        facts = self._facts(state)
        made = self._by_facts.get(facts)
        if made is None:
            holds = dict(zip(FACTS, facts, strict=True))
            chosen = [(n, w) for n, w, need in self.enabled if need is None or holds[need]]
            names = tuple(n for n, _ in chosen)
            cumulative = tuple(accumulate(w for _, w in chosen))
            total = cumulative[-1] + 0.0  # prepare_store is never off: never empty
            made = self._by_facts[facts] = (names, cumulative, total)
        self._options = (state, made)
        return made

    @staticmethod
    def _still_running(state: CacheState, group: _Group, key: Key) -> bool:
        """Is ``group``'s copy of ``key`` still running in ``state`` (live, or left by a
        reset)?"""
        if group.epoch < state.epoch:
            return state.orphan_of_job(key, group.kind, group.ticket) is not None
        block = state.table.get(key)
        if block is None:
            return False
        if group.kind is CopyKind.STORE:
            return block.phase is Phase.STORING and block.ticket == group.ticket
        return group.ticket in block.loads

    def _jobs(self, kind: CopyKind | None, stale: bool) -> list[_Group]:
        """The jobs still running (keys not yet completed), of ``kind`` (any if None),
        from before the last reset (``stale``) or from this epoch."""
        groups = []
        state, still_running = self.state, self._still_running  # read once: each key asks
        for group in self.groups:
            running = tuple(k for k in group.keys if still_running(state, group, k))
            if not running:
                self.finished.append(group)
            elif len(running) == len(group.keys):  # every key still running: as it is
                groups.append(group)
            else:
                groups.append(replace(group, keys=running))
        self.groups, self.finished = groups, self.finished[-8:]
        epoch = state.epoch
        return [g for g in self.groups if (kind is None or g.kind is kind)
                and (g.epoch < epoch if stale else g.epoch == epoch)]

    def _complete(self, rng: random.Random, job: _Group, running: bool = True) -> None:
        """A completion for (part of) ``job``: naming its ticket (the ticket form), or in
        vLLM's form, with ``job=`` set where it is not the keys' running job (stale or
        finished), so ``no-stale-completions`` can exclude it."""
        chosen = job.keys
        if len(chosen) > 1 and rng.random() >= 0.7:
            chosen = self._key_list(rng, chosen, len(chosen))
        stale = not running or job.epoch < self.state.epoch
        if self.rules.tickets and rng.random() < 0.5:
            ticket, known = job.ticket, None
        else:
            ticket, known = None, (job.ticket if stale else None)
        if job.kind is CopyKind.STORE:
            self._do(Call(Op.COMPLETE_STORE, chosen, success=rng.random() < 0.75,
                          ticket=ticket, job=known))
        else:
            self._do(Call(Op.COMPLETE_LOAD, chosen, ticket=ticket, job=known))

    def _key_list(self, rng: random.Random, pool: Sequence[Key],
                  at_most: int = 0) -> tuple[Key, ...]:
        return key_list(rng, pool, self.rules.unique, at_most, self.rules.limit)

    def _store_keys(self, rng: random.Random) -> tuple[Key, ...]:
        """Keys to store; often one evicted lately comes back (ARC's ghost hits)."""
        unique = self.rules.unique
        chosen = self._key_list(rng, self.keys)
        if self.gone and rng.random() < 0.35:
            back = rng.choice(self.gone[-3:])
            chosen = (back, *(k for k in chosen[1:] if not unique or k != back))
        return chosen

    # --- the alphabet ----------------------------------------------------------------

    def lookup(self, rng: random.Random) -> None:
        """Mostly keys the tier holds (STORING or READY): that is where bugs are."""
        live = sorted(self.state.table, key=repr)
        pool = live if live and rng.random() < 0.6 else self.keys
        self._do(Call(Op.LOOKUP, (rng.choice(pool),)))

    def prepare_store(self, rng: random.Random) -> None:
        self._do(Call(Op.PREPARE_STORE, self._store_keys(rng)))

    def store_and_complete(self, rng: random.Random) -> None:
        """The common case in two calls: a store, then its successful completion
        (reaches the deep LRU / ARC states that eviction-order bugs need)."""
        plan = self._do(Call(Op.PREPARE_STORE, self._store_keys(rng)))
        if isinstance(plan, StorePlan) and plan.keys:
            self._do(Call(Op.COMPLETE_STORE, plan.keys))

    def complete_store(self, rng: random.Random) -> None:
        jobs = self._jobs(CopyKind.STORE, stale=False)
        if jobs:
            self._complete(rng, rng.choice(jobs))

    def complete_finished(self, rng: random.Random) -> None:
        """A late or duplicate completion of a job that already finished (its keys may
        be running again under another job: the ticket must keep them apart)."""
        self._jobs(None, stale=False)
        if self.finished:
            self._complete(rng, rng.choice(self.finished), running=False)

    def complete_unknown_ticket(self, rng: random.Random) -> None:
        """A completion naming a ticket never issued: the spec ignores every key."""
        op = rng.choice((Op.COMPLETE_STORE, Op.COMPLETE_LOAD))
        ticket = self.state.next_ticket + rng.randint(0, 2)
        self._do(Call(op, (rng.choice(self.keys),), ticket=ticket))

    def complete_store_unmatched(self, rng: random.Random) -> None:
        """A completion for a key with no store running: the spec ignores it."""
        running = {k for g in self._jobs(CopyKind.STORE, False) + self._jobs(None, True)
                   if g.kind is CopyKind.STORE for k in g.keys}
        idle = tuple(k for k in self.keys if k not in running)
        if idle:
            self._do(Call(Op.COMPLETE_STORE, self._key_list(rng, idle, 2),
                          success=rng.random() < 0.5))

    def prepare_load(self, rng: random.Random) -> None:
        ready = tuple(sorted(self.state.keys_in(Phase.READY), key=repr))
        self._do(Call(Op.PREPARE_LOAD,
                      self._key_list(rng, ready, len(ready) + 1)))

    def complete_load(self, rng: random.Random) -> None:
        jobs = self._jobs(CopyKind.LOAD, stale=False)
        if jobs:
            self._complete(rng, rng.choice(jobs))

    def touch(self, rng: random.Random) -> None:
        """Mostly READY keys: touching anything else changes no eviction order."""
        ready = tuple(sorted(self.state.keys_in(Phase.READY), key=repr))
        pool = ready if ready and rng.random() < 0.7 else self.keys
        self._do(Call(Op.TOUCH, self._key_list(rng, pool, len(self.keys) - 2)))

    def reset_cache(self, rng: random.Random) -> None:
        """A reset; the keys it drops come back soon (the scheduler recomputes them),
        those whose copies still run last, as the likeliest to come back."""
        table = self.state.table
        dropped = sorted(sorted(table, key=repr), key=lambda k: table[k].phase
                         is Phase.STORING or table[k].readers > 0)
        if self._do(Call(Op.RESET_CACHE)) is not None:
            self.gone.extend(dropped)

    def take_events(self, rng: random.Random) -> None:
        self._do(Call(Op.TAKE_EVENTS))

    def fail_node(self, rng: random.Random) -> None:
        """A node's failure (``--fault``, D15): every block is lost; they come back soon
        (the scheduler recomputes them), as after a reset."""
        lost = sorted(self.state.table, key=repr)
        if self._do(Call(Op.FAIL_NODE)) is not None:
            self.gone.extend(lost)

    def complete_stale(self, rng: random.Random) -> None:
        """A completion of a job that started before the last reset."""
        jobs = self._jobs(None, stale=True)
        if jobs:
            self._complete(rng, rng.choice(jobs))

    def prepare_load_not_ready(self, rng: random.Random) -> None:
        """Misuse: prepare_load naming a key that is absent or still being stored."""
        chosen = self._key_list(rng, self.keys)
        if any(self.state.phase(k) is not Phase.READY for k in chosen):
            self._do(Call(Op.PREPARE_LOAD, chosen))

    def complete_load_unmatched(self, rng: random.Random) -> None:
        """Misuse: complete_load naming a key that nobody is reading."""
        chosen = self._key_list(rng, self.keys, 2)
        table = self.state.table
        if not all(k in table and table[k].readers for k in chosen):
            self._do(Call(Op.COMPLETE_LOAD, chosen))


