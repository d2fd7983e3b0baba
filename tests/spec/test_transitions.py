"""Unit tests, one group per operation of kvoffload.spec.transitions."""

from __future__ import annotations

import pytest

from kvoffload.spec import (
    ArcLists,
    BadCapacity,
    CacheState,
    ChoiceNotAllowed,
    Completion,
    CopyKind,
    Events,
    LoadPlan,
    LookupResult,
    LruOrder,
    MisuseError,
    NotEvictable,
    NotReadable,
    Phase,
    Policy,
    StorePlan,
    StoreRejected,
    UnmatchedCompleteLoad,
    check_invariants,
    complete_load,
    complete_store,
    evict_in_background,
    fail_node,
    initial_state,
    lookup,
    prepare_load,
    prepare_store,
    reset_cache,
    take_events,
    touch,
)


def ready(capacity: int, *keys: str, policy: Policy = Policy.LRU) -> CacheState:
    """A state with ``keys`` stored and READY, in order."""
    state, _ = prepare_store(initial_state(capacity, policy), keys)
    state, _ = complete_store(state, keys)
    check_invariants(state)
    return state


# --- initial_state ---


def test_initial_state_is_empty_and_valid() -> None:
    state = initial_state(3)
    check_invariants(state)
    assert state.free_slots() == (0, 1, 2)
    assert state.epoch == 0
    assert not state.blocks


@pytest.mark.parametrize("capacity", [0, -1])
def test_initial_state_rejects_no_slots(capacity: int) -> None:
    with pytest.raises(BadCapacity, match="at least one slot"):
        initial_state(capacity)


def test_states_are_hashable_and_canonical() -> None:
    one = ready(3, "a", "b")
    two = ready(3, "a", "b")
    assert one == two
    assert hash(one) == hash(two)
    assert len({one, two}) == 1


# --- lookup ---


def test_lookup_is_tri_state_and_pure() -> None:
    state, _ = prepare_store(ready(3, "a"), ["b"])
    for key, expected in [("a", LookupResult.HIT), ("b", LookupResult.PENDING),
                          ("c", LookupResult.MISS)]:
        after, result = lookup(state, key)
        assert result is expected
        assert after is state


def test_pr41795_store_in_flight_is_pending_then_hit() -> None:
    state, plan = prepare_store(initial_state(4), ["a"])
    assert isinstance(plan, StorePlan)
    assert lookup(state, "a")[1] is LookupResult.PENDING
    state, _ = complete_store(state, ["a"])
    assert lookup(state, "a")[1] is LookupResult.HIT


# --- prepare_load / complete_load ---


def test_prepare_load_pins_and_reports_slots() -> None:
    state = ready(3, "a", "b")
    state, plan = prepare_load(state, ["b", "a", "b"])
    assert plan == LoadPlan(("b", "a"), (1, 0), 0, 1)
    assert state.table["a"].loads == (1,)
    assert state.next_ticket == 2
    assert state.table["a"].readers == 1
    assert state.table["b"].readers == 1
    assert state.evictable() == frozenset()
    check_invariants(state)


@pytest.mark.parametrize("setup", ["absent", "storing"])
def test_prepare_load_of_unreadable_key_is_misuse_and_changes_nothing(setup: str) -> None:
    state = ready(3, "a")
    if setup == "storing":
        state, _ = prepare_store(state, ["x"])
    with pytest.raises(NotReadable) as caught:
        prepare_load(state, ["a", "x"])
    assert caught.value.code == "load-not-ready"
    assert caught.value.keys == ("x",)
    assert state.table["a"].readers == 0


def test_second_reader_then_last_reader_makes_block_evictable() -> None:
    state = ready(2, "a")
    state, _ = prepare_load(state, ["a"])
    state, _ = prepare_load(state, ["a"])
    state, done = complete_load(state, ["a"])
    assert done == Completion(applied=("a",))
    assert state.evictable() == frozenset()
    state, _ = complete_load(state, ["a"])
    assert state.evictable() == frozenset({"a"})
    check_invariants(state)


def test_unmatched_complete_load_is_misuse() -> None:
    state = ready(2, "a")
    with pytest.raises(UnmatchedCompleteLoad) as caught:
        complete_load(state, ["a"])
    assert caught.value.code == "unmatched-complete-load"
    assert isinstance(caught.value, ValueError)


