"""The Hypothesis stateful machine that generates calls for the lockstep driver.

One machine class is built per target and configuration (saved failures and seeds stay
apart), and each example gets a fresh target instance. Every call is drawn from the
spec's state only (never from the target's), so draws stay valid while Hypothesis
explores. The alphabet covers the whole API plus what real schedulers and workers send
on bad days: duplicate keys, failed stores, resets with copies in flight, misuse, and
completions from before a reset. Each enabled assumption stops the calls it excludes
(the spec's ``Assumption.excludes`` has the final word on every call).

Why one rule, not one rule per operation: measured on this suite, Hypothesis's rule
selection (preconditions, feature flags) took about 40% of a run, and argument-free
rules such as ``reset_cache`` got a third of all steps, which kept states shallow.
So each step draws a single integer whose seeded generator makes a short burst of
calls, each picking the operation by weights that depend on the spec's state (an
operation with nothing to act on has weight 0, the role a precondition plays) and
then its arguments. Each
example also switches a random fifth of the operations off ("swarm testing", as
Hypothesis's own feature flags do), which reaches states that need long runs without,
say, resets. Hypothesis finds failures; :mod:`.shrink` shrinks them as call lists.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

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
from .config import CheckConfig
from .lockstep import Lockstep

CHOICE = st.integers(0, 2**32 - 1)
"""One draw per step: Hypothesis costs about 0.1 ms per value drawn, more than a
lockstep step, and the suite shrinks call traces itself."""

BURST = 4
"""Calls per Hypothesis step: each step's generator makes this many calls in a row,
which divides Hypothesis's per-step cost among them (``--steps`` still counts calls)."""

WEIGHTS: dict[str, float] = {
    "lookup": 3, "prepare_store": 3, "store_and_complete": 3, "complete_store": 3,
    "complete_store_unmatched": 1, "prepare_load": 2, "complete_load": 2, "touch": 2,
    "reset_cache": 1, "take_events": 1.5, "complete_stale": 3,
    "prepare_load_not_ready": 1, "complete_load_unmatched": 1, "complete_future_epoch": 0.5,
}
"""Relative frequency of each kind of call, where it is possible at all."""


def key_pool(capacity: int) -> tuple[str, ...]:
    """The keys calls are drawn from: a few more than fit, so stores must evict."""
    count = capacity + 3
    return tuple(chr(ord("a") + i) if i < 26 else f"k{i}" for i in range(count))


@dataclass(frozen=True)
class _Group:
    """The keys one plan handed out: a job whose completions the machine will send."""

    kind: CopyKind
    epoch: int
    keys: tuple[Key, ...]


class Counters:
    """Examples and steps run so far (for the progress display and the report)."""

    def __init__(self) -> None:
        self.examples = 0
        self.steps = 0
        self.failures = 0


