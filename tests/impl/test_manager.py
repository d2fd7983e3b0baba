"""Unit tests of ``kvoffload.impl.manager``: construction, each operation, atomic misuse."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable, Container, Sequence

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from kvoffload.impl import OffloadManager, UnknownPolicy, policy_of
from kvoffload.impl.lru import LruEviction
from kvoffload.spec import (
    BadCapacity,
    Completion,
    Events,
    Key,
    LoadPlan,
    LookupResult,
    MisuseError,
    NotReadable,
    Policy,
    StorePlan,
    StoreRejected,
    UnmatchedCompleteLoad,
)


def ready(capacity: int, *keys: str, policy: str = "lru") -> OffloadManager:
    manager = OffloadManager(capacity, policy=policy)
    manager.prepare_store(keys)
    manager.complete_store(keys)
    manager.check()
    return manager


@pytest.mark.parametrize("capacity", [0, -3, 1.5, True, "4"])
def test_capacity_must_be_a_positive_int(capacity: object) -> None:
    with pytest.raises(BadCapacity, match="at least one"):
        OffloadManager(capacity)  # type: ignore[arg-type]  # the wrong type is the test


@pytest.mark.parametrize(("given", "policy"), [("lru", Policy.LRU), ("arc", Policy.ARC),
                                               (Policy.ARC, Policy.ARC)])
def test_policy_by_name_or_enum(given: str | Policy, policy: Policy) -> None:
    assert policy_of(given) is policy
    assert OffloadManager(2, policy=given).policy is policy


@pytest.mark.parametrize("policy", ["fifo", "LRU ", 3])
def test_unknown_policy_is_a_misuse_error(policy: object) -> None:
    with pytest.raises(UnknownPolicy) as raised:
        OffloadManager(2, policy=policy)  # type: ignore[arg-type]  # the wrong type is the test
    assert isinstance(raised.value, MisuseError)
    assert raised.value.code == "unknown-policy"


def test_capacity_is_the_first_argument_and_lru_the_default() -> None:
    manager = OffloadManager(3)
    assert (manager.capacity, manager.policy, manager.epoch) == (3, Policy.LRU, 0)


def test_lookup_is_tristate_and_pure() -> None:
    manager = OffloadManager(2)
    manager.prepare_store(["a"])
    before = manager.view()
    assert [manager.lookup(k) for k in "ab"] == [LookupResult.PENDING, LookupResult.MISS]
    manager.complete_store(["a"])
    assert manager.lookup("a") is LookupResult.HIT
    assert manager.view() != before  # completion changed it; lookup alone did not:
    after = manager.view()
    manager.lookup("a")
    assert manager.view() == after


def test_prepare_store_dedupes_and_skips_present_keys() -> None:
    manager = ready(4, "a")
    manager.prepare_store(["b"])
    plan = manager.prepare_store(["a", "c", "b", "c", "d"])
    assert plan == StorePlan(("c", "d"), (2, 3), (), 0, 2)
    manager.check()


def test_prepare_store_of_nothing_new_is_an_empty_plan() -> None:
    manager = ready(1, "a")
    assert manager.prepare_store(["a", "a"]) == StorePlan((), (), (), 0, 1)
    assert manager.prepare_store([]) == StorePlan((), (), (), 0, 2)  # a plan: a fresh ticket


def test_rejection_counts_only_evictable_blocks_outside_the_call() -> None:
    manager = ready(3, "a", "b", "c")
    manager.prepare_load(["a"])
    before = manager.view()
    # needs 2 slots; b is evictable but named in the call, so only c can go
    assert manager.prepare_store(["b", "x", "y"]) == StoreRejected(needed=2, available=1)
    assert manager.view() == before
    assert manager.prepare_store(["x"]) == StorePlan(("x",), (1,), ("b",), 0, 2)


def test_eviction_takes_exactly_the_missing_slots() -> None:
    manager = ready(3, "a", "b")
    plan = manager.prepare_store(["c", "d"])
    assert isinstance(plan, StorePlan)
    assert plan.evicted == ("a",)
    assert plan.slots == (2, 0)


def test_failed_store_frees_the_slot_and_leaves_no_event() -> None:
    manager = OffloadManager(1)
    manager.prepare_store(["a"])
    assert manager.complete_store(["a"], success=False) == Completion(applied=("a",))
    assert manager.lookup("a") is LookupResult.MISS
    assert manager.take_events() == Events()
    assert manager.prepare_store(["b"]) == StorePlan(("b",), (0,), (), 0, 1)


def test_complete_store_of_a_key_not_storing_is_ignored() -> None:
    manager = ready(2, "a")
    assert manager.complete_store(["a", "z"]) == Completion(ignored=("a", "z"))


def test_prepare_load_counts_readers_once_per_call() -> None:
    manager = ready(2, "a", "b")
    assert manager.prepare_load(["b", "a", "b"]) == LoadPlan(("b", "a"), (1, 0), 0, 1)
    assert manager.prepare_load(["a"]) == LoadPlan(("a",), (0,), 0, 2)
    assert manager.complete_load(["a", "b"]) == Completion(applied=("a", "b"))
    # a still has one reader, so only b can be evicted
    manager.check()
    plan = manager.prepare_store(["x"])
    assert isinstance(plan, StorePlan)
    assert plan.evicted == ("b",)


def test_a_key_named_twice_in_prepare_load_is_pinned_once_in_lru_order() -> None:
    # LRU pins a call's keys without deduplicating them first; a repeat is caught midway.
    manager = ready(4, "a", "b", "c", "d")
    assert manager.prepare_load(["b", "c", "b", "d"]) == LoadPlan(("b", "c", "d"), (1, 2, 3), 0, 1)
    manager.check()
    assert manager.pinned_slots == 3
    assert manager.complete_load(["d", "b"]) == Completion(applied=("d", "b"))
    with pytest.raises(UnmatchedCompleteLoad):  # b had one reader, not two
        manager.complete_load(["b"])
    assert manager.complete_load(["c"]) == Completion(applied=("c",))
    manager.check()
    plan = manager.prepare_store(["x", "y", "z"])  # least recent first: a, then d, b
    assert isinstance(plan, StorePlan)
    assert plan.evicted == ("a", "d", "b")


def test_a_key_named_twice_in_complete_store_is_stored_once() -> None:
    manager = OffloadManager(3)
    manager.prepare_store(["a", "b"])
    assert manager.complete_store(["a", "b", "a"]) == Completion(applied=("a", "b"))
    manager.check()
    assert manager.lookup("a") is manager.lookup("b") is LookupResult.HIT
    assert manager.take_events() == Events(stored=frozenset("ab"))


@pytest.mark.parametrize("call", [["a", "b", "a"], ["a", "a", "b"]])
def test_a_key_named_twice_in_complete_load_finishes_one_load(call: list[str]) -> None:
    # LRU finishes a call's loads without deduplicating first; a repeat is caught midway.
    manager = ready(3, "a", "b", "c")
    manager.prepare_load(["a", "b"])
    assert manager.complete_load(call) == Completion(applied=("a", "b"))
    manager.check()
    assert manager.pinned_slots == 0
    plan = manager.prepare_store(["x", "y", "z"])  # c, then a and b in the call's order
    assert isinstance(plan, StorePlan)
    assert plan.evicted == ("c", "a", "b")


def test_a_key_read_twice_and_named_twice_in_complete_load_loses_one_reader() -> None:
    manager = ready(2, "a", "b")
    manager.prepare_load(["a"])
    manager.prepare_load(["a", "b"])
    assert manager.complete_load(["a", "b", "a"]) == Completion(applied=("a", "b"))
    manager.check()
    assert manager.pinned_slots == 1  # a's later load still runs
    assert manager.complete_load(["a"]) == Completion(applied=("a",))
    with pytest.raises(UnmatchedCompleteLoad):
        manager.complete_load(["a"])


def test_misuse_is_typed_and_changes_nothing() -> None:
    manager = ready(3, "a")
    manager.prepare_store(["b"])
    before = manager.view()
    with pytest.raises(NotReadable) as not_readable:
        manager.prepare_load(["a", "b", "z"])
    assert not_readable.value.keys == ("b", "z")
    with pytest.raises(UnmatchedCompleteLoad):
        manager.complete_load(["a"])
    assert manager.view() == before


def test_a_ticket_that_names_no_running_job_is_ignored() -> None:
    manager = ready(3, "a")
    manager.prepare_store(["b"])  # ticket 1
    before = manager.view()
    assert manager.complete_store(["b"], ticket=7) == Completion(ignored=("b",))
    assert manager.complete_store(["b"], ticket=-1) == Completion(ignored=("b",))
    assert manager.complete_load(["a"], ticket=1) == Completion(ignored=("a",))
    assert manager.view() == before


def test_partly_unmatched_complete_load_releases_nobody() -> None:
    manager = ready(2, "a", "b")
    manager.prepare_load(["a"])
    before = manager.view()
    with pytest.raises(UnmatchedCompleteLoad) as raised:
        manager.complete_load(["a", "b"])
    assert raised.value.keys == ("b",)
    assert manager.view() == before


def test_reset_holds_slots_of_running_copies_until_they_complete() -> None:
    manager = ready(3, "a")
    manager.prepare_load(["a"])
    manager.prepare_load(["a"])
    manager.prepare_store(["b"])
    assert manager.reset_cache() == 1
    assert [manager.lookup(k) for k in "ab"] == [LookupResult.MISS] * 2
    # slots 0 (a, two readers) and 1 (b, store) are held; one slot is free
    assert manager.prepare_store(["x", "y"]) == StoreRejected(needed=2, available=1)
    assert manager.complete_load(["a"]) == Completion(released=("a",))
    assert manager.complete_store(["b"], ticket=3) == Completion(released=("b",))
    assert manager.prepare_store(["x", "y"]) == StorePlan(("x", "y"), (1, 2), (), 1, 4)
    assert manager.complete_load(["a"], ticket=2) == Completion(released=("a",))
    assert manager.prepare_store(["z"]) == StorePlan(("z",), (0,), (), 1, 5)
    with pytest.raises(UnmatchedCompleteLoad):
        manager.complete_load(["a"])
    manager.check()


def test_vllm_form_completes_the_current_block_before_an_orphan() -> None:
    manager = OffloadManager(2)
    manager.prepare_store(["a"])
    manager.reset_cache()
    manager.prepare_store(["a"])
    assert manager.complete_store(["a"]) == Completion(applied=("a",))
    assert manager.complete_store(["a"]) == Completion(released=("a",))
    assert manager.complete_store(["a"]) == Completion(ignored=("a",))
    manager.check()


def test_ticket_form_names_the_job() -> None:
    manager = OffloadManager(2)
    old = manager.prepare_store(["a"])
    manager.reset_cache()
    new = manager.prepare_store(["a"])
    assert isinstance(old, StorePlan)
    assert isinstance(new, StorePlan)
    assert (old.ticket, new.ticket) == (0, 1)
    assert manager.complete_store(["a"], ticket=new.ticket) == Completion(applied=("a",))
    assert manager.complete_store(["a"], success=False, ticket=old.ticket) == Completion(
        released=("a",))
    assert manager.lookup("a") is LookupResult.HIT
    assert manager.complete_store(["a"], ticket=old.ticket) == Completion(ignored=("a",))
    manager.check()


def test_tickets_are_fresh_across_resets_and_rejections() -> None:
    manager = OffloadManager(1)
    first = manager.prepare_store(["a"])
    assert isinstance(first, StorePlan)
    assert first.ticket == 0
    assert isinstance(manager.prepare_store(["b"]), StoreRejected)  # issues none
    manager.reset_cache()
    again = manager.prepare_store(["c"])
    assert isinstance(again, StoreRejected)  # slot 0 is still held by a's store
    manager.complete_store(["a"], ticket=0)
    plan = manager.prepare_store(["c"])
    assert isinstance(plan, StorePlan)
    assert plan.ticket == 1
    assert manager.view().next_ticket == 2


def test_events_are_the_net_change_of_the_ready_set() -> None:
    manager = OffloadManager(2)
    manager.prepare_store(["a", "b"])
    manager.complete_store(["a", "b"])
    assert manager.take_events() == Events(stored=frozenset("ab"))
    manager.prepare_store(["c"])  # evicts a
    manager.complete_store(["c"])
    manager.prepare_store(["a"])  # evicts b
    manager.complete_store(["a"])  # a is back: no net change for a
    assert manager.take_events() == Events(stored=frozenset("c"), removed=frozenset("b"))
    manager.reset_cache()
    assert manager.take_events() == Events(removed=frozenset("ac"))
    assert manager.take_events() == Events()


def test_events_survive_a_fold_between_drains() -> None:
    # Regression: a long event log is folded into sets; take_events once reported
    # nothing when the fold had left the log empty.
    manager = OffloadManager(100)
    keys = [f"k{n}" for n in range(70)]
    for key in keys:
        manager.prepare_store([key])
        manager.complete_store([key])
    manager.prepare_store(["k0"])  # present already: nothing new, but the long log folds
    assert manager.take_events() == Events(stored=frozenset(keys))
    assert manager.take_events() == Events()


def test_view_and_check_leave_the_events_to_come_as_they_were() -> None:
    manager = OffloadManager(2)
    manager.prepare_store(["a", "b"])
    manager.complete_store(["a", "b"])
    manager.take_events()
    manager.prepare_store(["c"])  # evicts a
    manager.complete_store(["c"])
    before = manager.view()
    manager.check()
    assert manager.view() == before
    assert (before.stored, before.removed) == (frozenset("c"), frozenset("a"))
    assert manager.take_events() == Events(stored=frozenset("c"), removed=frozenset("a"))


def test_a_block_that_leaves_and_comes_back_between_drains_is_no_news() -> None:
    manager = OffloadManager(1)
    manager.prepare_store(["a"])
    manager.complete_store(["a"])
    assert manager.take_events() == Events(stored=frozenset("a"))
    manager.prepare_store(["b"])  # evicts a
    manager.complete_store(["b"], success=False)
    manager.prepare_store(["a"])
    manager.complete_store(["a"])  # a left and came back: two changes, no net change
    assert manager.take_events() == Events()
    manager.prepare_store(["b"])  # evicts a
    manager.complete_store(["b"])
    manager.prepare_store(["c"])  # evicts b, never reported: no news of b at all
    assert manager.take_events() == Events(removed=frozenset("a"))


def test_a_block_that_comes_and_goes_between_drains_is_no_news() -> None:
    manager = OffloadManager(2)
    manager.prepare_store(["a", "b"])
    manager.complete_store(["a"])
    assert manager.take_events() == Events(stored=frozenset("a"))
    manager.complete_store(["b"])  # b READY ...
    manager.touch(["a"])
    manager.prepare_store(["c"])  # ... and evicted again before the next drain
    assert manager.take_events() == Events()
    manager.complete_store(["c"])
    manager.prepare_store(["d"])  # evicts a: one eviction, one store completion
    assert manager.take_events() == Events(stored=frozenset("c"), removed=frozenset("a"))


def test_a_plans_own_keys_given_back_report_the_same_events_as_a_copy() -> None:
    # complete_store given the store plan's own tuple logs the key set prepare_store
    # built for it; every path of take_events (one entry, two, the general one, the
    # fold of a reset) must report what the same calls with a copy of the keys do.
    own, copy = OffloadManager(4), OffloadManager(4)

    def store(keys: tuple[str, ...]) -> None:
        plans = own.prepare_store(keys), copy.prepare_store(keys)
        assert plans[0] == plans[1]
        if isinstance(plans[0], StorePlan) and isinstance(plans[1], StorePlan):
            own.complete_store(plans[0].keys)
            copy.complete_store(list(plans[1].keys))

    def drained() -> Events:
        assert own.view() == copy.view()
        events = own.take_events()
        assert events == copy.take_events()
        return events

    store(("a", "b"))  # one log entry
    assert drained() == Events(stored=frozenset("ab"))
    store(("c", "d", "e"))  # evicts a: two entries
    assert drained() == Events(stored=frozenset("cde"), removed=frozenset("a"))
    store(("a", "f"))  # evicts b, c
    store(("g", "h"))  # evicts d, e: four entries, the general path
    assert drained() == Events(stored=frozenset("afgh"), removed=frozenset("bcde"))
    store(("b", "c"))  # evicts a, f ...
    store(("a", "f"))  # ... which come back: no news of them
    assert drained() == Events(stored=frozenset("bc"), removed=frozenset("gh"))
    store(("x", "y"))
    own.reset_cache()  # folds the log, sets and all
    copy.reset_cache()
    assert drained() == Events(removed=frozenset("afbc"))
    own.check()


@pytest.mark.parametrize("form", [tuple, list, "plan"])
def test_one_evicting_store_drained_reports_its_keys_whatever_form_they_come_back_in(
        form: object) -> None:
    # take_events recognises the log of one evicting store and its completion by
    # equality with the entries prepare_store made (one key or several, the plan's own
    # tuple, a copy, a list); each must report what the general path would.
    manager = OffloadManager(3)

    def store(keys: tuple[str, ...]) -> None:
        plan = manager.prepare_store(keys)
        assert isinstance(plan, StorePlan)
        manager.complete_store(plan.keys if form == "plan" else form(keys))  # type: ignore[operator]  # tuple or list

    store(("a", "b", "c"))
    assert manager.take_events() == Events(stored=frozenset("abc"))
    store(("d",))  # evicts a
    assert manager.take_events() == Events(stored=frozenset("d"), removed=frozenset("a"))
    store(("e", "f"))  # evicts b, c
    assert manager.take_events() == Events(stored=frozenset("ef"), removed=frozenset("bc"))
    manager.prepare_load(["e"])
    store(("e", "a"))  # e pinned and named: only a is new, evicting d
    assert manager.take_events() == Events(stored=frozenset("a"), removed=frozenset("d"))
    store(("d",))  # evicts f (e is still pinned)
    manager.complete_load(["e"])
    assert manager.take_events() == Events(stored=frozenset("d"), removed=frozenset("f"))
    manager.check()


def _churn_past_the_fold(manager: OffloadManager, keep: list[str]) -> None:
    """64 changes of the READY set in the tier's one free slot, ``keep`` used each time
    so that it stays: the next ``prepare_store`` folds the log."""
    for n in range(32):
        manager.prepare_store([f"d{n}"])
        manager.complete_store([f"d{n}"])
        manager.touch(keep)
        manager.prepare_store([f"e{n}"])  # evicts d{n}
        manager.complete_store([f"e{n}"], success=False)


def test_a_scheduler_steps_news_after_a_fold_keeps_the_folded_removals() -> None:
    """Mutation sweep (7 December, manager.py:4211.0): take_events' shortcut for a
    scheduler step's log (one evicting store and its completion) must not skip what a
    fold set aside: reached after more than 64 changes without a drain, which neither
    ``kvoffload check`` nor these tests made. Here the fold holds ``a``'s removal."""
    manager = ready(2, "a", "b")
    manager.take_events()
    manager.prepare_store(["c"])  # evicts a
    manager.complete_store(["c"], success=False)
    _churn_past_the_fold(manager, ["b"])
    manager.prepare_store(["s"])  # the fold: nothing stored, a removed
    manager.prepare_store(["n"])  # evicts b: the log is a scheduler step's
    manager.complete_store(["n"])
    assert manager.take_events() == Events(stored=frozenset({"n"}),
                                           removed=frozenset({"a", "b"}))
    assert manager.take_events() == Events()