def test_complete_load_ticket_form_ignores_a_ticket_that_names_no_running_load() -> None:
    state, plan = prepare_load(ready(2, "a"), ["a"])
    for ticket in (0, 99):  # the store's job (finished), a ticket never issued
        after, done = complete_load(state, ["a"], ticket=ticket)
        assert done == Completion(ignored=("a",))
        assert after == state
    state, done = complete_load(state, ["a"], ticket=plan.ticket)
    assert done == Completion(applied=("a",))
    after, done = complete_load(state, ["a"], ticket=plan.ticket)  # a second report
    assert done == Completion(ignored=("a",))
    assert after == state


def test_complete_load_forms_pick_their_job() -> None:
    state = ready(2, "a")
    state, first = prepare_load(state, ["a"])
    state, second = prepare_load(state, ["a"])
    named, _ = complete_load(state, ["a"], ticket=second.ticket)
    assert named.table["a"].loads == (first.ticket,)
    oldest, _ = complete_load(state, ["a"])  # vLLM's form: the oldest running load
    assert oldest.table["a"].loads == (second.ticket,)


def test_one_ticket_names_the_whole_plan() -> None:
    state, plan = prepare_store(initial_state(3), ["a", "b"])
    assert isinstance(plan, StorePlan)
    state, done = complete_store(state, ["a"], ticket=plan.ticket)
    assert done == Completion(applied=("a",))
    state, done = complete_store(state, ["b", "a"], ticket=plan.ticket)
    assert done == Completion(applied=("b",), ignored=("a",))
    state, load = prepare_load(state, ["a", "b"])
    state, done = complete_load(state, ["b", "a"], ticket=load.ticket)
    assert done == Completion(applied=("b", "a"))
    assert state.evictable() == frozenset("ab")


# --- touch ---


def test_touch_reorders_lru_first_key_most_recent() -> None:
    state = ready(3, "a", "b", "c")
    state, _ = touch(state, ["b", "a", "zzz"])
    assert state.recency.order == ("c", "a", "b")  # type: ignore[union-attr]  # an LRU state's recency


def test_touch_of_pinned_block_does_not_queue_it() -> None:
    state, _ = prepare_load(ready(2, "a", "b"), ["a"])
    state, _ = touch(state, ["a"])
    assert state.recency.order == ("b",)  # type: ignore[union-attr]  # an LRU state's recency
    check_invariants(state)


# --- prepare_store ---


def test_prepare_store_skips_present_keys_and_protects_them() -> None:
    state = ready(2, "a", "b")
    state, plan = prepare_store(state, ["a", "c"])
    assert plan == StorePlan(("c",), (1,), ("b",), 0, 1)
    assert state.phase("a") is Phase.READY


def test_prepare_store_rejection_is_atomic() -> None:
    state = ready(2, "a", "b")
    state, _ = prepare_load(state, ["a"])
    after, result = prepare_store(state, ["c", "d"])
    assert result == StoreRejected(needed=2, available=1)
    assert after == state


def test_prepare_store_rejects_only_when_unavoidable() -> None:
    state = ready(2, "a", "b")
    state, plan = prepare_store(state, ["c", "d"])
    assert isinstance(plan, StorePlan)
    assert set(plan.evicted) == {"a", "b"}


def test_prepare_store_never_evicts_storing_blocks() -> None:
    state, _ = prepare_store(initial_state(1), ["a"])
    after, result = prepare_store(state, ["b"])
    assert isinstance(result, StoreRejected)
    assert after == state


def test_duplicate_keys_take_one_slot() -> None:
    state, plan = prepare_store(initial_state(3), ["a", "a", "b", "a"])
    assert plan == StorePlan(("a", "b"), (0, 1), (), 0, 0)
    assert state.free_slots() == (2,)


def test_prepare_store_accepts_a_callers_allowed_choices() -> None:
    state = ready(3, "a", "b", "c")
    _, plan = prepare_store(state, ["d"], victims=["b"], slots=[1])
    assert plan == StorePlan(("d",), (1,), ("b",), 0, 1)


