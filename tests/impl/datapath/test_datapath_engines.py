"""Transfer engines: job ids, poll, the block guard, the deterministic and threaded
backends, failure injection."""

from __future__ import annotations

import pytest
import torch
from datapath_fixtures import LAYOUT, device_blocks

from kvoffload.impl.datapath import (
    POISON,
    BadBlockIds,
    BusyBlock,
    DeterministicEngine,
    EngineClosed,
    HostBlockPool,
    JobResult,
    LayoutMismatch,
    ThreadedEngine,
    UnknownJob,
    copyplan,
    fail_jobs,
    fail_randomly,
)
from kvoffload.impl.datapath.copyplan import Way
from kvoffload.impl.datapath.guard import BlockGuard
from kvoffload.spec.vocabulary import CopyKind


def deterministic(slots: int = 4, device: int = 8) -> DeterministicEngine:
    return DeterministicEngine(HostBlockPool(slots, LAYOUT), device_blocks(device))


def poisoned(rows: torch.Tensor) -> bool:
    return bool((rows == POISON).all())


def test_an_engine_needs_device_blocks_of_the_pool_layout() -> None:
    pool = HostBlockPool(2, LAYOUT)
    with pytest.raises(LayoutMismatch):
        DeterministicEngine(pool, device_blocks(3).float())
    with pytest.raises(LayoutMismatch):
        DeterministicEngine(pool, device_blocks(3)[:, :1])


def test_deterministic_jobs_wait_until_the_test_completes_them() -> None:
    engine = deterministic()
    store = engine.submit_store([5, 6], [1, 0])
    load = engine.submit_load([3], [2])
    assert (store, load) == (0, 1)
    assert engine.running() == (0, 1)
    assert engine.poll() == []
    assert engine.wait() is False  # nothing ends by itself
    engine.complete(load)
    assert engine.poll() == [JobResult(load, CopyKind.LOAD, True)]
    assert engine.pending() == (store,)
    engine.complete(store)
    assert engine.poll() == [JobResult(store, CopyKind.STORE, True)]
    assert engine.wait() is True
    assert torch.equal(engine.pool.blocks[1], engine.device.blocks[5])
    assert torch.equal(engine.pool.blocks[0], engine.device.blocks[6])


def test_deterministic_copies_happen_at_completion_and_poison_until_then() -> None:
    engine = deterministic()
    job = engine.submit_store([5], [2])
    assert poisoned(engine.pool.rows.tensor[2])  # in flight: neither old nor new bytes
    engine.device.blocks[5].fill_(42.0)  # what the device holds when the copy runs
    engine.complete(job)
    assert bool((engine.pool.blocks[2] == 42.0).all())


def test_a_failed_deterministic_job_leaves_a_torn_destination() -> None:
    engine = deterministic()
    job = engine.submit_store([4], [1])
    engine.fail(job, "disk on fire")
    (result,) = engine.poll()
    assert result == JobResult(job, CopyKind.STORE, False, "disk on fire")
    row, source = engine.pool.rows.tensor[1], engine.device.tensor[4]
    half = row.shape[0] // 2
    assert torch.equal(row[:half], source[:half])
    assert poisoned(row[half:])


def test_unknown_or_ended_jobs_cannot_be_completed() -> None:
    engine = deterministic()
    job = engine.submit_load([0], [0])
    engine.complete(job)
    with pytest.raises(UnknownJob):
        engine.complete(job)
    with pytest.raises(UnknownJob):
        engine.fail(99)


@pytest.mark.parametrize(("first", "second"), [
    (("store", [0], [1]), ("store", [2], [1])),  # two writers of slot 1
    (("store", [0], [1]), ("load", [1], [3])),  # reading a slot being written
    (("load", [1], [3]), ("store", [0], [1])),  # writing a slot being read
    (("load", [1], [3]), ("load", [2], [3])),  # two writers of device block 3
    (("load", [1], [3]), ("store", [3], [2])),  # reading a device block being written
    (("store", [3], [2]), ("load", [1], [3])),  # writing a device block being read
])
def test_the_guard_refuses_a_copy_that_races_a_running_one(
        first: tuple[str, list[int], list[int]], second: tuple[str, list[int], list[int]]
) -> None:
    engine = deterministic()

    def submit(kind: str, a: list[int], b: list[int]) -> int:
        # store: a = device blocks, b = slots; load: a = slots, b = device blocks
        return engine.submit_store(a, b) if kind == "store" else engine.submit_load(a, b)

    job = submit(*first)
    pool_before = engine.pool.rows.tensor.clone()
    with pytest.raises(BusyBlock):
        submit(*second)
    assert engine.running() == (job,)  # the refused copy changed nothing
    assert torch.equal(engine.pool.rows.tensor, pool_before)
    engine.complete(job)
    engine.poll()
    submit(*second)  # once the first copy ended, the second may run


