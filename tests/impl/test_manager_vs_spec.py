"""Random call sequences give the same answers on ``OffloadManager`` as on the spec.

A Hypothesis state machine drives the manager through the conformance suite's own
lockstep driver and native adapter (``kvoffload.conformance.judge.lockstep``), at ``--level
exact``, for LRU and ARC: every answer is compared as ``kvoffload check`` compares it,
misuse must be rejected with the spec's error code and change nothing. The only
freedom the spec allows, the choice of free slots, is handed from the manager to the
spec. On top of the suite's comparison, the manager's own consistency check and its
eviction order (seen through evictability) are compared with the spec's model after
every call. Sequences include duplicate keys, failed stores, resets with copies in
flight, both completion forms (tickets of running, finished, pre-reset and never-issued
jobs) and misuse.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kvoffload.conformance.config import CheckConfig, Level
from kvoffload.conformance.judge.lockstep import Lockstep as Driver
from kvoffload.conformance.target.native import NativeAdapter
from kvoffload.impl import OffloadManager
from kvoffload.impl.arc import ArcView
from kvoffload.spec import ArcLists, CacheState, Call, LruOrder, Op, Phase, Policy

KEYS = st.sampled_from("abcdef")
CALL_KEYS = st.lists(KEYS, max_size=5)
TICKETS = st.one_of(st.none(), st.integers(min_value=-1, max_value=12))


class Lockstep(RuleBasedStateMachine):
    """The spec and the manager, driven by the same calls."""

    driver: Driver
    manager: OffloadManager

    policy = Policy.LRU

    @initialize(capacity=st.integers(min_value=1, max_value=4))
    def start(self, capacity: int) -> None:
        self.manager = OffloadManager(capacity, policy=self.policy)
        config = CheckConfig(policy=self.policy, level=Level.EXACT, capacity=capacity)
        self.driver = Driver(NativeAdapter(self.manager), config)

    @property
    def spec(self) -> CacheState:
        return self.driver.state

    def step(self, call: Call) -> None:
        """Run ``call`` on both through the suite's driver (raises at a divergence)."""
        self.driver.step(call)

    def keys_in(self, phase: Phase) -> list[str]:
        return sorted(str(k) for k in self.spec.keys_in(phase))

    @rule(key=KEYS)
    def lookup(self, key: str) -> None:
        self.step(Call(Op.LOOKUP, (key,)))

    @rule(keys=CALL_KEYS)
    def prepare_store(self, keys: list[str]) -> None:
        self.step(Call(Op.PREPARE_STORE, tuple(keys)))

    @rule(keys=CALL_KEYS)
    def store_and_complete(self, keys: list[str]) -> None:
        """prepare_store, then complete_store of what it accepted: fills the cache fast."""
        self.step(Call(Op.PREPARE_STORE, tuple(keys)))
        self.step(Call(Op.COMPLETE_STORE, tuple(keys)))

    @rule(keys=CALL_KEYS, success=st.booleans(), ticket=TICKETS)
    def complete_store(self, keys: list[str], success: bool, ticket: int | None) -> None:
        self.step(Call(Op.COMPLETE_STORE, tuple(keys), success=success, ticket=ticket))

    @rule(data=st.data(), success=st.booleans(), ticket=TICKETS)
    def complete_storing_keys(self, data: st.DataObject, success: bool,
                              ticket: int | None) -> None:
        """Completions that mostly hit STORING keys, so blocks reach READY often."""
        storing = self.keys_in(Phase.STORING)
        keys = data.draw(st.lists(st.sampled_from(storing), max_size=4)) if storing else []
        self.step(Call(Op.COMPLETE_STORE, tuple(keys), success=success, ticket=ticket))

    @rule(keys=CALL_KEYS)
    def prepare_load(self, keys: list[str]) -> None:
        self.step(Call(Op.PREPARE_LOAD, tuple(keys)))

    @rule(data=st.data())
    def prepare_load_ready_keys(self, data: st.DataObject) -> None:
        ready = self.keys_in(Phase.READY)
        keys = data.draw(st.lists(st.sampled_from(ready), max_size=4)) if ready else []
        self.step(Call(Op.PREPARE_LOAD, tuple(keys)))

    @rule(keys=CALL_KEYS, ticket=TICKETS)
    def complete_load(self, keys: list[str], ticket: int | None) -> None:
        self.step(Call(Op.COMPLETE_LOAD, tuple(keys), ticket=ticket))

    @rule(data=st.data(), ticket=TICKETS)
    def complete_read_keys(self, data: st.DataObject, ticket: int | None) -> None:
        read = sorted(str(b.key) for b in self.spec.blocks if b.readers)
        orphans = sorted(str(o.key) for o in self.spec.orphans)
        pool = read + orphans
        keys = data.draw(st.lists(st.sampled_from(pool), max_size=3)) if pool else []
        self.step(Call(Op.COMPLETE_LOAD, tuple(keys), ticket=ticket))

    @rule(keys=CALL_KEYS)
    def touch(self, keys: list[str]) -> None:
        self.step(Call(Op.TOUCH, tuple(keys)))

    @rule(data=st.data())
    def touch_live_keys(self, data: st.DataObject) -> None:
        live = self.keys_in(Phase.READY) + self.keys_in(Phase.STORING)
        keys = data.draw(st.lists(st.sampled_from(live), max_size=4)) if live else []
        self.step(Call(Op.TOUCH, tuple(keys)))

    @rule()
    def reset_cache(self) -> None:
        self.step(Call(Op.RESET_CACHE))

    @rule()
    def take_events(self) -> None:
        self.step(Call(Op.TAKE_EVENTS))

    @rule(data=st.data())
    def store_recently_evicted(self, data: st.DataObject) -> None:
        """Store keys the eviction order still remembers (ARC's ghosts): moves ``p``."""
        arc = self.spec.recency
        ghosts = sorted(str(k) for k in arc.b1 + arc.b2) if isinstance(arc, ArcLists) else []
        keys = data.draw(st.lists(st.sampled_from(ghosts), max_size=3)) if ghosts else []
        self.step(Call(Op.PREPARE_STORE, tuple(keys)))
        self.step(Call(Op.COMPLETE_STORE, tuple(keys)))

    @invariant()
    def both_consistent(self) -> None:
        if hasattr(self, "manager"):
            self.manager.check()  # the spec's invariants are checked by the driver

    @invariant()
    def same_eviction_order(self) -> None:
        """The manager's recency bookkeeping is the spec's model, seen through evictability."""
        if not hasattr(self, "manager"):
            return
        order, model = self.manager.view().order, self.spec.recency
        if isinstance(model, LruOrder):
            assert order == model.order
            return
        assert isinstance(order, ArcView)
        evictable = self.spec.evictable()
        assert order.t1_evictable == tuple(k for k in model.t1 if k in evictable)
        assert order.t2_evictable == tuple(k for k in model.t2 if k in evictable)
        assert (order.t1_size, order.t2_size) == (len(model.t1), len(model.t2))
        assert (order.b1, order.b2, order.p) == (model.b1, model.b2, model.p)


