"""CPU time of one ``kvoffload traffic`` simulation of Mooncake's conversation trace.

Run from the repository root::

    python benchmarks/bench_traffic.py

Reads the trace once, then simulates it (zero latency, tri-state) under LRU and ARC at
the paper's local cache size (3M tokens: 5,859 blocks) and at the infinite cache
(182,790 blocks), ``--repeats`` times each in interleaved rounds, and prints the median
CPU time of this process (``time.process_time``) with the spread. Absolute times, for
``docs/traffic.md``; no ratio is claimed.
"""

from __future__ import annotations

import argparse
import statistics
import time

from kvoffload.conformance.traffic import load, simulate
from kvoffload.conformance.traffic.traces import distinct_blocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    started = time.process_time()
    requests = load("conversation")
    print(f"read the trace: {time.process_time() - started:.2f} s CPU")
    cases = [(policy, capacity) for capacity in (5859, distinct_blocks(requests))
             for policy in ("lru", "arc")]
    times: dict[tuple[str, int], list[float]] = {case: [] for case in cases}
    for _ in range(args.repeats):
        for policy, capacity in cases:
            started = time.process_time()
            simulate(requests, capacity, policy)
            times[policy, capacity].append(time.process_time() - started)
    for (policy, capacity), runs in times.items():
        print(f"{policy.upper()} at {capacity:,} blocks: median "
              f"{statistics.median(runs):.2f} s CPU ({min(runs):.2f} .. {max(runs):.2f}, "
              f"{len(runs)} runs)")


if __name__ == "__main__":
    main()
