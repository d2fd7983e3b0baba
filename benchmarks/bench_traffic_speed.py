"""Cost per block operation on Mooncake's traces: ``OffloadManager`` against vLLM's
managers and a bare LRU, side by side.

Run from the repository root::

    python benchmarks/bench_traffic_speed.py                 # the published figures
    python benchmarks/bench_traffic_speed.py --quick         # 3 rounds, fewer capacities
    python benchmarks/bench_traffic_speed.py --drive ours --traces conversation --capacities 4096
                                                             # one untimed drive (valgrind)

The call stream is the one ``kvoffload traffic`` makes with zero transfer time (its
default LRU run, ``docs/traffic.md``): per request of the trace, in arrival order,

1. ``lookup`` of its blocks in order until the first that is not a hit;
2. ``prepare_load`` of those leading hits (pinned, so the store below cannot evict them);
3. ``prepare_store`` of the rest (the tier skips blocks it holds, evicts the least
   recently used);
4. ``complete_load`` of the hits and ``complete_store`` of the keys the store plan
   named (zero latency: every job ends before the next request);
5. ``touch`` of every block of the request, passed last first (vLLM's ``touch`` leaves
   the first key of a call most recent), so its last block ends most recent;
6. ``take_events``, drained.

vLLM managers also get ``on_new_request`` / ``on_request_finished`` and (0.34) the
blocks' token positions in their ``ReqContext``. vLLM 0.34 has no ``touch`` (it ranks
keys by request and token position): it gets the same stream without step 5, so its
victims, hits and block operations differ, and its figure is per block operation of
its own stream. The other three make the same calls with the same answers; the run
checks it (same block operations, same hits), and checks the hits against
``kvoffload traffic``'s simulator at each capacity (untimed).

A *block operation* is one key in one call (a lookup of one key is one). Keys are
vLLM-shaped ``OffloadKey`` bytes: the trace's block id as 8 bytes and group 0.

Times are CPU time of this process (``time.process_time_ns``), the garbage collector
running as usual. For each trace and capacity, each of ``--rounds`` rounds runs every
contender once, in an order rotated by one each round; a ratio is the median of the
per-round ratios, printed with their spread (lowest .. highest), never a contender's
fastest run. Needs torch and numpy for the vLLM releases; without them (or without the
wheels) the vLLM columns are skipped and say why.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bare_lru import BareLru
from bench_manager import contexts_for, hit_answer, load_vllm
from kvoffload.conformance.target.vllm_wheels import VllmRelease
from kvoffload.conformance.traffic import load, simulate
from kvoffload.conformance.traffic.traces import BLOCK_TOKENS, Request, distinct_blocks
from kvoffload.impl import OffloadManager
from manager_drivers import traffic_native, traffic_vllm
from manager_trace import Request as TraceRequest

TRACES = ("conversation", "synthetic")
CAPACITIES = (1_024, 2_048, 4_096, 8_192, 16_384, 32_768, 65_536, 131_072)
"""Capacities in blocks, each trace's up to its distinct-block count, which is added."""
QUICK_CAPACITIES = (1_024, 16_384)
OURS, BARE = "OffloadManager (lru)", "bare dict+OrderedDict LRU"
QUIET = "OffloadManager, net_events=False"
"""The same manager without its net-change events (``take_events`` reports nothing): an
adapter with events of its own runs it so; here it shows what the events cost."""
GOAL_VLLM, GOAL_VLLM_UPTO, GOAL_BARE = 0.5, 16_384, 1.1
"""Issue 25: at most 0.5 of vLLM 0.24.0 up to 16k blocks; at most 1.1 of the bare LRU."""

Stream = list[tuple[tuple[bytes, ...], tuple[bytes, ...]]]
Contender = Callable[[], tuple[int, int, int]]
"""One timed run: CPU ns, block operations, prefix hits."""


def offload_key(block: object) -> bytes:
    """A trace's block id as a vLLM ``OffloadKey``: 8 bytes of id, group index 0."""
    if not isinstance(block, int):
        raise TypeError(f"a Mooncake block id is an int, got {block!r}")
    return block.to_bytes(8, "big") + bytes(4)


def stream_of(requests: Sequence[Request]) -> tuple[Stream, list[TraceRequest]]:
    """Each request's keys in prefix order and last first (built untimed), and the same
    requests in the form :func:`bench_manager.contexts_for` takes (with the blocks'
    end-token positions)."""
    stream: Stream = []
    shaped: list[TraceRequest] = []
    for number, request in enumerate(requests):
        keys = tuple(map(offload_key, request.blocks))
        stream.append((keys, keys[::-1]))
        positions = tuple(min((i + 1) * BLOCK_TOKENS, request.tokens)
                          for i in range(len(keys)))
        shaped.append(TraceRequest(f"req-{number}", keys, positions, False))
    return stream, shaped