def test_a_scheduler_steps_news_after_a_fold_keeps_the_folded_stores() -> None:
    """The same with a fold that holds a store (manager.py:4207.0): ``x`` came and
    left since the drain, which is no news."""
    manager = ready(3, "b")
    manager.take_events()
    manager.prepare_store(["x"])
    manager.complete_store(["x"])
    _churn_past_the_fold(manager, ["b", "x"])
    manager.prepare_store(["s"])  # the fold: x stored, nothing removed
    manager.prepare_store(["n"])  # evicts x, the least recent
    manager.complete_store(["n"])
    assert manager.take_events() == Events(stored=frozenset({"n"}))
    assert manager.take_events() == Events()


def test_events_stay_right_and_bounded_when_nobody_drains_them() -> None:
    manager = OffloadManager(4)
    for n in range(1_000):
        keys = [f"k{n}"]
        manager.prepare_store(keys)
        manager.complete_store(keys)
    assert len(manager._log or ()) <= 66  # folded as it grows (a private detail)
    stored = frozenset(f"k{n}" for n in range(996, 1_000))
    assert manager.take_events() == Events(stored=stored)


def test_a_store_ticket_follows_its_slot_across_a_reset_that_held_slots() -> None:
    manager = OffloadManager(2)
    held = manager.prepare_store(["a"])
    assert isinstance(held, StorePlan)
    manager.reset_cache()  # a's copy keeps running in its slot
    plan = manager.prepare_store(["b"])
    assert isinstance(plan, StorePlan)
    assert plan.slots != held.slots
    assert manager.complete_store(["b"], ticket=held.ticket) == Completion(ignored=("b",))
    assert manager.complete_store(["b"], ticket=plan.ticket) == Completion(applied=("b",))
    assert manager.complete_store(["a"], ticket=held.ticket) == Completion(released=("a",))
    manager.check()