def build_machine(
    make_adapter: Callable[[int], Adapter],
    capabilities: Capabilities,
    config: CheckConfig,
    counters: Counters | None = None,
    on_progress: Callable[[Counters], None] | None = None,
) -> type[RuleBasedStateMachine]:
    """A RuleBasedStateMachine class driving a fresh target from ``make_adapter``.

    Each example first draws its tier size from ``1 .. config.capacity``: small tiers
    reach rejections and evictions at once, larger ones the deeper LRU / ARC states.
    Its keys are three more than fit, so stores evict and evicted keys come back
    (ARC's ghost hits).
    """
    unique = config.assumes("unique-keys")
    misuse = not config.assumes("no-misuse")
    stale = not config.assumes("no-stale-completions")
    reset_in_flight = not config.assumes("no-reset-in-flight")
    limit = config.max_keys_per_call
    tally = counters if counters is not None else Counters()

    def key_list(rng: random.Random, pool: Sequence[Key], at_most: int = 0) -> tuple[Key, ...]:
        """1 .. ``at_most`` keys from ``pool`` (default: one more than fit, as the pool
        has three more); repeats allowed unless unique-keys."""
        count = rng.randint(1, min(at_most or len(pool) - 2, limit or len(pool)))
        if unique:
            return tuple(rng.sample(list(pool), min(count, len(pool))))
        return tuple(rng.choice(pool) for _ in range(count))

    def some_of(rng: random.Random, job: tuple[Key, ...]) -> tuple[Key, ...]:
        """All of a job's keys (usually), or a part of them."""
        if len(job) == 1 or rng.random() < 0.7:
            return job
        return key_list(rng, job, len(job))

    class LockstepMachine(RuleBasedStateMachine):
        """Spec and target in lockstep; see the module docstring."""

        def __init__(self) -> None:
            super().__init__()
            self.run: Lockstep | None = None
            self.groups: list[_Group] = []
            self.broken = False
            self.mask: dict[str, float] = dict(WEIGHTS)
            self.options: tuple[tuple[str, ...], tuple[float, ...]] = ((), ())
            self.keys: tuple[Key, ...] = ()
            self.gone: list[Key] = []
            """Keys evicted (or dropped by a reset) so far, oldest first."""
            tally.examples += 1
            if on_progress is not None:
                on_progress(tally)

        @initialize(capacity=st.integers(1, config.capacity), mix=CHOICE)
        def begin(self, capacity: int, mix: int) -> None:
            """A fresh target (and spec) of ``capacity`` slots; this example's op mix."""
            self.run = Lockstep(make_adapter(capacity), replace(config, capacity=capacity))
            self.keys = key_pool(capacity)
            rng = random.Random(mix)
            for name in WEIGHTS:
                if name != "prepare_store" and rng.random() < 0.2:
                    self.mask[name] = 0.0
            self._survey()

        @rule(x=CHOICE)
        def step(self, x: int) -> None:
            """A burst of BURST calls, each chosen and built from ``x``'s generator."""
            rng = random.Random(x)
            for _ in range(BURST):
                names, weights = self.options
                getattr(self, rng.choices(names, weights)[0])(rng)

        # --- bookkeeping -------------------------------------------------------------

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
            if excluded_by(self.state, call, config.assumptions) is not None:
                return None
            tally.steps += 1
            try:
                output = self.lockstep.step(call)
            except BaseException:
                self.broken = True
                tally.failures += 1
                raise
            if isinstance(output, StorePlan):
                self.gone.extend(output.evicted)
            if isinstance(output, StorePlan) and output.keys:
                self.groups.append(_Group(CopyKind.STORE, output.epoch, output.keys))
            elif isinstance(output, LoadPlan) and output.keys:
                self.groups.append(_Group(CopyKind.LOAD, output.epoch, output.keys))
            self._survey()
            return output

        def _survey(self) -> None:
            """Recompute, once per step, what calls can act on (the spec's view)."""
            state = self.state
            live = [_Group(g.kind, g.epoch, self._outstanding(g)) for g in self.groups]
            self.groups = [g for g in live if g.keys]
            self.stores = [g for g in self.groups
                           if g.kind is CopyKind.STORE and g.epoch == state.epoch]
            self.loads = [g for g in self.groups
                          if g.kind is CopyKind.LOAD and g.epoch == state.epoch]
            self.stale_jobs = [g for g in self.groups if g.epoch < state.epoch]
            self.ready = tuple(sorted(state.keys_in(Phase.READY), key=repr))
            self.live = tuple(sorted(state.table, key=repr))
            running = {k for g in self.groups if g.kind is CopyKind.STORE for k in g.keys}
            self.idle = tuple(k for k in self.keys if k not in running)
            self.in_flight = state.in_flight()
            names = tuple(n for n, w in self.mask.items() if w and self._possible(n))
            self.options = (names, tuple(self.mask[n] for n in names))

        def _possible(self, name: str) -> bool:
            """Can this kind of call be made now, in this configuration (the model only)?"""
            return {
                "complete_store": bool(self.stores),
                "complete_store_unmatched": bool(self.idle),
                "prepare_load": bool(self.ready),
                "complete_load": bool(self.loads),
                "touch": capabilities.touch,
                "reset_cache": capabilities.reset and (reset_in_flight or not self.in_flight),
                "take_events": capabilities.events,
                "complete_stale": stale and bool(self.stale_jobs),
                "prepare_load_not_ready": misuse,
                "complete_load_unmatched": misuse,
                "complete_future_epoch": misuse and capabilities.completion_epochs,
            }.get(name, True)

        def _still_running(self, kind: CopyKind, epoch: int, key: Key) -> bool:
            state = self.state
            if epoch < state.epoch:
                return state.orphan(key, kind, epoch) is not None
            block = state.table.get(key)
            if block is None:
                return False
            return block.phase is Phase.STORING if kind is CopyKind.STORE else block.readers > 0

        def _outstanding(self, group: _Group) -> tuple[Key, ...]:
            return tuple(k for k in group.keys if self._still_running(group.kind, group.epoch, k))

        def _complete(self, rng: random.Random, job: _Group) -> None:
            """A completion for (part of) ``job``, in vLLM's form or naming its epoch."""
            chosen = some_of(rng, job.keys)
            if capabilities.completion_epochs and rng.random() < 0.5:
                epoch, origin = job.epoch, None
            else:
                epoch, origin = None, (job.epoch if job.epoch < self.state.epoch else None)
            if job.kind is CopyKind.STORE:
                self._do(Call(Op.COMPLETE_STORE, chosen, success=rng.random() < 0.75,
                              epoch=epoch, origin=origin))
            else:
                self._do(Call(Op.COMPLETE_LOAD, chosen, epoch=epoch, origin=origin))

        # --- the alphabet ------------------------------------------------------------

        def lookup(self, rng: random.Random) -> None:
            """Mostly keys the tier holds (STORING or READY): that is where bugs are."""
            live = self.live if self.live and rng.random() < 0.6 else self.keys
            self._do(Call(Op.LOOKUP, (rng.choice(live),)))

        def _store_keys(self, rng: random.Random) -> tuple[Key, ...]:
            """Keys to store; often one evicted lately comes back (ARC's ghost hits)."""
            chosen = key_list(rng, self.keys)
            if self.gone and rng.random() < 0.35:
                back = rng.choice(self.gone[-3:])
                chosen = (back, *(k for k in chosen[1:] if not unique or k != back))
            return chosen

        def prepare_store(self, rng: random.Random) -> None:
            self._do(Call(Op.PREPARE_STORE, self._store_keys(rng)))

        def store_and_complete(self, rng: random.Random) -> None:
            """The common case in two calls: a store, then its successful completion
            (reaches the deep LRU / ARC states that eviction-order bugs need)."""
            plan = self._do(Call(Op.PREPARE_STORE, self._store_keys(rng)))
            if isinstance(plan, StorePlan) and plan.keys:
                self._do(Call(Op.COMPLETE_STORE, plan.keys))

        def complete_store(self, rng: random.Random) -> None:
            self._complete(rng, rng.choice(self.stores))

        def complete_store_unmatched(self, rng: random.Random) -> None:
            """A completion for a key with no store running: the spec ignores it."""
            self._do(Call(Op.COMPLETE_STORE, key_list(rng, self.idle, 2),
                          success=rng.random() < 0.5))

        def prepare_load(self, rng: random.Random) -> None:
            self._do(Call(Op.PREPARE_LOAD, key_list(rng, self.ready, len(self.ready) + 1)))

        def complete_load(self, rng: random.Random) -> None:
            self._complete(rng, rng.choice(self.loads))

        def touch(self, rng: random.Random) -> None:
            """Mostly READY keys: touching anything else changes no eviction order."""
            pool = self.ready if self.ready and rng.random() < 0.7 else self.keys
            self._do(Call(Op.TOUCH, key_list(rng, pool, len(self.keys) - 2)))

        def reset_cache(self, rng: random.Random) -> None:
            """A reset; the keys it drops come back soon (the scheduler recomputes them),
            those whose copies still run last, as the likeliest to come back."""
            state = self.state
            dropped = sorted(self.live, key=lambda k: state.table[k].phase is Phase.STORING
                             or state.table[k].readers > 0)
            if self._do(Call(Op.RESET_CACHE)) is not None:
                self.gone.extend(dropped)

        def take_events(self, rng: random.Random) -> None:
            self._do(Call(Op.TAKE_EVENTS))

        def complete_stale(self, rng: random.Random) -> None:
            """A completion of a job that started before the last reset."""
            self._complete(rng, rng.choice(self.stale_jobs))

        def prepare_load_not_ready(self, rng: random.Random) -> None:
            """Misuse: prepare_load naming a key that is absent or still being stored."""
            chosen = key_list(rng, self.keys)
            if any(self.state.phase(k) is not Phase.READY for k in chosen):
                self._do(Call(Op.PREPARE_LOAD, chosen))

        def complete_load_unmatched(self, rng: random.Random) -> None:
            """Misuse: complete_load naming a key that nobody is reading."""
            chosen = key_list(rng, self.keys, 2)
            epoch = self.state.epoch
            if not all(self._still_running(CopyKind.LOAD, epoch, k) for k in chosen):
                self._do(Call(Op.COMPLETE_LOAD, chosen))

        def complete_future_epoch(self, rng: random.Random) -> None:
            """Misuse: a completion naming an epoch that has not begun."""
            op = rng.choice((Op.COMPLETE_STORE, Op.COMPLETE_LOAD))
            self._do(Call(op, (rng.choice(self.keys),), epoch=self.state.epoch + rng.randint(1, 2)))

        def teardown(self) -> None:
            if self.run is not None and not self.broken:
                try:
                    self.run.drain(stale_completions=stale)
                except BaseException:
                    tally.failures += 1
                    raise
            if on_progress is not None:
                on_progress(tally)

    LockstepMachine.__name__ = LockstepMachine.__qualname__ = "LockstepMachine"
    return LockstepMachine