@pytest.mark.parametrize(("victims", "slots"), [
    (["d"], None),        # not evictable: named in the call
    (["a", "b"], None),   # more than needed
    ([], None),           # fewer than needed
    (None, [1]),          # slot still in use (the exact victim a frees slot 0)
    (None, [7]),          # out of range
])
def test_prepare_store_refuses_choices_outside_the_rules(
    victims: list[str] | None, slots: list[int] | None
) -> None:
    state = ready(3, "a", "b", "c")
    with pytest.raises(ChoiceNotAllowed) as caught:
        prepare_store(state, ["d"], victims=victims, slots=slots)
    assert caught.value.code == "choice-not-allowed"
    assert not isinstance(caught.value, MisuseError)  # its own family: the target's finding


# --- complete_store ---


def test_failed_store_returns_key_to_absent_and_frees_slot() -> None:
    state, _ = prepare_store(initial_state(1), ["a"])
    state, done = complete_store(state, ["a"], success=False)
    assert done == Completion(applied=("a",))
    assert state.phase("a") is Phase.ABSENT
    assert state.free_slots() == (0,)
    assert take_events(state)[1] == Events()


def test_complete_store_of_non_storing_key_is_ignored() -> None:
    state = ready(2, "a")
    after, done = complete_store(state, ["a", "zzz"], success=False)
    assert done == Completion(ignored=("a", "zzz"))
    assert after == state


def test_complete_store_ticket_form_ignores_a_ticket_that_names_no_running_store() -> None:
    state, plan = prepare_store(initial_state(1), ["a"])
    assert isinstance(plan, StorePlan)
    for ticket in (plan.ticket + 1, 5):  # not issued yet, never issued
        after, done = complete_store(state, ["a"], ticket=ticket)
        assert done == Completion(ignored=("a",))
        assert after == state


def test_every_accepted_plan_issues_a_fresh_ticket_even_across_a_reset() -> None:
    state = initial_state(1)
    tickets = []
    state, plan = prepare_store(state, ["a"])
    assert isinstance(plan, StorePlan)
    tickets.append(plan.ticket)
    state, rejected = prepare_store(state, ["b"])
    assert isinstance(rejected, StoreRejected)  # issues none
    state, plan = prepare_store(state, ["a"])  # present: an empty plan, still a job name
    assert plan == StorePlan((), (), (), 0, 1)
    tickets.append(plan.ticket)
    state, _ = reset_cache(state)
    state, plan = prepare_store(state, [])
    assert isinstance(plan, StorePlan)
    tickets.append(plan.ticket)
    assert tickets == [0, 1, 2]
    assert state.next_ticket == 3


# --- reset_cache ---


def test_reset_holds_slots_of_running_copies() -> None:
    state = ready(3, "a", "b")
    state, _ = prepare_load(state, ["a"])
    state, _ = prepare_load(state, ["a"])
    state, _ = prepare_store(state, ["c"])
    state, epoch = reset_cache(state)
    assert epoch == 1
    check_invariants(state)
    assert not state.blocks
    assert {(o.key, o.kind, o.tickets) for o in state.orphans} == {
        ("a", CopyKind.LOAD, (1, 2)), ("c", CopyKind.STORE, (3,))}
    assert state.free_slots() == (1,)
    state, done = complete_load(state, ["a"])  # vLLM's form: the oldest job, ticket 1
    assert done == Completion(released=("a",))
    assert {o.tickets for o in state.orphans} == {(2,), (3,)}
    state, done = complete_load(state, ["a"], ticket=1)
    assert done == Completion(ignored=("a",))
    state, _ = complete_load(state, ["a"], ticket=2)
    state, _ = complete_store(state, ["c"], ticket=3)
    assert state.free_slots() == (0, 1, 2)
    assert not state.in_flight()


def test_stale_complete_load_without_orphan_is_misuse_only_in_vllm_form() -> None:
    state, _ = reset_cache(ready(2, "a"))
    with pytest.raises(UnmatchedCompleteLoad):
        complete_load(state, ["a"])
    after, done = complete_load(state, ["a"], ticket=0)
    assert done == Completion(ignored=("a",))
    assert after == state


def test_safe_completion_ignores_stale_job_but_vllm_form_cannot() -> None:
    state, _ = prepare_store(initial_state(2), ["a"])
    state, _ = reset_cache(state)
    state, _ = prepare_store(state, ["a"])
    safe, done = complete_store(state, ["a"], ticket=0)
    assert done == Completion(released=("a",))
    assert safe.phase("a") is Phase.STORING
    unsafe, done = complete_store(state, ["a"])
    assert done == Completion(applied=("a",))
    assert unsafe.phase("a") is Phase.READY  # the hazard no-stale-completions excludes


