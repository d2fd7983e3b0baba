"""The two sweeps of ``docs/traffic.md``: hit rate against capacity (LRU and ARC, zero
latency, the infinite cache as the ceiling), and the tri-state lookup against the
two-state one over a range of transfer latencies at one capacity."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .report import cell, hit_rate, token_hit_rate
from .simulator import Lookup, Run, Touch, simulate
from .timing import ZERO, Timing
from .traces import BLOCK_TOKENS, Request, distinct_blocks

CAPACITIES = (1e5, 2e5, 5e5, 1e6, 2e6, 3e6, 5e6, 1e7, 2e7, 5e7, None)
"""Capacities in tokens of the capacity sweep; None is the infinite cache."""
LATENCIES = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)
"""Per-block transfer times (ms) of the latency sweep, stores and loads alike."""

Progress = Callable[[str], Callable[[int], None] | None]
"""Given a run's label, the callback :func:`simulate` reports its progress to (or None)."""


def blocks_of(tokens: float | None, requests: Sequence[Request]) -> int:
    """The capacity in blocks of ``tokens`` (whole blocks of 512), or the infinite
    cache's: every distinct block of the trace."""
    if tokens is None:
        return distinct_blocks(requests)
    return int(tokens) // BLOCK_TOKENS


def tokens_label(tokens: float | None) -> str:
    return "infinite" if tokens is None else f"{tokens:.0e}".replace("e+0", "e")


@dataclass(frozen=True)
class CapacityRow:
    tokens: float | None
    runs: tuple[Run, ...]
    """One run per (trace, policy), in the column order."""


def capacity_sweep(traces: Sequence[tuple[str, Sequence[Request]]], policies: Sequence[str],
                   capacities: Sequence[float | None] = CAPACITIES,
                   progress: Progress | None = None, touch: Touch | None = None
                   ) -> list[CapacityRow]:
    """Zero-latency runs at each capacity for each trace and policy (``touch``: each
    policy's default when None)."""
    rows = []
    for tokens in capacities:
        runs = []
        for name, requests in traces:
            capacity = blocks_of(tokens, requests)
            for policy in policies:
                label = f"{name} {policy} {tokens_label(tokens)} tokens"
                runs.append(simulate(requests, capacity, policy, Lookup.TRI_STATE, ZERO,
                                     touch=touch, trace=name,
                                     progress=progress(label) if progress else None))
        rows.append(CapacityRow(tokens, tuple(runs)))
    return rows


def capacity_table(rows: Sequence[CapacityRow]) -> tuple[list[str], list[list[str]]]:
    """Header and rows: capacity, then each run's block hit rate (token hit rate)."""
    header = ["capacity, tokens"] + [f"{r.trace} {r.policy.upper()}" for r in rows[0].runs]
    body = []
    for row in rows:
        cells = [tokens_label(row.tokens)]
        cells += [f"{hit_rate(r.counters):.3f} ({token_hit_rate(r.counters):.3f})"
                  for r in row.runs]
        body.append(cells)
    return header, body


@dataclass(frozen=True)
class LatencyRow:
    ms: float
    tri: Run
    two: Run


def latency_sweep(name: str, requests: Sequence[Request], capacity: int, policy: str,
                  latencies: Sequence[float] = LATENCIES, block_bytes: int | None = None,
                  progress: Progress | None = None) -> list[LatencyRow]:
    """At each per-block latency (stores and loads), a tri-state run and its two-state
    twin."""
    rows = []
    for ms in latencies:
        timing = Timing(ms, ms) if block_bytes is None else Timing(ms, ms, block_bytes)
        pair = [simulate(requests, capacity, policy, lookup, timing, trace=name,
                         progress=progress(f"{name} {ms:g} ms/block {lookup.value}")
                         if progress else None)
                for lookup in (Lookup.TRI_STATE, Lookup.TWO_STATE)]
        rows.append(LatencyRow(ms, pair[0], pair[1]))
    return rows


LATENCY_HEADER = ["ms/block", "requests met in flight", "blocks in flight",
                  "tri: waits (s)", "hit rate tri / two", "computed again (two)",
                  "extra blocks (tokens) computed by two", "duplicate stores (GB)"]


def latency_table(rows: Sequence[LatencyRow]) -> tuple[list[str], list[list[str]]]:
    body = []
    for row in rows:
        tri, two = row.tri.counters, row.two.counters
        gigabytes = two.duplicate_stores * row.two.timing.block_bytes / 1e9
        body.append([
            f"{row.ms:g}", cell(tri.met_in_flight_requests), cell(tri.met_in_flight_blocks),
            f"{tri.waits:,} ({tri.wait_ms / 1e3:,.1f})",
            f"{hit_rate(tri):.4f} / {hit_rate(two):.4f}", cell(two.recomputed_blocks),
            f"{two.computed_blocks - tri.computed_blocks:,} "
            f"({two.computed_tokens - tri.computed_tokens:,})",
            f"{two.duplicate_stores:,} ({gigabytes:,.1f})"])
    return LATENCY_HEADER, body
