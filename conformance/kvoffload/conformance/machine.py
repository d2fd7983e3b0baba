"""The Hypothesis stateful machine that generates calls for the lockstep driver.

Each run gets a subclass of :class:`LockstepMachine` carrying its :class:`Setup`
(target, configuration, counters), so saved failures and seeds stay apart, and each
example gets a fresh target instance. Every call is drawn from the spec's state only
(never from the target's), so draws stay valid while Hypothesis explores. The alphabet
covers the whole API plus what real schedulers and workers send on bad days: duplicate
keys, failed stores, resets with copies in flight, misuse, and completions from before
a reset. Each enabled assumption stops the calls it excludes (the spec's
``Assumption.excludes`` has the final word on every call).

Why one rule, not one rule per operation (the departure from Hypothesis's usual
``RuleBasedStateMachine`` style, measured in docs/conformance.md): Hypothesis's rule
selection (preconditions, feature flags, one draw per argument) cost more than the
lockstep step itself, and argument-free rules such as ``reset_cache`` got a third of
all steps, which kept states shallow. So each step draws a single integer whose seeded
generator makes a burst of calls, each picking the operation by weights that depend on
the spec's state (an operation with nothing to act on has weight 0, the role a
precondition plays) and then its arguments. Each example also switches a random fifth
of the operations off ("swarm testing", as Hypothesis's own feature flags do), which
reaches states that need long runs without, say, resets. Hypothesis finds failures;
:mod:`.shrink` shrinks them as call lists.

Properties already failed in an earlier round of the run (``Setup.silenced``) are not
checked again: a divergence of one of them ends the current target quietly and the
example goes on with a fresh one (see :mod:`.runner`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from kvoffload.spec import (
    CacheState,
    Call,
    CopyKind,
    Key,
    LoadPlan,
    Op,
    Phase,
    StorePlan,
    excluded_by,
)

from .adapter_api import Adapter, Capabilities
from .config import CheckConfig, tier_size
from .errors import PropertyViolation
from .lockstep import Lockstep, construct

CHOICE = st.integers(0, 2**32 - 1)
"""One draw per step: Hypothesis costs about 0.1 ms per value drawn, more than a
lockstep step, and the suite shrinks call traces itself."""

BURST = 8
"""Calls per Hypothesis step: each step's generator makes this many calls in a row,
which divides Hypothesis's per-step cost among them (``--steps`` still counts calls)."""

WEIGHTS: dict[str, float] = {
    "lookup": 3, "prepare_store": 3, "store_and_complete": 3, "complete_store": 3,
    "complete_store_unmatched": 1, "prepare_load": 2, "complete_load": 2, "touch": 2,
    "reset_cache": 1, "take_events": 1.5, "complete_stale": 3, "complete_finished": 2,
    "prepare_load_not_ready": 1, "complete_load_unmatched": 1, "complete_unknown_ticket": 0.5,
}
"""Relative frequency of each kind of call, where it is possible at all."""

NEEDS: dict[str, str] = {
    "complete_store": "storing", "prepare_load": "ready", "complete_load": "reading",
    "complete_stale": "orphans", "reset_cache": "reset",
}
"""The operations possible only in some states: the fact about the spec's state each
needs (see :meth:`LockstepMachine._facts`)."""


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


class Counters:
    """Examples and steps run so far (for the progress display and the report)."""

    def __init__(self) -> None:
        self.examples = 0
        self.steps = 0
        self.failures = 0
        self.first: PropertyViolation | None = None
        """The first violation raised since the runner last cleared it: a failure that
        Hypothesis then loses (its ``Flaky...`` errors on a target that does not fail
        again, an error while it shrinks) is still the run's (see :mod:`.runner`)."""

        self.first_error: BaseException | None = None
        """The first error (not a violation) raised since the runner last cleared it: a
        constructor that raised, say, which Hypothesis may report as a ``Flaky...``
        error of its own."""

    def saw(self, violation: PropertyViolation) -> None:
        self.failures += 1
        if self.first is None:
            self.first = violation

    def broke(self, error: BaseException) -> None:
        if self.first_error is None:
            self.first_error = error