# --- take_events ---


def test_events_are_net_changes_of_the_ready_set() -> None:
    state = ready(1, "a")
    state, events = take_events(state)
    assert events == Events(stored=frozenset({"a"}))
    state, _ = prepare_store(state, ["b"])
    state, _ = complete_store(state, ["b"])
    state, _ = prepare_store(state, ["a"])
    state, _ = complete_store(state, ["a"])
    state, events = take_events(state)
    assert events == Events()  # a removed and stored again, b stored and removed
    state, events = take_events(state)
    assert events == Events()


# --- evict_in_background (the environment's transition, D14) ---


def test_background_eviction_drops_a_ready_block_and_frees_its_slot() -> None:
    state, _ = take_events(ready(2, "a", "b"))
    after, out = evict_in_background(state, ["a", "a"])
    assert out is None
    assert after.phase("a") is Phase.ABSENT
    assert after.free_slots() == (0,)
    assert after.recency == LruOrder(("b",))
    assert after.next_ticket == state.next_ticket
    check_invariants(after)
    _, events = take_events(after)
    assert events == Events(stored=frozenset(), removed=frozenset({"a"}))


def test_background_eviction_makes_an_arc_ghost() -> None:
    state = ready(2, "a", "b", policy=Policy.ARC)
    after, _ = evict_in_background(state, ["b"])
    assert after.recency == ArcLists(2, t1=("a",), b1=("b",))
    check_invariants(after)


@pytest.mark.parametrize("setup", ["absent", "storing", "being read"])
def test_background_eviction_of_a_block_not_evictable_changes_nothing(setup: str) -> None:
    state = ready(3, "a")
    if setup == "storing":
        state, _ = prepare_store(state, ["x"])
    elif setup == "being read":
        state, _ = prepare_store(state, ["x"])
        state, _ = complete_store(state, ["x"])
        state, _ = prepare_load(state, ["x"])
    with pytest.raises(NotEvictable) as caught:
        evict_in_background(state, ["a", "x"])
    assert caught.value.code == "not-evictable"
    assert caught.value.keys == ("x",)
    assert state.phase("a") is Phase.READY


# --- fail_node (a node's failure, the fault a test injects, D15) ---


def test_a_node_failure_loses_every_block_in_every_phase() -> None:
    """READY (read or not) and STORING blocks all go; the copies running on them end
    with the node, so their slots are free at once and no orphan is kept."""
    state, _ = take_events(ready(4, "a", "b"))
    state, _ = prepare_load(state, ["b"])
    state, _ = prepare_store(state, ["c"])
    after, out = fail_node(state)
    assert out is None
    assert {after.phase(k) for k in "abc"} == {Phase.ABSENT}
    assert {lookup(after, k)[1] for k in "abc"} == {LookupResult.MISS}
    assert after.free_slots() == (0, 1, 2, 3)
    assert after.orphans == frozenset()
    assert (after.epoch, after.next_ticket) == (state.epoch, state.next_ticket)
    assert after.recency == LruOrder()
    check_invariants(after)
    _, events = take_events(after)
    assert events == Events(stored=frozenset(), removed=frozenset({"a", "b"}))


def test_completions_of_jobs_a_node_failure_ended_match_no_running_job() -> None:
    state = ready(2, "a")
    state, _ = prepare_load(state, ["a"])
    state, _ = prepare_store(state, ["b"])
    after, _ = fail_node(state)
    same, done = complete_store(after, ["b"])
    assert done == Completion(ignored=("b",))
    assert same.phase("b") is Phase.ABSENT
    with pytest.raises(UnmatchedCompleteLoad):
        complete_load(after, ["a"])


def test_a_node_failure_keeps_the_copies_a_reset_left_running() -> None:
    state, _ = prepare_store(initial_state(2), ["a"])
    state, _ = reset_cache(state)
    state, _ = prepare_store(state, ["b"])
    after, _ = fail_node(state)
    assert after.orphans == state.orphans
    assert after.free_slots() == (1,)
    check_invariants(after)