@pytest.mark.parametrize("policy", ["lru", "arc"])
def test_without_net_events_the_same_calls_do_the_same_and_report_nothing(policy: str) -> None:
    def run(manager: OffloadManager) -> tuple[list[object], list[Events]]:
        outputs: list[object] = []
        for keys in (["a", "b"], ["c"], ["a"]):  # c evicts a, a evicts b
            outputs.append(manager.prepare_store(keys))
            outputs.append(manager.complete_store(keys))
        drained = [manager.take_events()]
        outputs.append(manager.prepare_load(["c"]))
        outputs.append(manager.prepare_store(["d"]))  # evicts a
        outputs.append(manager.complete_store(["d"], success=False))
        outputs.append(manager.reset_cache())
        manager.check()
        return outputs, [*drained, manager.take_events()]

    with_events, without = OffloadManager(2, policy), OffloadManager(2, policy, net_events=False)
    assert (with_events.net_events, without.net_events) == (True, False)
    (ours, events), (theirs, none) = run(with_events), run(without)
    assert ours == theirs
    assert events == [Events(stored=frozenset("ac")), Events(removed=frozenset("ac"))]
    assert none == [Events(), Events()]
    view = without.view()
    assert (view.stored, view.removed) == (frozenset(), frozenset())


def test_pinned_slots_counts_storing_blocks_and_blocks_being_read() -> None:
    manager = ready(4, "a", "b")
    manager.prepare_store(["c"])
    manager.prepare_load(["a"])
    manager.prepare_load(["a"])  # a second reader pins no second slot
    assert manager.pinned_slots == 2
    manager.complete_load(["a"])
    manager.complete_store(["c"])
    assert manager.pinned_slots == 1
    manager.reset_cache()  # the load a reset left running is not this epoch's
    assert manager.pinned_slots == 0