@dataclass
class Setup:
    """What one run's machine class drives, and under which configuration."""

    make_adapter: Callable[[int], Adapter]
    capabilities: Capabilities
    config: CheckConfig
    counters: Counters = field(default_factory=Counters)
    on_progress: Callable[[Counters], None] | None = None
    silenced: frozenset[str] = frozenset()
    """Properties that failed in an earlier round: not checked again."""

    def __post_init__(self) -> None:
        config, caps = self.config, self.capabilities
        self.unique = config.assumes("unique-keys")
        self.limit = config.max_keys_per_call or 0
        self.stale = not config.assumes("no-stale-completions")
        self.reset_in_flight = not config.assumes("no-reset-in-flight")
        misuse = not config.assumes("no-misuse")
        self.allowed = {
            "touch": caps.touch, "reset_cache": caps.reset, "take_events": caps.events,
            "complete_stale": self.stale and caps.reset, "complete_finished": self.stale,
            "prepare_load_not_ready": misuse, "complete_load_unmatched": misuse,
            "complete_unknown_ticket": self.stale and caps.completion_tickets,
        }
        """Operations this target and configuration allow at all (absent: allowed)."""


def key_list(rng: random.Random, pool: Sequence[Key], unique: bool,
             at_most: int = 0, limit: int = 0) -> tuple[Key, ...]:
    """1 .. ``at_most`` keys from ``pool`` (default: one more than fit, as the pool has
    three more), never more than ``limit`` (``--max-keys-per-call``; 0: no limit);
    repeats allowed unless ``unique``."""
    count = rng.randint(1, min(at_most or len(pool) - 2, limit or len(pool)))
    if unique:
        return tuple(rng.sample(list(pool), min(count, len(pool))))
    return tuple(rng.choice(pool) for _ in range(count))