def timed(make: Callable[[], Any], drive: Callable[[Any], tuple[int, int]]
          ) -> tuple[int, int, int]:
    manager = make()
    gc.collect()
    start = time.process_time_ns()
    ops, hits = drive(manager)
    return time.process_time_ns() - start, ops, hits


def contenders(releases: dict[str, VllmRelease], stream: Stream,
               shaped: Sequence[TraceRequest], capacity: int) -> dict[str, Contender]:
    runs: dict[str, Contender] = {
        OURS: lambda: timed(lambda: OffloadManager(capacity),
                            lambda m: traffic_native(m, stream)),
        BARE: lambda: timed(lambda: BareLru(capacity),
                            lambda m: traffic_native(m, stream, bare=True)),
        QUIET: lambda: timed(lambda: OffloadManager(capacity, net_events=False),
                             lambda m: traffic_native(m, stream)),
    }

    def vllm_run(release: VllmRelease) -> Contender:
        def run() -> tuple[int, int, int]:
            contexts = contexts_for(release, shaped)  # fresh each run, untimed
            manager_class = release.manager_class()
            has_touch = hasattr(manager_class, "touch")
            return timed(lambda: manager_class(capacity, "lru", enable_events=True),
                         lambda m: traffic_vllm(m, stream, contexts, hit_answer(release),
                                                has_touch))
        return run

    for version, release in releases.items():
        runs[f"vLLM {version} CPUOffloadingManager"] = vllm_run(release)
    return runs


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[0], ordered[-1]


def ratios(ours: Sequence[float], theirs: Sequence[float]) -> tuple[float, float, float]:
    """The median of the per-round ratios, with the lowest and highest."""
    return spread([a / b for a, b in zip(ours, theirs, strict=True)])


def cell(figures: tuple[float, float, float]) -> str:
    median, low, high = figures
    return f"{median:.2f} ({low:.2f}..{high:.2f})"


def measure(name: str, releases: dict[str, VllmRelease], requests: Sequence[Request],
            capacity: int, rounds: int, check: bool
            ) -> tuple[dict[str, list[float]], list[str], int]:
    """Per contender, its CPU ns per block operation in each round; what the checks
    found wrong (empty when the streams agree); and our manager's prefix hits."""
    stream, shaped = stream_of(requests)
    runs = contenders(releases, stream, shaped, capacity)
    names = list(runs)
    per_round: dict[str, list[float]] = {n: [] for n in names}
    seen: dict[str, set[tuple[int, int]]] = {n: set() for n in names}
    for number in range(rounds):
        shift = number % len(names)
        for contender in names[shift:] + names[:shift]:
            elapsed, ops, hits = runs[contender]()
            per_round[contender].append(elapsed / ops)
            seen[contender].add((ops, hits))
        print(f"  {name} at {capacity:,}: round {number + 1}/{rounds} done", file=sys.stderr)
    problems = [f"{n}: ops and hits differ between rounds: {sorted(s)}"
                for n, s in seen.items() if len(s) != 1]
    same = {n: next(iter(s)) for n, s in seen.items() if len(s) == 1}
    exact = [n for n in same if n in (OURS, BARE, QUIET) or "0.24.0" in n]
    if len({same[n] for n in exact}) > 1:
        problems.append("the LRU contenders made different streams: "
                        + ", ".join(f"{n} {same[n]}" for n in exact))
    if check and OURS in same:
        expected = simulate(requests, capacity, "lru").counters.hit_blocks
        if same[OURS][1] != expected:
            problems.append(f"{OURS} hit {same[OURS][1]} blocks, kvoffload traffic's "
                            f"simulator {expected}")
    return per_round, problems, same.get(OURS, (0, 0))[1]


