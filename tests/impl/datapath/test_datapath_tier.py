"""OffloadTier: the manager, the pool and an engine together, on real tensors."""

from __future__ import annotations

import pytest
import torch
from datapath_fixtures import LAYOUT, deterministic_tier, device_blocks, threaded_tier

from kvoffload.impl import OffloadManager
from kvoffload.impl.datapath import (
    POISON,
    BadBlockIds,
    BusyBlock,
    DeterministicEngine,
    EngineClosed,
    HostBlockPool,
    LoadTicket,
    OffloadTier,
    StoreTicket,
    ThreadedEngine,
    fail_jobs,
    open_tier,
)
from kvoffload.spec.errors import BadCapacity, InvariantViolation, NotReadable
from kvoffload.spec.outputs import Completion, Events, StoreRejected
from kvoffload.spec.vocabulary import CopyKind, LookupResult

MISS, PENDING, HIT = LookupResult.MISS, LookupResult.PENDING, LookupResult.HIT


def engine_of(tier: OffloadTier) -> DeterministicEngine:
    assert isinstance(tier.engine, DeterministicEngine)
    return tier.engine


def stored(tier: OffloadTier, keys: list[str], blocks: list[int]) -> StoreTicket:
    ticket = tier.store(keys, blocks)
    assert isinstance(ticket, StoreTicket)
    return ticket


def same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a.view(torch.int16), b.view(torch.int16))


def test_store_then_load_returns_the_bytes() -> None:
    tier = deterministic_tier(4)
    device = tier.engine.device.blocks
    ticket = stored(tier, ["a", "b"], [3, 5])
    assert (ticket.keys, ticket.device_blocks, ticket.evicted) == (("a", "b"), (3, 5), ())
    assert tier.lookup("a") is PENDING
    assert tier.poll() == []
    engine_of(tier).complete(ticket.job_id)  # type: ignore[arg-type]  # job_id is None only when every key was present; not here
    assert tier.lookup("a") is PENDING  # the copy ended, but nobody polled yet
    (done,) = tier.poll()
    assert done.success
    assert done.kind is CopyKind.STORE
    assert done.completion == Completion(applied=("a", "b"))
    assert tier.lookup("a") is HIT
    device[3].fill_(0)
    device[5].fill_(0)
    load = tier.load(["b", "a"], [10, 11])
    engine_of(tier).complete(load.job_id)
    (done,) = tier.poll()
    assert done.success
    assert done.kind is CopyKind.LOAD
    assert bool((device[10] == 5).all())
    assert bool((device[11] == 3).all())
    assert tier.take_events() == Events(stored=frozenset({"a", "b"}))


def test_loading_a_key_whose_store_is_in_flight_is_refused_and_changes_nothing() -> None:
    tier = deterministic_tier(4)
    stored(tier, ["a"], [1])
    before = tier.manager.view()
    with pytest.raises(NotReadable):
        tier.load(["a"], [2])
    assert tier.manager.view() == before
    assert len(tier.in_flight()) == 1  # only the store: no load job started
    with pytest.raises(NotReadable):
        tier.load(["nobody"], [2])


def test_a_failed_store_is_absent_and_its_bytes_never_readable() -> None:
    tier = deterministic_tier(2)
    ticket = stored(tier, ["a"], [1])
    engine_of(tier).fail(ticket.job_id)  # type: ignore[arg-type]  # job_id is None only when every key was present; not here
    (done,) = tier.poll()
    assert not done.success
    assert done.error == "failed by the test"
    assert tier.lookup("a") is MISS
    with pytest.raises(NotReadable):
        tier.load(["a"], [2])
    assert tier.manager.view().free  # the slot came back


