"""The environment: jobs, the call alphabet, and the rules checked on each call (step.py)."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import replace

import pytest
from proofs.modelcheck.bounds import TINY
from proofs.modelcheck.checks import Check, laws_only
from proofs.modelcheck.environment import Environment
from proofs.modelcheck.explorer import Setup, Shared, explore, family_of
from proofs.modelcheck.model import SPEC, Model, Transition
from proofs.modelcheck.mutants import MUTANTS_BY_NAME
from proofs.modelcheck.node import Action, Form, Node

from kvoffload.spec import (
    CacheState,
    Call,
    Completion,
    Events,
    Eviction,
    NotReadable,
    Op,
    Output,
    Phase,
    Policy,
    UnmatchedCompleteLoad,
    apply,
    broken_invariants,
    initial_state,
)


def _env(form: Form = Form.TICKET) -> Environment:
    return Environment(SPEC, TINY, form)


def _run(env: Environment, calls: list[Action]) -> Node:
    node = Node(initial_state(TINY.capacity, Policy.LRU))
    for action in calls:
        outcome = env.step(node, action)
        assert outcome.violation is None, outcome.violation
        assert outcome.node is not None
        node = outcome.node
    return node


def _find(env: Environment, node: Node, text: str) -> Action:
    matches = [a for a in env.actions(node, None) if str(a) == text]
    assert len(matches) == 1, [str(a) for a in env.actions(node, None)]
    return matches[0]


def test_prepare_store_starts_one_job_per_planned_key() -> None:
    env = _env()
    node = _run(env, [Action(Call(Op.PREPARE_STORE, ("a", "b")))])
    assert node.jobs == (("store", "a", 0, 0), ("store", "b", 0, 1))


def test_prepare_load_starts_one_job_per_distinct_key() -> None:
    env = _env()
    node = _run(env, [Action(Call(Op.PREPARE_STORE, ("a",)))])
    node = _run_from(env, node, "complete_store(['a'], ticket=0)")
    node = _run_from(env, node, "prepare_load(['a', 'a'])")
    assert node.jobs == (("load", "a", 1, 0),)


def _run_from(env: Environment, node: Node, text: str) -> Node:
    outcome = env.step(node, _find(env, node, text))
    assert outcome.violation is None
    assert outcome.node is not None
    return outcome.node


def test_completions_name_the_jobs_ticket_in_the_ticket_form_only() -> None:
    for form, text in ((Form.TICKET, "complete_store(['a'], ticket=0)"),
                       (Form.VLLM, "complete_store(['a'])  # job 0")):
        env = _env(form)
        node = _run(env, [Action(Call(Op.PREPARE_STORE, ("a",)))])
        action = _find(env, node, text)
        assert action.call.job_ticket == 0
        assert (action.call.ticket is None) is (form is Form.VLLM)
        assert _run_from(env, node, text).jobs == ()


def test_vllm_form_reports_a_finished_job_again() -> None:
    """Issue 10 A: the environment sends duplicate and late reports of finished jobs,
    for busy keys too; it remembers the last finished job of each kind and key."""
    env = _env(Form.VLLM)
    node = _run(env, [Action(Call(Op.PREPARE_STORE, ("a",)))])
    node = _run_from(env, node, "complete_store(['a'], success=False)  # job 0")
    assert node.done == (("store", "a", 0),)
    node = _run_from(env, node, "prepare_store(['a'])")
    late = _find(env, node, "complete_store(['a'])  # job 0")
    assert late.jobs == ()
    assert late.call.ticket is None
    assert late.call.job == 0


def test_stale_reports_cannot_start_copies_without_end() -> None:
    """A stale complete_load in vLLM's form is taken for the running load's, which keeps
    running: the spec then counts no reader, but the workers run one more copy each
    time. The environment starts no more than ``readers * (resets + 1)`` loads of a key
    (TINY: 2), else the unreduced and even the reduced search never end."""
    env = _env(Form.VLLM)
    node = _run(env, [Action(Call(Op.PREPARE_STORE, ("a",)))])
    node = _run_from(env, node, "complete_store(['a'])  # job 0")
    node = _run_from(env, node, "prepare_load(['a'])")
    node = _run_from(env, node, "complete_load(['a'])  # job 1")
    for _ in range(2):
        node = _run_from(env, node, "prepare_load(['a'])")
        node = _run_from(env, node, "complete_load(['a'])  # job 1")  # late: job 1 is done
    assert sum(1 for j in node.jobs if j[:2] == ("load", "a")) == 2
    assert node.state.table["a"].readers == 0  # the spec's count went wrong
    loads = [a for a in env.actions(node, None) if a.call.op is Op.PREPARE_LOAD]
    assert not any(set(a.call.keys) == {"a"} for a in loads)
    assert any(a.call.keys == ("b",) for a in loads)  # absent keys: a misuse, offered


def test_misuse_calls_are_offered_and_raise_without_a_violation() -> None:
    env = _env()
    node = _run(env, [Action(Call(Op.PREPARE_STORE, ("a",)))])
    outcome = env.step(node, _find(env, node, "prepare_load(['a'])"))
    assert outcome.node is None
    assert outcome.violation is None
    assert isinstance(outcome.output, NotReadable)
    env = _env(Form.VLLM)
    outcome = env.step(node, _find(env, node, "complete_load(['b'])"))
    assert outcome.violation is None
    assert isinstance(outcome.output, UnmatchedCompleteLoad)


def test_ticket_form_completions_of_no_running_job_are_offered_for_every_key() -> None:
    env = _env()
    node = _run(env, [Action(Call(Op.PREPARE_STORE, ("a",)))])
    stray = {str(a) for a in env.actions(node, None)
             if a.call.op is Op.COMPLETE_STORE and not a.jobs}
    assert {"complete_store(['a'], ticket=1)", "complete_store(['b'], ticket=1)",
            "complete_store(['b'], success=False, ticket=1)"} <= stray
    assert "complete_store(['a'], ticket=0)" not in stray


def test_resets_and_readers_stay_within_the_bounds() -> None:
    env = _env()
    node = _run(env, [Action(Call(Op.RESET_CACHE))])
    assert not any(a.call.op is Op.RESET_CACHE for a in env.actions(node, None))
    node = _run(env, [Action(Call(Op.PREPARE_STORE, ("a",)))])
    node = _run_from(env, node, "complete_store(['a'], ticket=0)")
    node = _run_from(env, node, "prepare_load(['a'])")
    loads = [a for a in env.actions(node, None) if a.call.op is Op.PREPARE_LOAD]
    assert not any(a.call.keys == ("a",) for a in loads)  # TINY allows one reader


def test_symmetric_calls_are_made_once() -> None:
    env = _env()
    node = Node(initial_state(TINY.capacity, Policy.LRU))
    reduced = [str(a) for a in env.actions(node, (0, 0, 0))]
    assert "lookup('a')" in reduced
    assert "lookup('b')" not in reduced
    assert "prepare_store(['a', 'b'])" in reduced
    assert "prepare_store(['b', 'c'])" not in reduced
    assert "prepare_store(['a', 'a'])" in reduced
    assert len(reduced) < len(list(env.actions(node, None)))


def test_each_call_rule_can_fail() -> None:
    """A replaced operation must answer as the spec's transition; a running copy's
    completion must reach that copy."""
    node = Node(initial_state(TINY.capacity, Policy.LRU))
    env = Environment(MUTANTS_BY_NAME["UnmatchedCompleteLoadAccepted"].model, TINY, Form.VLLM)
    outcome = env.step(node, _find(env, node, "complete_load(['a'])"))
    assert outcome.violation is not None
    assert outcome.violation[0] == "follows_the_spec"
    assert "raises UnmatchedCompleteLoad" in outcome.violation[1]
    env = Environment(MUTANTS_BY_NAME["LookupPendingAsMiss"].model, TINY, Form.TICKET)
    node = _run(env, [Action(Call(Op.PREPARE_STORE, ("a",)))])
    outcome = env.step(node, _find(env, node, "lookup('a')"))
    assert outcome.violation is not None
    assert outcome.violation[0] == "follows_the_spec"
    env = _env()
    job = node.jobs[0]
    wrong = Action(Call(Op.COMPLETE_STORE, ("b",), ticket=0), jobs=(job,))
    outcome = env.step(node, wrong)
    assert outcome.violation is not None
    assert outcome.violation[0] == "completions_attributed"


# --- the opt-in background eviction (D14) -------------------------------------------


def _drops_pinned_too(state: CacheState, call: Call, slots: object) -> tuple[CacheState, Output]:
    """A tier whose background eviction also takes blocks being read (a lease that ended
    before its load did): the spec's transition for the evictable keys, the rest dropped."""
    pinned = frozenset(b for b in state.blocks if b.key in call.keys and b.loads)
    rest = tuple(k for k in call.keys if k not in {b.key for b in pinned})
    new, out = apply(state, replace(call, keys=rest))
    return replace(new, blocks=new.blocks - pinned), out