class LockstepMachine(RuleBasedStateMachine):
    """Spec and target in lockstep; see the module docstring. Subclassed per run by
    :func:`build_machine`, which sets ``setup``."""

    setup: ClassVar[Setup]

    def __init__(self) -> None:
        super().__init__()
        self.run: Lockstep | None = None
        self.capacity = 1
        self.groups: list[_Group] = []
        self.finished: list[_Group] = []
        """Jobs that finished (every key completed or dropped), for late duplicates."""
        self.broken = False
        self.enabled: tuple[tuple[str, float, str | None], ...] = ()
        self.keys: tuple[Key, ...] = ()
        self.gone: list[Key] = []
        """Keys evicted (or dropped by a reset) so far, oldest first."""
        self._options: tuple[CacheState | None, tuple[str, ...], tuple[float, ...]] = (
            None, (), ())
        tally = self.setup.counters
        tally.examples += 1
        if self.setup.on_progress is not None:
            self.setup.on_progress(tally)

    @initialize(size=CHOICE, mix=CHOICE)
    def begin(self, size: int, mix: int) -> None:
        """A fresh target (and spec) of a drawn tier size (:func:`~.config.tier_size`); this
        example's op mix."""
        self.capacity = tier_size(size, self.setup.config.capacity)
        self._fresh_target()
        self.keys = key_pool(self.capacity)
        rng = random.Random(mix)
        allowed = self.setup.allowed
        enabled = []
        for name, weight in WEIGHTS.items():
            off = name != "prepare_store" and rng.random() < 0.2
            if not off and allowed.get(name, True):
                enabled.append((name, weight, NEEDS.get(name)))
        self.enabled = tuple(enabled)

    @rule(x=CHOICE)
    def step(self, x: int) -> None:
        """A burst of BURST calls, each chosen and built from ``x``'s generator."""
        rng = random.Random(x)
        for _ in range(BURST):
            names, weights = self._choices()
            getattr(self, rng.choices(names, weights)[0])(rng)

    def teardown(self) -> None:
        setup = self.setup
        if self.run is not None and not self.broken:
            try:
                self.run.drain(stale_completions=setup.stale)
            except PropertyViolation as violation:
                if violation.prop not in setup.silenced:
                    setup.counters.saw(violation)
                    raise
        if setup.on_progress is not None:
            setup.on_progress(setup.counters)

    # --- bookkeeping -----------------------------------------------------------------

    def _fresh_target(self) -> None:
        config = replace(self.setup.config, capacity=self.capacity)
        try:
            adapter = construct(self.setup.make_adapter, self.capacity, config.call_timeout)
        except PropertyViolation as violation:
            self.broken = True
            self.setup.counters.saw(violation)
            raise
        except Exception as error:
            self.setup.counters.broke(error)
            raise
        self.run = Lockstep(adapter, config, silenced=self.setup.silenced)
        self.groups = []

    @property
    def lockstep(self) -> Lockstep:
        if self.run is None:
            raise RuntimeError("a step ran before the example's target was built")
        return self.run

    @property
    def state(self) -> CacheState:
        return self.lockstep.state

    def _do(self, call: Call) -> object:
        """Step the lockstep driver (unless an assumption excludes ``call``)."""
        setup = self.setup
        if excluded_by(self.state, call, setup.config.assumptions) is not None:
            return None
        setup.counters.steps += 1
        try:
            output = self.lockstep.step(call)
        except PropertyViolation as violation:
            if violation.prop in setup.silenced:
                self._fresh_target()  # already reported: go on with a fresh target
                return None
            self.broken = True
            setup.counters.saw(violation)
            raise
        except BaseException as error:
            self.broken = True
            if isinstance(error, Exception):
                setup.counters.broke(error)
            setup.counters.failures += 1
            raise
        if isinstance(output, StorePlan):
            self.gone.extend(output.evicted)
            if output.keys:
                self.groups.append(_Group(CopyKind.STORE, output.epoch, output.ticket,
                                          output.keys))
        elif isinstance(output, LoadPlan) and output.keys:
            self.groups.append(_Group(CopyKind.LOAD, output.epoch, output.ticket, output.keys))
        return output

    def _facts(self, state: CacheState) -> dict[str, bool]:
        """What the state-dependent operations need, read off the spec's state."""
        storing = reading = False
        for block in state.blocks:
            storing = storing or block.phase is Phase.STORING
            reading = reading or block.readers > 0
        orphans = bool(state.orphans)
        return {"storing": storing, "reading": reading, "orphans": orphans,
                "ready": any(b.phase is Phase.READY for b in state.blocks),
                "reset": self.setup.reset_in_flight or not (storing or reading or orphans)}

    def _choices(self) -> tuple[tuple[str, ...], tuple[float, ...]]:
        """The operations possible now and their weights (recomputed only when the spec's
        state changed since the last call)."""
        state = self.state
        cached, names, weights = self._options
        if cached is state:
            return names, weights
        facts = self._facts(state)
        chosen = [(n, w) for n, w, need in self.enabled if need is None or facts[need]]
        names, weights = tuple(n for n, _ in chosen), tuple(w for _, w in chosen)
        self._options = (state, names, weights)
        return names, weights

    def _still_running(self, group: _Group, key: Key) -> bool:
        """Is ``group``'s copy of ``key`` still running (live, or left by a reset)?"""
        state = self.state
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
        for group in self.groups:
            running = tuple(k for k in group.keys if self._still_running(group, k))
            if running:
                groups.append(replace(group, keys=running))
            else:
                self.finished.append(group)
        self.groups, self.finished = groups, self.finished[-8:]
        epoch = self.state.epoch
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
        if self.setup.capabilities.completion_tickets and rng.random() < 0.5:
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
        return key_list(rng, pool, self.setup.unique, at_most, self.setup.limit)

    def _store_keys(self, rng: random.Random) -> tuple[Key, ...]:
        """Keys to store; often one evicted lately comes back (ARC's ghost hits)."""
        unique = self.setup.unique
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


def build_machine(
    make_adapter: Callable[[int], Adapter],
    capabilities: Capabilities,
    config: CheckConfig,
    counters: Counters | None = None,
    on_progress: Callable[[Counters], None] | None = None,
    silenced: frozenset[str] = frozenset(),
) -> type[LockstepMachine]:
    """A :class:`LockstepMachine` subclass driving fresh targets from ``make_adapter``.

    Each example first draws its tier size (:func:`~.config.tier_size`: mostly 1..4
    slots, one example in ten up to ``config.capacity``): small tiers reach rejections
    and evictions at once, larger ones the deeper LRU / ARC states and whatever goes
    wrong only past some size.
    Its keys are three more than fit, so stores evict and evicted keys come back
    (ARC's ghost hits).
    """
    setup = Setup(make_adapter, capabilities, config, counters or Counters(), on_progress,
                  silenced)
    return type("LockstepMachine", (LockstepMachine,), {"setup": setup})
