"""Issue 10 A and B as properties: an environment that knows every job it started sends
completions of running jobs, of finished ones (duplicates, late reports) and of jobs a
reset left running. In the ticket form the spec needs no assumption; in vLLM's form it
is safe exactly when ``no-stale-completions`` holds back the stale ones."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvoffload.spec import (
    NO_STALE_COMPLETIONS,
    CacheState,
    Call,
    Completion,
    Key,
    LoadPlan,
    MisuseError,
    Op,
    Phase,
    Policy,
    StorePlan,
    Ticket,
    apply,
    check_invariants,
    initial_state,
)

KEYS = "abc"

# The strategies that depend on nothing a run holds, built once rather than on each of the
# thousands of draws (a new strategy is validated anew when first drawn from).
KINDS = st.sampled_from(["store", "load", "complete", "reset"])
KEY_SETS = st.lists(st.sampled_from(KEYS), max_size=2, unique=True)
ONE_IN_TEN = st.integers(0, 9)
COMPLETION_OPS = st.sampled_from([Op.COMPLETE_STORE, Op.COMPLETE_LOAD])
ANY_KEY = st.sampled_from(KEYS)
NEVER_ISSUED = st.integers(0, 3)
SUCCESSES = st.booleans()


@dataclass
class Job:
    """What the environment knows of one job: its kind, its keys' slots, which still run."""

    op: Op
    slots: dict[Key, int]
    running: set[Key] = field(default_factory=set)


def running_slots(jobs: dict[Ticket, Job]) -> set[int]:
    return {job.slots[k] for job in jobs.values() for k in job.running}


def check_safety(state: CacheState, jobs: dict[Ticket, Job]) -> None:
    """No READY block sits in a slot a running store writes; every running copy's slot is
    held, so no store can be given it."""
    check_invariants(state)
    writing = {job.slots[k] for job in jobs.values() if job.op is Op.COMPLETE_STORE
               for k in job.running}
    assert not {b.slot for b in state.blocks if b.phase is Phase.READY} & writing
    assert running_slots(jobs) <= state.used_slots()


def completion(data: st.DataObject, jobs: dict[Ticket, Job], state: CacheState,
               ticket_form: bool) -> tuple[Call, Ticket | None]:
    """A completion of a job the environment started (running or not), or of none."""
    if not jobs or data.draw(ONE_IN_TEN) == 0:
        op = data.draw(COMPLETION_OPS)
        key: Key = data.draw(ANY_KEY)
        ticket = state.next_ticket + data.draw(NEVER_ISSUED)  # never issued
        if ticket_form:
            return Call(op, (key,), ticket=ticket), None
        return Call(op, (key,), job=ticket), None  # a job nobody started: stale
    ticket = data.draw(st.sampled_from(sorted(jobs)))
    job = jobs[ticket]
    keys: tuple[Key, ...] = tuple(data.draw(st.lists(
        st.sampled_from(sorted(job.slots, key=str)), min_size=1, unique=True)))
    success = job.op is Op.COMPLETE_LOAD or data.draw(SUCCESSES)
    if ticket_form:
        return Call(job.op, keys, success=success, ticket=ticket), ticket
    return Call(job.op, keys, success=success, job=ticket), ticket


def run(data: st.DataObject, policy: Policy, ticket_form: bool, steps: int) -> None:
    state = initial_state(2, policy)
    jobs: dict[Ticket, Job] = {}
    for _ in range(steps):
        kind = data.draw(KINDS)
        if kind == "complete":
            call, ticket = completion(data, jobs, state, ticket_form)
            if not ticket_form and NO_STALE_COMPLETIONS.excludes(state, call):
                continue
            try:
                state, done = apply(state, call)
            except MisuseError:
                assert not ticket_form  # vLLM's form: an unmatched complete_load
                continue
            assert isinstance(done, Completion)
            job = jobs.get(ticket) if ticket is not None else None
            for key in call.keys:
                was_running = job is not None and key in job.running
                assert (key in done.ignored) is (not was_running), (call, done)
            if job is not None:
                job.running -= set(call.keys)
        elif kind == "reset":
            state, _ = apply(state, Call(Op.RESET_CACHE))
        else:
            op = Op.PREPARE_STORE if kind == "store" else Op.PREPARE_LOAD
            keys = tuple(data.draw(KEY_SETS))
            held = running_slots(jobs)
            with contextlib.suppress(MisuseError):
                state, plan = apply(state, Call(op, keys))
                if isinstance(plan, (StorePlan, LoadPlan)) and plan.keys:
                    if isinstance(plan, StorePlan):
                        assert not set(plan.slots) & held, "a running copy's slot reused"
                    done_op = Op.COMPLETE_STORE if op is Op.PREPARE_STORE else Op.COMPLETE_LOAD
                    jobs[plan.ticket] = Job(done_op, dict(zip(plan.keys, plan.slots,
                                                              strict=True)), set(plan.keys))
        check_safety(state, jobs)


DEFAULT_EXAMPLES, FULL_EXAMPLES = 20, 100
"""Random runs per test in the default tier, and in the wide tier's full-budget copies.
Within TINY's bounds (one reset, one reader) the model checking of proofs/ makes every
run: spec-lru and spec-arc (the ticket form, no assumption) and
spec-vllm-form+no-stale-completions hold (tests/proofs/test_explorer.py)."""


@settings(max_examples=DEFAULT_EXAMPLES, deadline=None)
@given(data=st.data(), policy=st.sampled_from(list(Policy)))
def test_the_ticket_form_is_safe_with_no_assumption(data: st.DataObject, policy: Policy) -> None:
    run(data, policy, ticket_form=True, steps=30)


@settings(max_examples=DEFAULT_EXAMPLES, deadline=None)
@given(data=st.data(), policy=st.sampled_from(list(Policy)))
def test_vllm_form_is_safe_under_no_stale_completions(data: st.DataObject, policy: Policy) -> None:
    run(data, policy, ticket_form=False, steps=30)


@pytest.mark.wide
@settings(max_examples=FULL_EXAMPLES, deadline=None)
@given(data=st.data(), policy=st.sampled_from(list(Policy)))
def test_the_ticket_form_is_safe_with_no_assumption_full_budget(
    data: st.DataObject, policy: Policy
) -> None:
    run(data, policy, ticket_form=True, steps=30)


@pytest.mark.wide
@settings(max_examples=FULL_EXAMPLES, deadline=None)
@given(data=st.data(), policy=st.sampled_from(list(Policy)))
def test_vllm_form_is_safe_under_no_stale_completions_full_budget(
    data: st.DataObject, policy: Policy
) -> None:
    run(data, policy, ticket_form=False, steps=30)
