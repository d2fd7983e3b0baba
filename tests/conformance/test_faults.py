"""``--fault`` (docs/spec.md D15): the suite injects a node's failure, the spec's
``fail_node``, which loses every block; after it a lookup must answer MISS, so a target
that still answers HIT for a block the failure took (a HIT no load can read) fails, and
one that loses exactly that conforms. Fake targets in process: no Mooncake needed."""

from __future__ import annotations

from typing import Any

import pytest
from spec_backed import SpecBackedManager

from kvoffload.conformance.command.runner import run_check
from kvoffload.conformance.config import CheckConfig
from kvoffload.conformance.errors import PropertyViolation, UsageError
from kvoffload.conformance.judge.generator import Rules
from kvoffload.conformance.judge.lockstep import replay
from kvoffload.conformance.reproduce import config_from
from kvoffload.conformance.target.host import Host
from kvoffload.conformance.target.native import NativeAdapter
from kvoffload.conformance.target.protocol import (
    call_line,
    config_fields,
    hello_message,
    read_call_line,
    read_value,
)
from kvoffload.conformance.target.targets import prepare
from kvoffload.spec import Call, Eviction, Key, Op, fail_node

PS, CS, L, PL = Op.PREPARE_STORE, Op.COMPLETE_STORE, Op.LOOKUP, Op.PREPARE_LOAD
FAULT = CheckConfig(capacity=2, fault="holder-kill")


def c(op: Op, *keys: Key) -> Call:
    return Call(op, keys)


class LosesEverything(SpecBackedManager):
    """A tier whose node fails as D15 says: every block goes, at once."""

    def fail_node(self) -> None:
        self.state, _ = fail_node(self.state)


class StillAnswersHit(SpecBackedManager):
    """A directory that has not noticed its holder died: the blocks read as present
    (Mooncake's master for 10 s after its holder is killed)."""

    def fail_node(self) -> None:
        pass


class LosesTheNextStoreToo(LosesEverything):
    """Loses what D15 allows, then also the first block stored after the failure (a
    master that still places new objects on the dead holder's segment)."""

    doomed: Key | None = None

    def fail_node(self) -> None:
        super().fail_node()
        self.doomed = "next"

    def prepare_store(self, keys: Any) -> Any:
        plan = super().prepare_store(keys)
        if self.doomed == "next" and getattr(plan, "keys", ()):
            self.doomed = plan.keys[0]
        return plan

    def complete_store(self, keys: Any, success: bool = True, ticket: int | None = None) -> Any:
        done = super().complete_store(keys, success, ticket)
        if self.doomed is not None and self.doomed in keys:
            self.state, _ = fail_node(self.state)  # gone with the dead holder
        return done


class Faulty(NativeAdapter):
    """The native adapter with the fault hook the suite calls (``send`` makes
    ``fail_node()`` on the adapter, D15)."""

    def fail_node(self) -> None:
        self.manager.fail_node()


def run(manager: SpecBackedManager, calls: list[Call], config: CheckConfig = FAULT) -> None:
    replay(Faulty(manager), config, calls)


AFTER = [c(PS, "a", "b"), c(CS, "a"), Call(Op.FAIL_NODE), c(L, "a"), c(L, "b")]


@pytest.mark.parametrize("eviction", [Eviction.ON_STORE, Eviction.BACKGROUND])
def test_losing_every_block_at_the_failure_conforms(eviction: Eviction) -> None:
    config = CheckConfig(capacity=2, fault="holder-kill", eviction=eviction)
    run(LosesEverything(2), [*AFTER, c(PS, "a"), c(CS, "a"), c(L, "a"), c(PL, "a")], config)


@pytest.mark.parametrize("eviction", [Eviction.ON_STORE, Eviction.BACKGROUND])
def test_a_hit_for_a_block_the_failure_took_is_a_lookup_failure(eviction: Eviction) -> None:
    """Not excused by background eviction either: that explains a block gone, never a
    block still reported."""
    config = CheckConfig(capacity=2, fault="holder-kill", eviction=eviction)
    with pytest.raises(PropertyViolation) as caught:
        run(StillAnswersHit(2), AFTER, config)
    assert caught.value.prop == "lookup"
    assert "must answer MISS" in caught.value.message
    assert caught.value.trace[-2:] == (Call(Op.FAIL_NODE), c(L, "a"))


def test_losing_a_block_stored_after_the_failure_is_more_than_allowed() -> None:
    calls = [c(PS, "a"), c(CS, "a"), Call(Op.FAIL_NODE), c(PS, "b"), c(CS, "b"), c(L, "b")]
    run(LosesEverything(2), calls)
    with pytest.raises(PropertyViolation) as caught:
        run(LosesTheNextStoreToo(2), calls)
    assert caught.value.prop == "lookup"
    assert "must answer HIT" in caught.value.message


def test_only_a_target_with_nodes_takes_a_fault() -> None:
    with pytest.raises(UsageError, match="--fault holder-kill"):
        prepare("kvoffload.impl:OffloadManager", FAULT)
    with pytest.raises(UsageError, match="only a target with nodes"):
        run_check("exec:./no-such-host", FAULT)  # refused before any host starts
    with pytest.raises(UsageError, match="--trace"):
        run_check("mooncake==0.3.13.post1",
                  CheckConfig(fault="master-kill", trace="conversation:1", capacity=8))


def test_the_generator_makes_the_fault_only_when_asked() -> None:
    caps = Faulty(LosesEverything(1)).capabilities
    assert Rules.of(FAULT, caps).allowed["fail_node"] is True
    assert Rules.of(CheckConfig(), caps).allowed["fail_node"] is False


def test_the_fault_crosses_the_host_protocol() -> None:
    """The call line and its answer (none), and the hello's config naming the fault
    only when one is asked for (every other hello is as it was)."""
    assert read_call_line(call_line(Call(Op.FAIL_NODE))) == Call(Op.FAIL_NODE)
    assert read_value(Op.FAIL_NODE, {"kind": "none"}) is None
    assert config_fields(FAULT)["fault"] == "holder-kill"
    assert "fault" not in config_fields(CheckConfig())


def test_a_host_takes_the_fault_in_its_hello() -> None:
    """Regression (the first --fault run): the host refused a hello whose config named
    the fault ("is not a configuration"), so no run with a fault could start; and the
    judge's side of a host lacked fail_node (RemoteAdapter), a crash at the first fault
    (covered end to end by test_mooncake.py's slow run with faults)."""
    from kvoffload.conformance.target.remote import RemoteAdapter

    answer = Host().hello(hello_message("mooncake==0.3.13.post1", config_fields(FAULT)))
    assert answer["answer"] == "hello", answer
    assert callable(getattr(RemoteAdapter, "fail_node", None))


def test_a_reproducer_replays_under_the_runs_fault_and_eviction() -> None:
    """Regression: a report's configuration names the run's eviction and fault, and a
    reproducer replays under both (it replayed under on-store and no fault, so a
    Mooncake reproducer's fail_node() was refused and a background eviction failed)."""
    config = config_from({"eviction": "background", "fault": "master-kill", "capacity": 2})
    assert (config.eviction, config.fault) == (Eviction.BACKGROUND, "master-kill")
