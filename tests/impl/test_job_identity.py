"""Regression tests on ``OffloadManager`` for issue 10's traces (A, B, D), answered as
``TICKETS.md`` decides: every plan names its job with a fresh ticket, a completion in the
ticket form finishes exactly that job, and ARC evicts as Megiddo and Modha's REPLACE."""

from __future__ import annotations

from kvoffload.impl import OffloadManager
from kvoffload.spec import Completion, LookupResult, StorePlan, StoreRejected, initial_state
from kvoffload.spec import transitions as spec
from kvoffload.spec.vocabulary import Policy


def store(manager: OffloadManager, key: str) -> StorePlan:
    plan = manager.prepare_store([key])
    assert isinstance(plan, StorePlan)
    return plan


def test_a_late_failure_report_of_a_finished_store_is_ignored() -> None:
    # Trace A: J1 fails, J2 stores the same key into the same slot, J1's duplicate report
    # arrives. In the ticket form it names J1, which runs nowhere: ignored.
    manager = OffloadManager(1)
    first = store(manager, "a")
    assert manager.complete_store(["a"], success=False, ticket=first.ticket) == Completion(
        applied=("a",))
    second = store(manager, "a")
    assert second.slots == first.slots
    assert second.ticket != first.ticket
    before = manager.view()
    assert manager.complete_store(["a"], success=False, ticket=first.ticket) == Completion(
        ignored=("a",))
    assert manager.view() == before
    assert manager.lookup("a") is LookupResult.PENDING
    # slot 0 stays with J2, which is still writing it
    assert manager.prepare_store(["b"]) == StoreRejected(needed=1, available=0)
    assert manager.complete_store(["a"], ticket=second.ticket) == Completion(applied=("a",))
    manager.check()


def test_a_late_success_report_of_a_finished_store_is_ignored() -> None:
    # Trace A, success variant: a stored, evicted, stored again; J1's duplicate success
    # must not make the block READY while J2 writes it.
    manager = OffloadManager(1)
    first = store(manager, "a")
    manager.complete_store(["a"], ticket=first.ticket)
    evicting = store(manager, "x")
    assert evicting.evicted == ("a",)
    manager.complete_store(["x"], ticket=evicting.ticket)
    again = store(manager, "a")
    assert again.evicted == ("x",)
    assert manager.complete_store(["a"], ticket=first.ticket) == Completion(ignored=("a",))
    assert manager.lookup("a") is LookupResult.PENDING
    manager.check()


def test_vllms_form_still_applies_a_late_report_to_the_running_job() -> None:
    # The hazard vLLM's form keeps (no-stale-completions excludes it): no ticket, so the
    # STORING block's job finishes whatever job the report belonged to.
    manager = OffloadManager(1)
    first = store(manager, "a")
    manager.complete_store(["a"], success=False, ticket=first.ticket)
    store(manager, "a")
    assert manager.complete_store(["a"], success=False) == Completion(applied=("a",))
    assert manager.lookup("a") is LookupResult.MISS


def test_a_load_from_before_a_reset_releases_its_own_slot_only() -> None:
    # Trace B: L1 reads slot 0, reset, a is stored again in slot 1 and L2 reads it; L1's
    # completion names L1: its orphan is released (slot 0 freed), L2 keeps a pinned.
    manager = OffloadManager(2)
    manager.complete_store(["a"], ticket=store(manager, "a").ticket)
    old = manager.prepare_load(["a"])
    assert old.slots == (0,)
    manager.reset_cache()
    manager.complete_store(["a"], ticket=store(manager, "a").ticket)
    new = manager.prepare_load(["a"])
    assert new.slots == (1,)
    assert manager.complete_load(["a"], ticket=old.ticket) == Completion(released=("a",))
    plan = manager.prepare_store(["x"])
    assert isinstance(plan, StorePlan)
    assert (plan.slots, plan.evicted) == ((0,), ())
    assert manager.complete_load(["a"], ticket=new.ticket) == Completion(applied=("a",))
    assert manager.complete_load(["a"], ticket=new.ticket) == Completion(ignored=("a",))
    manager.check()


def test_vllms_form_unpins_the_live_block_first() -> None:
    # Trace B in vLLM's form: L1's completion names no job, so the READY block's oldest
    # load (L2) leaves, and the next store may take slot 1 while L2 still reads it. This
    # is what no-stale-completions excludes; the ticket form above is safe.
    manager = OffloadManager(2)
    manager.complete_store(["a"], ticket=store(manager, "a").ticket)
    manager.prepare_load(["a"])
    manager.reset_cache()
    manager.complete_store(["a"], ticket=store(manager, "a").ticket)
    manager.prepare_load(["a"])
    assert manager.complete_load(["a"]) == Completion(applied=("a",))
    plan = manager.prepare_store(["x"])
    assert isinstance(plan, StorePlan)
    assert plan.evicted == ("a",)
    assert plan.slots == (1,)


def test_arc_evicts_as_replace_for_a_b2_hit_when_t1_is_exactly_p() -> None:
    # Trace D (found by searching OffloadManager against the rule "t1 only when
    # |t1| > p"): the last store's key is in b2 and |t1| == p, so REPLACE takes t1's
    # least recent evictable key. The spec, the oracle, agrees.
    calls = [("s", "f"), ("s", "d"), ("s", "e"), ("t", "e"), ("s", "b"), ("s", "f"),
             ("s", "d"), ("s", "e")]
    manager = OffloadManager(3, policy="arc")
    state = initial_state(3, Policy.ARC)
    plan = None
    for op, key in calls:
        if op == "t":
            manager.touch([key])
            state, _ = spec.touch(state, [key])
            continue
        plan = manager.prepare_store([key])
        state, expected = spec.prepare_store(state, [key], slots=getattr(plan, "slots", None))
        assert plan == expected
        if isinstance(plan, StorePlan):
            manager.complete_store([key], ticket=plan.ticket)
            state, _ = spec.complete_store(state, [key], ticket=plan.ticket)
    assert isinstance(plan, StorePlan)
    assert plan.keys == ("e",)
    assert plan.evicted == ("b",)
    manager.check()