def test_a_failed_load_unpins_and_says_so() -> None:
    tier = deterministic_tier(2)
    engine = engine_of(tier)
    ticket = stored(tier, ["a"], [1])
    engine.complete(ticket.job_id)  # type: ignore[arg-type]  # job_id is None only when every key was present; not here
    tier.poll()
    load = tier.load(["a"], [7])
    engine.fail(load.job_id)
    (done,) = tier.poll()
    assert not done.success
    assert done.completion == Completion(applied=("a",))
    assert tier.manager.view().readers == ()
    row = tier.engine.device.tensor[7]
    assert bool((row[row.shape[0] // 2:] == POISON).all())


def test_a_rejected_store_changes_nothing() -> None:
    tier = deterministic_tier(1)
    stored(tier, ["a"], [1])
    before = tier.manager.view()
    assert tier.store(["b"], [2]) == StoreRejected(needed=1, available=0)
    assert tier.manager.view() == before
    assert len(tier.in_flight()) == 1


def test_a_store_of_present_keys_starts_no_copy() -> None:
    tier = deterministic_tier(2)
    stored(tier, ["a"], [1])
    ticket = stored(tier, ["a", "a"], [2, 3])
    assert ticket.job_id is None
    assert ticket.keys == ()
    assert len(engine_of(tier).running()) == 1


def test_a_repeated_key_is_stored_from_its_first_device_block() -> None:
    tier = deterministic_tier(2)
    ticket = stored(tier, ["a", "b", "a"], [4, 6, 5])
    assert ticket.keys == ("a", "b")
    assert ticket.device_blocks == (4, 6)


def test_a_key_loaded_twice_is_copied_into_both_blocks_with_one_reader() -> None:
    tier = deterministic_tier(2)
    engine = engine_of(tier)
    engine.complete(stored(tier, ["a"], [4]).job_id)  # type: ignore[arg-type]  # job_id is None only when every key was present; not here
    tier.poll()
    load = tier.load(["a", "a"], [8, 9])
    assert tier.manager.view().readers == (("a", 1),)
    engine.complete(load.job_id)
    (done,) = tier.poll()
    assert done.completion == Completion(applied=("a",))
    device = tier.engine.device.blocks
    assert same_bytes(device[8], device[4])
    assert same_bytes(device[9], device[4])


def test_eviction_makes_room_and_the_new_block_gets_its_own_bytes() -> None:
    tier = deterministic_tier(1)
    engine = engine_of(tier)
    engine.complete(stored(tier, ["a"], [1]).job_id)  # type: ignore[arg-type]  # job_id is None only when every key was present; not here
    tier.poll()
    ticket = stored(tier, ["b"], [2])
    assert ticket.evicted == ("a",)
    assert tier.lookup("a") is MISS
    engine.complete(ticket.job_id)  # type: ignore[arg-type]  # job_id is None only when every key was present; not here
    tier.poll()
    load = tier.load(["b"], [3])
    engine.complete(load.job_id)
    tier.poll()
    device = tier.engine.device.blocks
    assert same_bytes(device[3], device[2])


def test_a_pinned_block_is_not_evicted_under_a_running_load() -> None:
    tier = deterministic_tier(1)
    engine = engine_of(tier)
    engine.complete(stored(tier, ["a"], [1]).job_id)  # type: ignore[arg-type]  # job_id is None only when every key was present; not here
    tier.poll()
    tier.load(["a"], [5])
    assert tier.store(["b"], [2]) == StoreRejected(needed=1, available=0)


def test_reset_holds_the_slot_of_a_running_store_until_it_ends() -> None:
    tier = deterministic_tier(1)
    engine = engine_of(tier)
    old = stored(tier, ["a"], [1])
    assert tier.reset() == 1
    assert tier.lookup("a") is MISS
    # the only slot is still being written by the old copy: nothing to hand out
    assert tier.store(["b"], [2]) == StoreRejected(needed=1, available=0)
    engine.complete(old.job_id)  # type: ignore[arg-type]  # job_id is None only when every key was present; not here
    (done,) = tier.poll()
    assert done.completion == Completion(released=("a",))  # stale: frees the slot only
    assert tier.lookup("a") is MISS
    new = stored(tier, ["b"], [2])
    assert new.slots == old.slots
    assert new.epoch == 1


def test_reset_holds_the_slot_of_a_running_load_and_the_load_gets_its_bytes() -> None:
    tier = deterministic_tier(1)
    engine = engine_of(tier)
    engine.complete(stored(tier, ["a"], [1]).job_id)  # type: ignore[arg-type]  # job_id is None only when every key was present; not here
    tier.poll()
    load = tier.load(["a"], [6])
    tier.reset()
    assert tier.store(["b"], [2]) == StoreRejected(needed=1, available=0)
    engine.complete(load.job_id)
    (done,) = tier.poll()
    assert done.success
    assert done.completion == Completion(released=("a",))
    device = tier.engine.device.blocks
    assert same_bytes(device[6], device[1])
    assert isinstance(tier.store(["b"], [2]), StoreTicket)


def test_a_key_stored_again_after_reset_is_not_completed_by_the_old_job() -> None:
    tier = deterministic_tier(2)
    engine = engine_of(tier)
    old = stored(tier, ["a"], [1])
    tier.reset()
    new = stored(tier, ["a"], [2])
    engine.complete(old.job_id)  # type: ignore[arg-type]  # job_id is None only when every key was present; not here
    (done,) = tier.poll()
    assert done.completion == Completion(released=("a",))
    assert tier.lookup("a") is PENDING  # still the new store's, which has not ended
    engine.complete(new.job_id)  # type: ignore[arg-type]  # job_id is None only when every key was present; not here
    tier.poll()
    assert tier.lookup("a") is HIT
    load = tier.load(["a"], [9])
    engine.complete(load.job_id)
    tier.poll()
    device = tier.engine.device.blocks
    assert same_bytes(device[9], device[2])


def test_completions_name_the_plan_ticket_so_a_late_report_finishes_nothing() -> None:
    # issue 10 A through the tier: within one epoch, a failed store's key is stored
    # again into the same slot; the first job's late report, in the ticket form the tier
    # speaks, is ignored, and the second job still owns the slot.
    tier = deterministic_tier(1)
    engine = engine_of(tier)
    first = stored(tier, ["a"], [1])
    engine.fail(first.job_id)  # type: ignore[arg-type]  # job_id is None only when every key was present; not here
    tier.poll()
    again = stored(tier, ["a"], [2])
    assert again.slots == first.slots
    assert again.plan_ticket != first.plan_ticket
    late = tier.manager.complete_store(["a"], success=False, ticket=first.plan_ticket)
    assert late == Completion(ignored=("a",))
    assert tier.lookup("a") is PENDING
    assert isinstance(tier.store(["b"], [3]), StoreRejected)  # slot 0 is still being written
    engine.complete(again.job_id)  # type: ignore[arg-type]  # job_id is None only when every key was present; not here
    (done,) = tier.poll()
    assert done.completion == Completion(applied=("a",))
    assert tier.lookup("a") is HIT


def test_bad_calls_are_refused_before_the_manager_is_asked() -> None:
    tier = deterministic_tier(2, device=8)
    with pytest.raises(BadBlockIds):
        tier.store(["a", "b"], [1])
    with pytest.raises(BadBlockIds):
        tier.store(["a"], [8])
    engine_of(tier).complete(stored(tier, ["a"], [1]).job_id)  # type: ignore[arg-type]  # job_id is None only when every key was present; not here
    tier.poll()
    with pytest.raises(BadBlockIds):
        tier.load(["a", "a"], [3, 3])  # one device block written twice
    assert tier.manager.view().readers == ()
    tier.load(["a"], [3])
    before = tier.manager.view()
    with pytest.raises(BusyBlock):
        tier.load(["a"], [3])  # a running load writes device block 3
    with pytest.raises(BusyBlock):
        tier.store(["c"], [3])  # ... so it cannot be stored from either
    assert tier.manager.view() == before


def test_a_slot_the_engine_finds_busy_is_a_manager_bug_and_the_plan_is_undone() -> None:
    class LeakyManager(OffloadManager):
        """Hands out slot 0 again while a copy still writes it."""

        def reset_cache(self) -> int:
            epoch = super().reset_cache()
            self.__init__(self.capacity, self.policy)  # type: ignore[misc]  # the bug under test: a reset that forgets its slots
            self._epoch = epoch
            return epoch

    engine = DeterministicEngine(HostBlockPool(1, LAYOUT), device_blocks(4))
    tier = OffloadTier(LeakyManager(1), engine)
    stored(tier, ["a"], [1])
    tier.reset()
    with pytest.raises(InvariantViolation, match="slots_of_running_copies_are_held"):
        tier.store(["b"], [2])
    assert tier.lookup("b") is MISS
    assert tier.manager.view().storing == ()


def test_the_manager_and_the_pool_must_agree_on_the_number_of_slots() -> None:
    engine = DeterministicEngine(HostBlockPool(3, LAYOUT), device_blocks(4))
    with pytest.raises(BadCapacity):
        OffloadTier(OffloadManager(4), engine)


def test_open_tier_builds_a_threaded_tier_for_cpu_tensors() -> None:
    device = device_blocks(8)
    tier = open_tier(device, 4, "arc")
    try:
        assert isinstance(tier.engine, ThreadedEngine)
        assert tier.engine.pool.layout == LAYOUT
        assert tier.manager.policy.value == "arc"
        stored(tier, ["x", "y"], [2, 3])
        tier.drain(timeout=60)
        load = tier.load(["y", "x"], [6, 7])
        assert isinstance(load, LoadTicket)
        (done,) = tier.drain(timeout=60)
        assert done.success
        assert same_bytes(device[6], device[3])
        assert same_bytes(device[7], device[2])
    finally:
        tier.close()


def test_a_threaded_tier_reports_an_injected_failure_as_a_failure() -> None:
    tier = threaded_tier(2, fail=fail_jobs([0]))
    try:
        stored(tier, ["a"], [1])
        stored(tier, ["b"], [2])
        results = {d.ticket.keys: d.success for d in tier.drain(timeout=60)}
        assert results == {("a",): False, ("b",): True}
        assert tier.lookup("a") is MISS
        assert tier.lookup("b") is HIT
    finally:
        tier.close()


def test_a_threaded_store_held_in_flight_reads_pending() -> None:
    tier = threaded_tier(2)
    engine = tier.engine
    assert isinstance(engine, ThreadedEngine)
    try:
        engine.pause()
        stored(tier, ["a"], [1])
        assert tier.lookup("a") is PENDING
        with pytest.raises(NotReadable):
            tier.load(["a"], [2])
        engine.resume()
        tier.drain(timeout=60)
        assert tier.lookup("a") is HIT
    finally:
        tier.close()


def test_a_closed_tier_refuses_copies_before_the_manager_is_asked() -> None:
    tier = deterministic_tier(1)
    engine_of(tier).complete(stored(tier, ["a"], [1]).job_id)  # type: ignore[arg-type]  # job_id is None only when every key was present; not here
    tier.poll()
    tier.close()
    before = tier.manager.view()
    with pytest.raises(EngineClosed):
        tier.store(["b"], [2])  # would have evicted "a"
    with pytest.raises(EngineClosed):
        tier.load(["a"], [2])
    assert tier.manager.view() == before


def test_a_load_of_no_keys_starts_no_copy() -> None:
    tier = deterministic_tier(1)
    ticket = tier.load([], [])
    assert ticket.job_id is None
    assert engine_of(tier).running() == ()