def report(name: str, releases: dict[str, VllmRelease], requests: Sequence[Request],
           capacities: Sequence[int], rounds: int, check: bool) -> int:
    blocks = sum(len(r.blocks) for r in requests)
    print(f"\n{name}: {len(requests):,} requests, {blocks:,} block references, "
          f"{distinct_blocks(requests):,} distinct blocks; load average "
          f"{os.getloadavg()[0]:.1f} before")
    versions = list(releases)
    columns = [OURS, BARE, QUIET] + [f"vLLM {v} CPUOffloadingManager" for v in versions]
    header = (["capacity", "hit rate"] + [f"{n} ns/op" for n in columns]
              + ["ours / bare", "ours without events / bare"]
              + [f"ours / vLLM {v}" for v in versions])
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join(["---:"] * len(header)) + " |")
    failures = 0
    goals: list[str] = []
    for capacity in capacities:
        per_round, problems, hits = measure(name, releases, requests, capacity, rounds,
                                            check)
        ours = per_round[OURS]
        row = [f"{capacity:,}", f"{hits / blocks:.3f}"]
        row += [f"{spread(per_round[n])[0]:.0f}" for n in columns]
        to_bare = ratios(ours, per_round[BARE])
        row.append(cell(to_bare))
        row.append(cell(ratios(per_round[QUIET], per_round[BARE])))
        if to_bare[0] > GOAL_BARE:
            goals.append(f"{name} at {capacity:,}: ours / bare {to_bare[0]:.2f} > {GOAL_BARE}")
        for version in versions:
            to_vllm = ratios(ours, per_round[f"vLLM {version} CPUOffloadingManager"])
            row.append(cell(to_vllm))
            if version == "0.24.0" and capacity <= GOAL_VLLM_UPTO and to_vllm[0] > GOAL_VLLM:
                goals.append(f"{name} at {capacity:,}: ours / vLLM 0.24.0 "
                             f"{to_vllm[0]:.2f} > {GOAL_VLLM}")
        print("| " + " | ".join(row) + " |", flush=True)
        for problem in problems:
            print(f"# MISMATCH at {capacity:,}: {problem}")
        failures += len(problems)
    print(f"# load average after {name}: {os.getloadavg()[0]:.1f}")
    print(f"# goals (median of per-round ratios): ours / bare <= {GOAL_BARE} at every "
          f"capacity; ours / vLLM 0.24.0 <= {GOAL_VLLM} up to {GOAL_VLLM_UPTO:,} blocks: "
          + ("all met" if not goals else "missed: " + "; ".join(goals)))
    return failures


def drive_once(name: str, trace: str, capacity: int, setup_only: bool) -> int:
    """Drive one trace's stream once on one manager, untimed: for counting instructions,
    e.g. ``valgrind --tool=cachegrind --cache-sim=no python
    benchmarks/bench_traffic_speed.py --drive ours --traces conversation --capacities
    4096`` minus the same with ``--setup-only``."""
    stream, _ = stream_of(load(trace))
    bare = name == "bare"
    manager = BareLru(capacity) if bare else OffloadManager(capacity)
    if not setup_only:
        ops, hits = traffic_native(manager, stream, bare=bare)
        print(f"{name} on {trace} at {capacity:,}: {ops} block operations, {hits} hits")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", default=",".join(TRACES),
                        help="comma-separated built-in trace names or paths")
    parser.add_argument("--capacities", default=None,
                        help="comma-separated capacities in blocks (default: 1,024 to "
                             "131,072 by doubling, below each trace's distinct-block "
                             "count, and that count)")
    parser.add_argument("--rounds", type=int, default=7,
                        help="interleaved rounds (at least 7 for published figures)")
    parser.add_argument("--releases", default="0.24.0,0.34.0",
                        help="comma-separated vLLM releases ('' for none)")
    parser.add_argument("--no-check", action="store_true",
                        help="skip the simulator's hit count check")
    parser.add_argument("--quick", action="store_true",
                        help=f"3 rounds at {', '.join(map(str, QUICK_CAPACITIES))} blocks")
    parser.add_argument("--drive", choices=["ours", "bare"],
                        help="only drive one trace's stream once on this manager, untimed "
                             "(for instruction counting under valgrind), at the one "
                             "capacity --capacities names; prints operations and hits")
    parser.add_argument("--setup-only", action="store_true",
                        help="with --drive: everything but the drive (the baseline)")
    args = parser.parse_args(argv)
    if args.drive:
        return drive_once(args.drive, args.traces, int(args.capacities or CAPACITIES[0]),
                          args.setup_only)
    if args.quick:
        args.rounds = 3
    print(f"# bench_traffic_speed: {' '.join(sys.argv)}")
    print(f"# python {platform.python_version()} on {platform.machine()}, "
          f"{os.cpu_count()} cpus, rounds {args.rounds}")
    releases, problems = load_vllm([v for v in args.releases.split(",") if v])
    for problem in problems:
        print(f"# {problem}")
    failures = 0
    for name in args.traces.split(","):
        requests = load(name)
        distinct = distinct_blocks(requests)
        if args.capacities:
            capacities = [int(c) for c in args.capacities.split(",")]
        elif args.quick:
            capacities = [c for c in QUICK_CAPACITIES if c < distinct] + [distinct]
        else:
            capacities = [c for c in CAPACITIES if c < distinct] + [distinct]
        failures += report(name, releases, requests, capacities, args.rounds,
                           not args.no_check)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