class ArcLockstep(Lockstep):
    """The same, under ARC (a subclass of its own keeps saved failures apart)."""

    policy = Policy.ARC


SETTINGS = settings(max_examples=50, stateful_step_count=50, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
"""The default tier's budget (an inner loop: about 1.2 s of CPU a policy)."""
WIDE_BUDGET = settings(SETTINGS, max_examples=100)
"""The wide tier's: twice the examples (every CI run makes it)."""
FULL_BUDGET = settings(SETTINGS, max_examples=300)
"""The slow tier's: six times the examples."""
TestLruManagerMatchesSpec = Lockstep.TestCase
TestLruManagerMatchesSpec.settings = SETTINGS
TestArcManagerMatchesSpec = ArcLockstep.TestCase
TestArcManagerMatchesSpec.settings = SETTINGS
# The wide tier's copies: the same machines' test cases with twice the examples.
TestLruManagerMatchesSpecWide = pytest.mark.wide(type(
    "TestLruManagerMatchesSpecWide", (TestLruManagerMatchesSpec,), {"settings": WIDE_BUDGET}))
TestArcManagerMatchesSpecWide = pytest.mark.wide(type(
    "TestArcManagerMatchesSpecWide", (TestArcManagerMatchesSpec,), {"settings": WIDE_BUDGET}))
# The slow tier's copies: the same machines' test cases with the full budget.
TestLruManagerMatchesSpecFullBudget = pytest.mark.slow(type(
    "TestLruManagerMatchesSpecFullBudget", (TestLruManagerMatchesSpec,),
    {"settings": FULL_BUDGET}))
TestArcManagerMatchesSpecFullBudget = pytest.mark.slow(type(
    "TestArcManagerMatchesSpecFullBudget", (TestArcManagerMatchesSpec,),
    {"settings": FULL_BUDGET}))
