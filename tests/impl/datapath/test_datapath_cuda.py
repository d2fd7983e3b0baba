"""The CUDA engine: stream ordering, non-blocking submits, per-job completion, failures.

Verified only on a GPU: every test here is marked ``gpu`` and skipped without CUDA.
"""

from __future__ import annotations

import random

import pytest
import torch
from datapath_fixtures import LAYOUT
from integrity_driver import IntegrityDriver

from kvoffload.impl import OffloadManager
from kvoffload.impl.datapath import POISON, HostBlockPool, OffloadTier, fail_jobs, open_tier
from kvoffload.impl.datapath.rows import Rows

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def cuda_engine(slots: int = 8, blocks: int = 16, **options: object):  # type: ignore[no-untyped-def]  # CudaEngine is imported inside (CUDA only)
    from kvoffload.impl.datapath.cuda import CudaEngine

    device = torch.randn((blocks, *LAYOUT.shape), device="cuda").to(LAYOUT.dtype)
    return CudaEngine(HostBlockPool(slots, LAYOUT), device, **options)


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(Rows(a.unsqueeze(0)).tensor.cpu(), Rows(b.unsqueeze(0)).tensor.cpu())


def test_the_pool_is_pinned_with_cuda() -> None:
    assert HostBlockPool(2, LAYOUT).pinned


def test_store_and_load_round_trip_scattered_blocks() -> None:
    engine = cuda_engine()
    store = engine.submit_store([9, 2, 5, 6], [7, 0, 3, 4])
    assert engine.wait(timeout=60)
    assert [r.success for r in engine.poll()] == [True]
    for block, slot in zip([9, 2, 5, 6], [7, 0, 3, 4], strict=True):
        assert same(engine.pool.blocks[slot], engine.device.blocks[block])
    load = engine.submit_load([7, 0, 3], [12, 13, 1])
    engine.wait()
    (result,) = engine.poll()
    assert result.job_id == load != store
    assert same(engine.device.blocks[12], engine.device.blocks[9])
    assert same(engine.device.blocks[13], engine.device.blocks[2])
    assert same(engine.device.blocks[1], engine.device.blocks[5])


def test_a_store_reads_what_compute_queued_before_it_wrote() -> None:
    engine = cuda_engine()
    torch.cuda._sleep(200_000_000)  # keep the compute stream busy for a while ...
    engine.device.blocks[3].fill_(7.0)  # ... then produce the block on it
    job = engine.submit_store([3], [1])  # no synchronize: ordering is the engine's job
    assert engine.poll() == []  # the copy waits for compute; submit did not block
    engine.wait()
    (result,) = engine.poll()
    assert result.job_id == job
    assert result.success
    assert bool((engine.pool.blocks[1] == 7.0).all())


def test_order_after_makes_compute_wait_for_a_load() -> None:
    engine = cuda_engine()
    engine.pool.blocks[2].fill_(5.0)
    job = engine.submit_load([2], [4])
    engine.order_after(job)
    seen = engine.device.blocks[4].clone()  # queued on the compute stream after the load
    torch.cuda.synchronize()
    assert bool((seen == 5.0).all())
    engine.wait()
    engine.poll()


def test_injected_failures_tear_the_destination_and_are_reported() -> None:
    engine = cuda_engine(fail=fail_jobs([0]))
    engine.submit_store([3], [1])
    engine.wait()
    (result,) = engine.poll()
    assert not result.success
    row = engine.pool.rows.tensor[1]
    assert bool((row[row.shape[0] // 2:] == POISON).all())


def test_open_tier_on_a_cuda_tensor_uses_the_cuda_engine() -> None:
    from kvoffload.impl.datapath.cuda import CudaEngine

    device = torch.zeros((8, *LAYOUT.shape), dtype=LAYOUT.dtype, device="cuda")
    tier = open_tier(device, 4)
    assert isinstance(tier.engine, CudaEngine)


@pytest.mark.parametrize("seed", range(4))
def test_integrity_on_the_cuda_engine(seed: int) -> None:
    from kvoffload.impl.datapath.cuda import CudaEngine

    capacity = 6
    device = torch.zeros((24, *LAYOUT.shape), dtype=LAYOUT.dtype, device="cuda")
    engine = CudaEngine(HostBlockPool(capacity, LAYOUT), device,
                        fail=lambda job: random.Random(seed * 7919 + job.job_id).random() < 0.1)
    tier = OffloadTier(OffloadManager(capacity), engine)
    counts = IntegrityDriver(tier, random.Random(seed)).run(400)
    print(f"\nintegrity cuda seed {seed}: {counts.summary()}")
    assert counts.loads_verified > 0
    assert counts.stores_verified > 0
