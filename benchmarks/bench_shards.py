"""Scale-out with the pytest plugin: one target's budget split into shards, run by
pytest-xdist on 2 workers versus 1, on the same budget and seeds.

    python benchmarks/bench_shards.py [--rounds 3] [--max-examples 300] [--shards 4]

Each round runs both configurations back to back (order alternating), in fresh
processes: ``pytest --kvoffload-target=... --kvoffload-shards N -n W`` with W = 1, 2.
Printed: each round's wall times and their ratio (2 workers / 1 worker; 0.5 is a
perfect halving), then the median ratio and the spread, with the load average. On a
shared machine the ratio says as much about the other jobs as about the plugin.

Not a test: timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

TARGET = "kvoffload.impl:OffloadManager"


def one_run(workers: int, args: argparse.Namespace) -> float:
    """Wall seconds of one pytest session checking TARGET in ``args.shards`` shards."""
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   f"--rootdir={folder}", f"--kvoffload-target={TARGET}",
                   f"--kvoffload-shards={args.shards}",
                   f"--kvoffload-max-examples={args.max_examples}",
                   f"--kvoffload-seed={args.seed}", "--kvoffload-no-database",
                   f"--kvoffload-report-dir={folder}/report", "-n", str(workers)]
        start = time.perf_counter()
        done = subprocess.run(command, cwd=folder, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"pytest failed ({done.returncode}):\n{done.stdout[-3000:]}")
        return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-examples", type=int, default=300)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"{TARGET}: {args.max_examples} examples in {args.shards} shards, seed {args.seed}; "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    ratios = []
    for round_ in range(args.rounds):
        order = (1, 2) if round_ % 2 == 0 else (2, 1)
        times = {workers: one_run(workers, args) for workers in order}
        ratios.append(times[2] / times[1])
        print(f"round {round_ + 1}: 1 worker {times[1]:.2f} s, 2 workers {times[2]:.2f} s, "
              f"ratio {ratios[-1]:.2f}")
    spread = f"{min(ratios):.2f} to {max(ratios):.2f}"
    print(f"2-worker / 1-worker wall time: median {statistics.median(ratios):.2f} "
          f"(spread {spread}, {args.rounds} rounds); load average "
          f"{os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