def test_background_eviction_is_made_only_under_the_setting() -> None:
    node = Node(initial_state(TINY.capacity, Policy.LRU))
    plain = {a.call.op for a in _env().actions(node, None)}
    background = Environment(SPEC, TINY, Form.TICKET, eviction=Eviction.BACKGROUND)
    made = [a.call for a in background.actions(node, None)
            if a.call.op is Op.EVICT_IN_BACKGROUND]
    assert Op.EVICT_IN_BACKGROUND not in plain
    assert made == [Call(Op.EVICT_IN_BACKGROUND, (k,)) for k in TINY.keys]


def test_a_wrong_background_eviction_is_caught_by_the_comparison_and_the_laws() -> None:
    """Under the setting, a tier that evicts a block being read is found at TINY, by the
    comparison with the spec and by the laws alone, each with a shortest trace."""
    model = replace(SPEC, name="DropsPinnedInBackground",
                    replaced={Op.EVICT_IN_BACKGROUND: _drops_pinned_too})
    setup = Setup(model, Form.TICKET, Policy.LRU, eviction=Eviction.BACKGROUND)
    compared = explore(setup, TINY)
    alone = explore(laws_only(Check("x", "x", setup, "violated")).setup, TINY)
    assert compared.violation is not None
    assert compared.violation.prop == "follows_the_spec"
    assert alone.violation is not None
    assert alone.violation.prop == "background_eviction_needs_evictable_blocks"
    assert [str(a) for a in alone.violation.trace][-1] == "evict_in_background(['a'])"
    assert len(alone.violation.trace) == 4  # store, its completion, a load, the eviction