def test_a_read_of_a_slot_being_stored_sees_poison_not_the_old_bytes() -> None:
    # What makes "no load reads a block whose store is in flight" checkable byte for byte
    # on the deterministic engine: with the guard switched off, such a read gets poison.
    class Blind(BlockGuard):
        def check(self, *args: object) -> None:
            pass

    engine = deterministic()
    engine._guard = Blind()
    engine.submit_store([5], [1])
    peek = engine.submit_load([1], [7])
    engine.complete(peek)
    assert poisoned(engine.device.tensor[7])


def test_copies_that_share_only_reads_run_together() -> None:
    engine = deterministic()
    engine.submit_load([1], [3])
    engine.submit_load([1], [4])  # two readers of slot 1
    engine.submit_store([5], [0])
    engine.submit_store([5], [2])  # two readers of device block 5
    assert len(engine.running()) == 4


def test_check_device_blocks_changes_nothing_and_names_the_problem() -> None:
    engine = deterministic()
    engine.submit_load([0], [3])
    engine.check_device_blocks(CopyKind.LOAD, [4, 5])
    with pytest.raises(BusyBlock):
        engine.check_device_blocks(CopyKind.LOAD, [3])
    with pytest.raises(BusyBlock):
        engine.check_device_blocks(CopyKind.STORE, [3])
    with pytest.raises(BadBlockIds):
        engine.check_device_blocks(CopyKind.LOAD, [4, 4])
    with pytest.raises(BadBlockIds):
        engine.check_device_blocks(CopyKind.STORE, [8])
    assert engine.running() == (0,)


def test_a_closed_engine_refuses_new_jobs() -> None:
    engine = deterministic()
    with engine:
        engine.submit_load([0], [0])
    with pytest.raises(EngineClosed):
        engine.submit_load([1], [1])


def test_threaded_jobs_run_off_the_callers_thread_and_end_by_themselves() -> None:
    engine = ThreadedEngine(HostBlockPool(8, LAYOUT), device_blocks(16))
    try:
        engine.pause()
        store = engine.submit_store(list(range(8)), list(range(8)))
        assert engine.running() == 1  # held in flight: the caller goes on meanwhile
        assert engine.poll() == []
        assert engine.wait(timeout=0.01) is False
        engine.resume()
        assert engine.wait(timeout=60)
        assert engine.poll() == [JobResult(store, CopyKind.STORE, True)]
        assert torch.equal(engine.pool.blocks, engine.device.blocks[:8])
        load = engine.submit_load([7, 0], [9, 8])
        assert engine.wait(timeout=60)
        assert engine.poll() == [JobResult(load, CopyKind.LOAD, True)]
        assert torch.equal(engine.device.blocks[8], engine.device.blocks[0])
        assert torch.equal(engine.device.blocks[9], engine.device.blocks[7])
    finally:
        engine.close()


def test_threaded_failure_injection_tears_the_destination() -> None:
    engine = ThreadedEngine(HostBlockPool(4, LAYOUT), device_blocks(8), fail=fail_jobs([1]))
    try:
        ok = engine.submit_store([2], [0])
        doomed = engine.submit_store([3], [1])
        assert engine.wait(timeout=60)
        results = {r.job_id: r for r in engine.poll()}
        assert results[ok].success
        assert not results[doomed].success
        assert results[doomed].error == "injected failure"
        assert torch.equal(engine.pool.blocks[0], engine.device.blocks[2])
        row = engine.pool.rows.tensor[1]
        assert poisoned(row[row.shape[0] // 2:])
    finally:
        engine.close()


def test_a_copy_that_raises_on_the_worker_is_a_failed_job(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("the copy broke midway")

    # the job is planned (and its views taken) at submit, so the copy is broken where it
    # runs: the "each" way's torch call (neither side of [1, 5] -> [3, 0] is one range)
    monkeypatch.setattr(copyplan, "_FOREACH_COPY", broken)
    engine = ThreadedEngine(HostBlockPool(4, LAYOUT), device_blocks(8))
    try:
        job = engine.submit_store([1, 5], [3, 0])
        planned = engine.job(job)
        assert planned is not None
        assert planned.copy.way is Way.EACH
        assert engine.wait(timeout=60)
        (result,) = engine.poll()
        assert result.job_id == job
        assert not result.success  # reported as a failure, never raised on the worker
        assert result.error is not None
        assert "RuntimeError" in result.error
    finally:
        engine.close()


def test_random_failures_depend_on_the_job_and_the_seed_only() -> None:
    engine = deterministic()
    engine.submit_load([0], [0])
    job = engine.job(0)
    assert job is not None
    assert fail_randomly(0.5, seed=7)(job) == fail_randomly(0.5, seed=7)(job)
    assert {fail_randomly(0.5, seed=s)(job) for s in range(40)} == {True, False}
    assert not fail_randomly(0.0)(job)
    assert fail_randomly(1.0)(job)


def test_closing_a_threaded_engine_finishes_submitted_jobs() -> None:
    engine = ThreadedEngine(HostBlockPool(4, LAYOUT), device_blocks(8), workers=2)
    engine.pause()
    jobs = [engine.submit_store([i], [i]) for i in range(4)]
    engine.close()
    assert sorted(r.job_id for r in engine.poll()) == jobs
    with pytest.raises(EngineClosed):
        engine.submit_store([0], [0])