def test_check_detects_corruption() -> None:
    manager = ready(2, "a")
    manager._free.append(0)  # a slot both held and free
    with pytest.raises(Exception, match="no_shared_slots"):
        manager.check()


def test_errors_survive_python_dash_o() -> None:
    script = textwrap.dedent("""
        from kvoffload.impl import OffloadManager
        from kvoffload.spec import NotReadable, UnmatchedCompleteLoad
        m = OffloadManager(2)
        m.prepare_store(["a"])
        for call, error in [(lambda: m.prepare_load(["a"]), NotReadable),
                            (lambda: m.complete_load(["a"]), UnmatchedCompleteLoad),
                            (lambda: m.complete_load(["b", "a"]), UnmatchedCompleteLoad)]:
            try:
                call()
            except error:
                continue
            raise SystemExit(f"no {error.__name__} under -O")
        print("raised", __debug__)
    """)
    done = subprocess.run([sys.executable, "-O", "-c", script], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr + done.stdout
    assert done.stdout.strip() == "raised False"


def test_lookup_function_answers_in_the_callers_values_across_resets() -> None:
    manager = OffloadManager(2)
    lookup = manager.lookup_function("hit", "pending", "miss")
    manager.prepare_store(["a", "b"])
    manager.complete_store(["a"])
    assert [lookup(k) for k in "abc"] == ["hit", "pending", "miss"]
    assert lookup("a", object()) == "hit"  # vLLM's req_context is accepted
    manager.reset_cache()
    assert [lookup(k) for k in "ab"] == ["miss", "miss"]
    manager.prepare_store(["a"])
    assert lookup("a") == "pending"


def test_forget_running_copies_frees_the_slots_a_reset_held() -> None:
    manager = ready(2, "a")
    manager.prepare_load(["a"])
    manager.prepare_store(["b"])
    manager.reset_cache()
    assert manager.prepare_store(["x"]) == StoreRejected(needed=1, available=0)
    assert sorted(manager.forget_running_copies()) == [0, 1]
    manager.check()
    assert manager.forget_running_copies() == ()
    assert manager.complete_store(["b"]) == Completion(ignored=("b",))
    with pytest.raises(UnmatchedCompleteLoad):
        manager.complete_load(["a"])
    plan = manager.prepare_store(["x", "y"])
    assert isinstance(plan, StorePlan)
    assert sorted(plan.slots) == [0, 1]


def test_an_order_assigned_later_is_told_everything_through_its_methods() -> None:
    class MostRecentFirst(LruEviction):
        def stored(self, keys: Sequence[Key], free: int, protected: Container[Key]
                   ) -> list[Key]:
            count = max(len(keys) - free, 0)
            victims = [k for k in reversed(self.queue) if k not in protected][:count]
            for key in victims:
                del self.queue[key]
            return victims

    manager = OffloadManager(2)
    manager._order = MostRecentFirst()  # as conformance/selftest/mutants.py does
    for key in "ab":
        manager.complete_store([key], ticket=manager.prepare_store([key]).ticket)  # type: ignore[union-attr]  # no rejection with a free slot
    manager.complete_load(["a"], ticket=manager.prepare_load(["a"]).ticket)
    plan = manager.prepare_store(["c"])
    assert isinstance(plan, StorePlan)
    assert plan.evicted == ("a",)  # the most recently used, as the swapped-in order says
    manager.check()


# --- whole-dict completions: the plan's own keys take a short path -------------------

_OPS = st.lists(
    st.tuples(st.sampled_from(["store", "load", *["complete_store", "complete_load"] * 2,
                               "touch", "events", "reset", *["begin"] * 2, *["request"] * 6]),
              st.builds(lambda shared, rest: [*"abc"[:shared], *rest],  # common prefixes
                        st.integers(min_value=0, max_value=3),
                        st.lists(st.sampled_from("abcdef"), max_size=3)),
              st.integers(min_value=-2, max_value=2),
              st.sampled_from(["whole", "equal", "ticket", "other ticket", "part", "reversed",
                               "failed", "single", "reset"])),
    max_size=40)
"""Calls of the test below: (operation, keys, which running plan (-1: the newest),
how a completion names the plan's keys)."""


def _outcome(call: Callable[..., object], *arguments: object) -> object:
    """``call(*arguments)``'s answer, or its error's type, message and keys (so two
    managers can be compared on misuse too)."""
    try:
        return call(*arguments)
    except MisuseError as error:
        return (type(error), str(error), getattr(error, "keys", None))


@pytest.mark.parametrize("policy", ["lru", "arc"])
@settings(max_examples=100, deadline=None)
@given(capacity=st.integers(min_value=1, max_value=5), ops=_OPS)
def test_whole_dict_completions_do_what_the_general_path_does(
        policy: str, capacity: int, ops: list[tuple[str, list[str], int, str]]) -> None:
    """The default tier's budget, an inner loop (about 0.5 s of CPU a policy); the wide
    tier's copy below makes 300 examples at every CI run."""
    _whole_dict_like_the_general_path(policy, capacity, ops)


@pytest.mark.wide
@pytest.mark.parametrize("policy", ["lru", "arc"])
@settings(max_examples=300, deadline=None)
@given(capacity=st.integers(min_value=1, max_value=5), ops=_OPS)
def test_whole_dict_completions_do_what_the_general_path_does_at_300_examples(
        policy: str, capacity: int, ops: list[tuple[str, list[str], int, str]]) -> None:
    _whole_dict_like_the_general_path(policy, capacity, ops)


def _whole_dict_like_the_general_path(
        policy: str, capacity: int, ops: list[tuple[str, list[str], int, str]]) -> None:
    # complete_store / complete_load given the plan's own key tuple (or an equal tuple)
    # while that plan's keys are all of the STORING / read blocks complete the whole
    # dict at once; a list copy of the keys never takes that path. The same calls with
    # each form must give the same answers, errors, events, state and LRU order.
    fast, general = OffloadManager(capacity, policy), OffloadManager(capacity, policy)
    whole = {"complete_store": 0, "complete_load": 0}
    step = _both(fast, general, whole)
    for op, keys, index, form in ops:
        if op not in ("request", "begin"):
            step(op, keys, index, form)
            continue
        # A request as kvoffload traffic serves it with zero latency: load the leading
        # hits, store the rest, complete both plans, touch the keys last first
        # (``begin``: only the plans, left running). Some forms first disturb the state
        # the short path relies on, then complete the whole plan.
        hits = 0
        while hits < len(keys) and fast.lookup(keys[hits]) is LookupResult.HIT:
            hits += 1
        if hits:
            step("load", keys[:hits], 0, form)
        step("store", keys[hits:], 0, form)
        if op == "begin":
            continue
        if form == "reset":
            step("reset", [], 0, form)
        for kind in ["complete_load"] * bool(hits) + ["complete_store"]:
            newest = -1
            if form in ("part", "other ticket", "single"):
                step(kind, [], newest, "other ticket" if form == "other ticket" else "part")
                if form == "single":  # one more reader of another block: a one-key plan
                    step("load", [k for k in "abcdef" if k not in keys][index:][:1], 0, form)
                    newest = -2 if kind == "complete_load" else -1
            step(kind, [], newest, form if form in ("whole", "equal", "ticket") else "whole")
        step("touch", keys[::-1], 0, form)
    assert fast.take_events() == general.take_events()
    assert fast.view() == general.view()
    for op, count in whole.items():
        event(f"{op} naming all running keys: {min(count, 3)}")


def _both(fast: OffloadManager, general: OffloadManager, whole: dict[str, int]
          ) -> Callable[[str, list[str], int, str], None]:
    """One step of the test above on both managers: ``fast`` gets tuples (the plans' own
    keys when completing), ``general`` lists; their answers, errors, events and views
    must agree after every step. ``whole`` counts the completions that named all the
    running stores' / loads' keys (where the short path may be taken)."""
    stores: list[StorePlan] = []
    loads: list[LoadPlan] = []

    def step(op: str, keys: list[str], index: int, form: str) -> None:
        if op == "store":
            answer = fast.prepare_store(tuple(keys))
            assert answer == general.prepare_store(list(keys))
            if isinstance(answer, StorePlan):
                stores.append(answer)
        elif op == "load":  # index 2: all keys named (misuse too), else the READY ones
            readable = keys if index == 2 else [
                k for k in keys if fast.lookup(k) is LookupResult.HIT]
            plan = _outcome(fast.prepare_load, tuple(readable))
            assert plan == _outcome(general.prepare_load, list(readable))
            if isinstance(plan, LoadPlan):
                loads.append(plan)
        elif op in whole and (stores if op == "complete_store" else loads):
            pending: list[StorePlan] | list[LoadPlan] = (
                stores if op == "complete_store" else loads)
            chosen = pending[index % len(pending)]
            own: tuple[Key, ...] = chosen.keys
            ticket = {"ticket": chosen.ticket, "other ticket": chosen.ticket - 1}.get(form)
            if form == "equal":
                own = tuple(list(own))  # equal, not the plan's own tuple
            elif form == "part":
                own = own[:-1]
            elif form == "reversed":
                own = own[::-1]
            if form in ("whole", "equal", "ticket"):
                del pending[index % len(pending)]
            view = fast.view()
            running = view.storing if op == "complete_store" else view.readers
            whole[op] += len(running) == len(own) > 0 and {k for k, _ in running} == set(own)
            if op == "complete_store":
                success = form != "failed"
                assert (_outcome(fast.complete_store, own, success, ticket)
                        == _outcome(general.complete_store, list(own), success, ticket))
            else:
                assert (_outcome(fast.complete_load, own, ticket)
                        == _outcome(general.complete_load, list(own), ticket))
        elif op == "touch":
            fast.touch(tuple(keys))
            general.touch(list(keys))
        elif op == "events":
            assert fast.take_events() == general.take_events()
        elif op == "reset":
            assert fast.reset_cache() == general.reset_cache()
        assert fast.view() == general.view()
        fast.check()

    return step


def _store_then_lose_one(manager: OffloadManager, own: bool) -> object:
    # a store left running ("r"), then a plan whose first key completes alone: _storing
    # is as long as the plan again, but holds "r"
    manager.prepare_store(("r",))
    plan = manager.prepare_store(("p", "q"))
    assert isinstance(plan, StorePlan)
    manager.complete_store(("p",))
    return manager.complete_store(plan.keys if own else list(plan.keys))


def _load_after_a_running_load(manager: OffloadManager, own: bool) -> object:
    manager.prepare_load(("y",))  # "y" is being read ...
    plan = manager.prepare_load(("a", "b"))  # ... so this plan is not all the readers
    manager.complete_load(("a",))
    return _outcome(manager.complete_load, plan.keys if own else list(plan.keys))


def _one_key_load_after_a_part(manager: OffloadManager, own: bool) -> object:
    plan = manager.prepare_load(("a", "b"))  # all the readers ...
    manager.complete_load(("a",))
    manager.prepare_load(("y",))  # ... until one key finished and a one-key load began
    return _outcome(manager.complete_load, plan.keys if own else list(plan.keys))


def _store_with_another_ticket(manager: OffloadManager, own: bool) -> object:
    plan = manager.prepare_store(("c", "d"))
    assert isinstance(plan, StorePlan)
    return manager.complete_store(plan.keys if own else list(plan.keys), True, plan.ticket - 1)


def _load_with_another_ticket(manager: OffloadManager, own: bool) -> object:
    plan = manager.prepare_load(("a", "b"))
    return manager.complete_load(plan.keys if own else list(plan.keys), plan.ticket - 1)


@pytest.mark.parametrize("scenario", [_store_then_lose_one, _load_after_a_running_load,
                                      _one_key_load_after_a_part, _store_with_another_ticket,
                                      _load_with_another_ticket])
def test_a_plans_own_keys_complete_as_a_copy_does_once_the_running_set_changed(
        scenario: Callable[[OffloadManager, bool], object]) -> None:
    # The cases where the whole-dict completion must not be taken although the plan's
    # own tuple comes back with as many keys running as it names (regressions of its
    # guards: each was a wrong answer or state when a guard was left out).
    own, copy = ready(6, "a", "b", "y"), ready(6, "a", "b", "y")
    assert scenario(own, True) == scenario(copy, False)
    assert own.view() == copy.view()
    assert own.take_events() == copy.take_events()
    own.check()