# --- a node's failure (D15) --------------------------------------------------------


def _failing(env: Environment, node: Node) -> Node:
    """``node`` after the environment's ``fail_node()`` (no rule broken)."""
    return _run_from(env, node, "fail_node()")


def test_node_failure_is_made_only_where_it_is_on() -> None:
    node = Node(initial_state(TINY.capacity, Policy.LRU))
    plain = {a.call.op for a in _env().actions(node, None)}
    failing = Environment(SPEC, TINY, Form.TICKET, node_failure=True)
    made = [a for a in failing.actions(node, None) if a.call.op is Op.FAIL_NODE]
    assert Op.FAIL_NODE not in plain
    assert [a.call for a in made] == [Call(Op.FAIL_NODE)]
    assert made[0].jobs == ()  # it delivers no completion: not a liveness edge


def test_a_node_failure_ends_the_copies_on_its_blocks_only() -> None:
    """The store running on a STORING block and the load on a READY one end with the
    node (their slots are free at once); a store a reset left running goes on, and its
    completion still releases its slot. A late completion of an ended job is offered
    and ignored."""
    env = Environment(SPEC, TINY, Form.TICKET, node_failure=True)
    node = _run(env, [Action(Call(Op.PREPARE_STORE, ("a",))), Action(Call(Op.RESET_CACHE))])
    node = _run_from(env, node, "prepare_store(['b'])")
    assert node.jobs == (("store", "a", 0, 0), ("store", "b", 1, 1))
    node = _failing(env, node)
    assert node.jobs == (("store", "a", 0, 0),)
    assert node.state.blocks == frozenset()
    assert node.state.free_slots() == (1,)
    late = _find(env, node, "complete_store(['b'], ticket=1)")
    outcome = env.step(node, late)
    assert outcome.violation is None
    assert isinstance(outcome.output, Completion)
    assert outcome.output.ignored == ("b",)
    node = _run_from(env, node, "complete_store(['a'], ticket=0)")
    assert node.jobs == ()
    assert node.state.free_slots() == (0, 1)

    node = _run(env, [Action(Call(Op.PREPARE_STORE, ("a",)))])
    node = _run_from(env, node, "complete_store(['a'], ticket=0)")
    node = _run_from(env, node, "take_events()")
    node = _run_from(env, node, "prepare_load(['a'])")
    assert node.jobs == (("load", "a", 1, 0),)
    node = _failing(env, node)
    assert node.jobs == ()
    assert node.state.free_slots() == (0, 1)
    assert node.state.announced == frozenset({"a"})  # told at the next take_events
    events = env.step(node, _find(env, node, "take_events()")).output
    assert isinstance(events, Events)
    assert events.removed == frozenset({"a"})


def test_in_the_vllm_form_an_ended_job_may_still_report() -> None:
    env = Environment(SPEC, TINY, Form.VLLM, node_failure=True)
    node = _run(env, [Action(Call(Op.PREPARE_STORE, ("a",)))])
    node = _failing(env, node)
    assert node.jobs == ()
    assert node.done == (("store", "a", 0),)
    late = _find(env, node, "complete_store(['a'])  # job 0")
    assert late.jobs == ()


