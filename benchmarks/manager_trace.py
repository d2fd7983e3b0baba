"""A seeded, realistic scheduler trace for offloading managers: prefix reuse, zipf popularity.

Each request reads a prompt (chosen with zipf popularity among ``prompts``) whose
blocks are shared with every other request of that prompt, or continues an earlier
request (a conversation turn: all of that request's blocks, then new ones), and adds
blocks of its own. Keys are vLLM-shaped ``OffloadKey`` bytes (an 8-byte block hash
plus a 4-byte group index 0), never repeated within one call. The calls a manager
sees depend on its answers (a hit prefix is loaded, the rest is stored), so the
drivers in :mod:`manager_drivers` replay the requests, not a fixed call list.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class TraceShape:
    """The knobs of a trace; the defaults are the published benchmark's."""

    requests: int = 12_000
    prompts: int = 3_000
    zipf_s: float = 1.1
    prompt_blocks: tuple[int, int] = (4, 48)
    own_blocks: tuple[int, int] = (1, 12)
    continue_rate: float = 0.3
    """Share of requests that continue an earlier request (multi-turn reuse)."""
    capacity: int = 16_384
    delay: int = 8
    """Requests until a job's completion arrives (so blocks stay in flight a while)."""
    failure_rate: float = 0.01
    """Share of store jobs that report failure."""
    tokens_per_block: int = 16
    events_every: int = 1
    """Drain ``take_events`` every this many requests (vLLM: every scheduler step)."""
    seed: int = 20_261_202


@dataclass(frozen=True)
class Request:
    """One request: its block keys in prefix order, their end-token positions, and
    whether its store job will fail."""

    req_id: str
    keys: tuple[bytes, ...]
    positions: tuple[int, ...]
    store_fails: bool


def block_key(*parts: object) -> bytes:
    """A vLLM ``OffloadKey``: an 8-byte hash of ``parts`` and group index 0 (4 bytes)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return digest + (0).to_bytes(4, "big")


def make_requests(shape: TraceShape) -> list[Request]:
    """The trace's requests, the same for a given ``shape`` on every machine."""
    rng = random.Random(shape.seed)
    prompt_keys = [
        tuple(block_key("prompt", p, i) for i in range(rng.randint(*shape.prompt_blocks)))
        for p in range(shape.prompts)]
    weights = list(itertools.accumulate(1 / (rank + 1) ** shape.zipf_s
                                        for rank in range(shape.prompts)))
    requests: list[Request] = []
    for n in range(shape.requests):
        if requests and rng.random() < shape.continue_rate:
            prefix = rng.choice(requests[-1_000:]).keys
        else:
            prefix = prompt_keys[rng.choices(range(shape.prompts), cum_weights=weights)[0]]
        own = tuple(block_key("request", n, j) for j in range(rng.randint(*shape.own_blocks)))
        keys = prefix + own
        positions = tuple((i + 1) * shape.tokens_per_block for i in range(len(keys)))
        requests.append(Request(f"req-{n}", keys, positions, rng.random() < shape.failure_rate))
    return requests
