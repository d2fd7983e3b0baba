"""How long transfers take in the simulation: per-block store and load times.

Given either as latencies (ms per block) or as a bandwidth (GB/s) and a block's size in
bytes. A job of ``n`` blocks takes ``n`` times the per-block time; jobs do not share a
link (no queueing): each runs for its own duration from the moment it is prepared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

BLOCK_BYTES = 2 * 80 * 8 * 128 * 2 * 512
"""A 512-token block of LLaMA2-70B's KV cache in fp16 (80 layers, 8 KV heads of 128,
K and V, 2 bytes each: 320 KiB a token): 167,772,160 bytes (160 MiB), a 70B-class
model's block."""

BANDWIDTH_GBPS = 25.0
"""Default store and load bandwidth, GB/s (1e9 bytes a second): an assumed usable rate
of a PCIe 4.0 x16 link (32 GB/s raw), not a measurement."""


class TimingError(ValueError):
    """A transfer time or size that cannot be simulated (negative, not finite)."""


@dataclass(frozen=True)
class Timing:
    """Per-block store and load times in ms, and the bytes a block holds (for the byte
    counts of a report)."""

    store_ms: float = 0.0
    load_ms: float = 0.0
    block_bytes: int = BLOCK_BYTES

    def __post_init__(self) -> None:
        for name in ("store_ms", "load_ms"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise TimingError(f"{name} must be a finite number of ms >= 0, got {value!r}")
        if isinstance(self.block_bytes, bool) or not isinstance(self.block_bytes, int) or (
                self.block_bytes < 1):
            raise TimingError(f"block_bytes must be an int >= 1, got {self.block_bytes!r}")

    @classmethod
    def from_bandwidth(cls, store_gbps: float = BANDWIDTH_GBPS,
                       load_gbps: float = BANDWIDTH_GBPS,
                       block_bytes: int = BLOCK_BYTES) -> Timing:
        """Per-block times of a block of ``block_bytes`` at these bandwidths (GB/s).

        raises: TimingError
        """
        for name, value in (("store bandwidth", store_gbps), ("load bandwidth", load_gbps)):
            if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise TimingError(f"the {name} must be a finite number of GB/s > 0, "
                                  f"got {value!r}")
        per_gb_ms = block_bytes / 1e9 * 1e3
        return cls(per_gb_ms / store_gbps, per_gb_ms / load_gbps, block_bytes)

    def describe(self) -> str:
        return (f"store {self.store_ms:g} ms/block, load {self.load_ms:g} ms/block, "
                f"{self.block_bytes:,} bytes/block")


ZERO = Timing()
"""Transfers that take no time: the requests in sequence (the paper's Figure 9)."""
DEFAULT = Timing.from_bandwidth()
"""160 MiB blocks at 25 GB/s both ways: 6.71 ms a block."""
