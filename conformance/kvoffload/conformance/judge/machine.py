"""The Hypothesis stateful machine that generates calls for the lockstep driver.

Each run gets a subclass of :class:`LockstepMachine` carrying its :class:`Setup`
(target, configuration, counters), so saved failures and seeds stay apart, and each
example gets a fresh target instance. The calls come from the suite's one call
generator (:mod:`.generator`), drawn from the spec's state only (never from the
target's), so draws stay valid while Hypothesis explores; the machine is its driver
(each call made in lockstep on the spec and the target).

Why one rule, not one rule per operation (the departure from Hypothesis's usual
``RuleBasedStateMachine`` style, measured in docs/conformance.md): Hypothesis's rule
selection (preconditions, feature flags, one draw per argument) cost more than the
lockstep step itself, and argument-free rules such as ``reset_cache`` got a third of
all steps, which kept states shallow. So each step draws a single integer whose seeded
generator makes a burst of calls (:meth:`~.generator.CallGenerator.burst`). Hypothesis
finds failures; :mod:`.shrink` shrinks them as call lists.

Properties already failed in an earlier round of the run (``Setup.silenced``) are not
checked again: a divergence of one of them ends the current target quietly and the
example goes on with a fresh one (see :mod:`kvoffload.conformance.command.runner`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from kvoffload.spec import CacheState, Call

from ..adapter_api import Adapter, Capabilities
from ..config import CheckConfig, tier_size
from ..errors import PropertyViolation
from .generator import BURST, CallGenerator, Rules, key_pool
from .lockstep import Lockstep, construct

__all__ = ["BURST", "Counters", "LockstepMachine", "Setup", "build_machine", "key_pool"]

CHOICE = st.integers(0, 2**32 - 1)
"""One draw per step: Hypothesis costs about 0.1 ms per value drawn, more than a
lockstep step, and the suite shrinks call traces itself."""


class Counters:
    """Examples and steps run so far (for the progress display and the report)."""

    def __init__(self) -> None:
        self.examples = 0
        self.steps = 0
        self.failures = 0
        self.first: PropertyViolation | None = None
        """The first violation raised since the runner last cleared it: a failure that
        Hypothesis then loses (its ``Flaky...`` errors on a target that does not fail
        again, an error while it shrinks) is still the run's (see
        :mod:`kvoffload.conformance.command.runner`)."""

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
        self.rules = Rules.of(self.config, self.capabilities)
        """What the generator may send to this target under this configuration."""


class LockstepMachine(RuleBasedStateMachine):
    """Spec and target in lockstep; see the module docstring. Subclassed per run by
    :func:`build_machine`, which sets ``setup``."""

    setup: ClassVar[Setup]

    def __init__(self) -> None:
        super().__init__()
        self.run: Lockstep | None = None
        self.capacity = 1
        self.broken = False
        self.calls = CallGenerator(self.setup.rules, self)
        tally = self.setup.counters
        tally.examples += 1
        if self.setup.on_progress is not None:
            self.setup.on_progress(tally)

    @initialize(size=CHOICE, mix=CHOICE)
    def begin(self, size: int, mix: int) -> None:
        """A fresh target (and spec) of a drawn tier size
        (:func:`~kvoffload.conformance.config.tier_size`); this example's op mix."""
        self.capacity = tier_size(size, self.setup.config.capacity)
        self._fresh_target()
        self.calls.begin(self.capacity, mix)

    @rule(x=CHOICE)
    def step(self, x: int) -> None:
        """A burst of calls from the one call generator, seeded by ``x``."""
        self.calls.burst(x)

    def teardown(self) -> None:
        setup = self.setup
        if self.run is not None and not self.broken:
            try:
                self.run.drain(stale_completions=setup.rules.stale)
            except PropertyViolation as violation:
                if violation.prop not in setup.silenced:
                    setup.counters.saw(violation)
                    raise
        if setup.on_progress is not None:
            setup.on_progress(setup.counters)

    # --- the generator's driver --------------------------------------------------------

    def _fresh_target(self) -> None:
        config = self.setup.config.sized(self.capacity)
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
        self.calls.forget_jobs()

    @property
    def lockstep(self) -> Lockstep:
        if self.run is None:
            raise RuntimeError("a step ran before the example's target was built")
        return self.run

    @property
    def state(self) -> CacheState:
        run = self.run  # not through :attr:`lockstep`: the generator asks at every call
        if run is None:
            raise RuntimeError("a step ran before the example's target was built")
        return run.state

    def make(self, call: Call) -> object:
        """Step the lockstep driver; count the step, keep the first failure."""
        setup = self.setup
        setup.counters.steps += 1
        try:
            return self.lockstep.step(call)
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


def build_machine(
    make_adapter: Callable[[int], Adapter],
    capabilities: Capabilities,
    config: CheckConfig,
    counters: Counters | None = None,
    on_progress: Callable[[Counters], None] | None = None,
    silenced: frozenset[str] = frozenset(),
) -> type[LockstepMachine]:
    """A :class:`LockstepMachine` subclass driving fresh targets from ``make_adapter``.

    Each example first draws its tier size (:func:`~kvoffload.conformance.config.tier_size`: mostly
    1..4 slots, one example in ten up to ``config.capacity``): small tiers reach rejections and
    evictions at once, larger ones the deeper LRU / ARC states and whatever goes wrong only past
    some size. Its keys are three more than fit, so stores evict and evicted keys come back (ARC's
    ghost hits).
    """
    setup = Setup(make_adapter, capabilities, config, counters or Counters(), on_progress,
                  silenced)
    return type("LockstepMachine", (LockstepMachine,), {"setup": setup})