def _keeps_ready(state: CacheState, call: Call, slots: object) -> tuple[CacheState, Output]:
    """A failure that spares the READY blocks no one reads (as if they had a replica
    the spec does not model): the spec's transition, then those blocks and their
    places in the eviction order put back."""
    new, out = apply(state, call)
    kept = frozenset(b for b in state.blocks if b.key in state.evictable())
    return replace(new, blocks=kept, recency=state.recency), out


def _keeps_readers(state: CacheState, call: Call, slots: object
                   ) -> tuple[CacheState, Output]:
    """A failure that spares the blocks being read (a reader's lease taken to outlive
    the node): the spec's transition, then the READY blocks with readers put back."""
    new, out = apply(state, call)
    return replace(new, blocks=frozenset(b for b in state.blocks if b.loads)), out


def _keeps_stores(state: CacheState, call: Call, slots: object
                  ) -> tuple[CacheState, Output]:
    """A failure that spares the STORING blocks, so a store's completion can still
    make one READY though the memory it wrote went with the node: the spec's
    transition, then those blocks put back."""
    new, out = apply(state, call)
    storing = frozenset(b for b in state.blocks if b.phase is Phase.STORING)
    return replace(new, blocks=storing), out


NODE_FAILURE_MUTANTS: dict[str, tuple[Transition, list[Call], int]] = {
    # name: (fail_node, the calls that make a state where it differs, shortest trace)
    "FailureKeepsReadyBlock": (_keeps_ready, [
        Call(Op.PREPARE_STORE, ("a",)), Call(Op.COMPLETE_STORE, ("a",), ticket=0)], 3),
    "FailureKeepsReader": (_keeps_readers, [
        Call(Op.PREPARE_STORE, ("a",)), Call(Op.COMPLETE_STORE, ("a",), ticket=0),
        Call(Op.PREPARE_LOAD, ("a",))], 4),
    "FailureKeepsStore": (_keeps_stores, [Call(Op.PREPARE_STORE, ("a",))], 2),
}


def _failure_mutant(name: str) -> Model:
    return replace(SPEC, name=name, replaced={Op.FAIL_NODE: NODE_FAILURE_MUTANTS[name][0]})


@pytest.mark.parametrize("name", sorted(NODE_FAILURE_MUTANTS))
def test_each_node_failure_mutant_can_fail(name: str) -> None:
    """Each seeded fail_node differs from the spec's on a reachable state, keeping the
    block it says it keeps, and leaves a state that meets every invariant: what
    refutes it is the rule of D15, not a broken state."""
    transition, calls, _ = NODE_FAILURE_MUTANTS[name]
    state = initial_state(TINY.capacity, Policy.LRU)
    for call in calls:
        state, _ = apply(state, call)
    ours, _ = transition(state, Call(Op.FAIL_NODE), None)
    spec, _ = apply(state, Call(Op.FAIL_NODE))
    assert spec.blocks == frozenset()
    assert ours.blocks == state.blocks != frozenset()
    assert broken_invariants(ours) == ()


_UNFAILED: dict[Hashable, Shared] = {}
"""What the searches without the node's failure share, by family: the three mutants
replace fail_node alone, which no call of these searches makes, so each searches the
nodes of spec-lru by its calls (the first makes them, the others read them)."""


@pytest.mark.parametrize("name", sorted(NODE_FAILURE_MUTANTS))
def test_each_node_failure_mutant_is_refuted(name: str) -> None:
    """With the node's failure on, the checker refutes each seeded fail_node at TINY,
    by the comparison with the spec and by the laws alone (the comparison off), each
    with a shortest trace ending in the failure."""
    setup = Setup(_failure_mutant(name), Form.TICKET, Policy.LRU, node_failure=True)
    compared = explore(setup, TINY)
    alone = explore(laws_only(Check("x", "x", setup, "violated")).setup, TINY)
    length = NODE_FAILURE_MUTANTS[name][2]
    for result, prop in ((compared, "follows_the_spec"),
                         (alone, "node_failure_loses_every_block")):
        assert result.violation is not None, (name, prop)
        assert result.violation.prop == prop
        assert [str(a) for a in result.violation.trace][-1] == "fail_node()"
        assert len(result.violation.trace) == length
    unfailed = replace(setup, node_failure=False)
    family = family_of(unfailed, TINY)
    shared = _UNFAILED.setdefault(family, Shared(family))
    assert explore(unfailed, TINY, shared=shared).verdict == "holds"

