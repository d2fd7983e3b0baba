"""Small builders shared by the data-path tests (torch is required by the importer)."""

from __future__ import annotations

import torch

from kvoffload.impl import OffloadManager
from kvoffload.impl.datapath import (
    BlockLayout,
    DeterministicEngine,
    FailureInjector,
    HostBlockPool,
    OffloadTier,
    ThreadedEngine,
    never,
)

LAYOUT = BlockLayout(layers=2, block_size=4, kv_heads=2, head_dim=16, dtype=torch.float16)
"""1 KiB blocks: big enough to hold a pattern, small enough for thousands of steps."""


def device_blocks(count: int, layout: BlockLayout = LAYOUT, device: str = "cpu") -> torch.Tensor:
    """``count`` device blocks, each filled with its own index (distinct bytes)."""
    blocks = torch.empty((count, *layout.shape), dtype=layout.dtype, device=device)
    for index in range(count):
        blocks[index].fill_(index)
    return blocks


def deterministic_tier(capacity: int, device: int = 16, policy: str = "lru",
                       layout: BlockLayout = LAYOUT) -> OffloadTier:
    pool = HostBlockPool(capacity, layout)
    engine = DeterministicEngine(pool, device_blocks(device, layout))
    return OffloadTier(OffloadManager(capacity, policy), engine)


def threaded_tier(capacity: int, device: int = 16, policy: str = "lru", *, workers: int = 1,
                  fail: FailureInjector = never, layout: BlockLayout = LAYOUT) -> OffloadTier:
    pool = HostBlockPool(capacity, layout)
    engine = ThreadedEngine(pool, device_blocks(device, layout), workers=workers, fail=fail)
    return OffloadTier(OffloadManager(capacity, policy), engine)
