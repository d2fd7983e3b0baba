"""What the spec's laws cost the model checker, measured side by side.

For each chosen check, its comparison row (every property but the laws) and its
laws-alone row (``--laws-only``: the 33 laws on every call and the invariants, nothing
else) are explored at TINY in alternating order for several rounds; each line gives the
median seconds of both, their spread (lowest to highest) and the median ratio of the
paired rounds. Both must reach the same states and calls. The last lines time what the
laws add to the default test tier: its laws-alone rows (``spec-lru`` and the 17 spec
mutants), against all its TINY comparison rows with ``--tier`` (one round each).

    python benchmarks/bench_laws.py                     # spec-lru and vLLM's form, 5 rounds
    python benchmarks/bench_laws.py --checks spec-arc --rounds 1
    python benchmarks/bench_laws.py --checks --tier --rounds 1

Times depend on the machine and on what else runs; the ratios are measured side by side
in one run. No figure here is a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proofs.modelcheck.bounds import TINY
from proofs.modelcheck.checks import (
    CHECKS,
    CHECKS_BY_NAME,
    LAWS_ROWS,
    SLOW_LAWS_ROWS,
    Check,
    laws_only,
)
from proofs.modelcheck.explorer import Result, Setup, explore

from kvoffload.spec.laws import LAW_NAMES


def _timed(setup: Setup) -> tuple[float, Result]:
    start = time.perf_counter()
    result = explore(setup, TINY)
    return time.perf_counter() - start, result


def compare(check: Check, rounds: int) -> str:
    """One line: median seconds of the comparison row and of the laws-alone row, their
    spread, and the median ratio of the paired rounds (laws alone / comparison)."""
    alone: list[float] = []
    compared: list[float] = []
    counts: set[tuple[int, int]] = set()
    for number in range(rounds):
        order = (True, False) if number % 2 == 0 else (False, True)
        for laws in order:
            seconds, result = _timed(laws_only(check).setup if laws else check.setup)
            (alone if laws else compared).append(seconds)
            counts.add((result.states, result.transitions))
    ratios = [a / b for a, b in zip(alone, compared, strict=True)]
    agree = "counts agree" if len(counts) == 1 else f"COUNTS DIFFER: {sorted(counts)}"
    states, calls = min(counts)
    return (f"  {check.name:38} {states:>6,} states {calls:>8,} calls | comparison "
            f"{statistics.median(compared):6.2f} s ({min(compared):.2f}-{max(compared):.2f})"
            f" | laws alone {statistics.median(alone):6.2f} s ({min(alone):.2f}-"
            f"{max(alone):.2f}) | ratio {statistics.median(ratios):.2f} "
            f"({min(ratios):.2f}-{max(ratios):.2f}) | {agree}")


def _batch(setups: list[Setup]) -> float:
    start = time.perf_counter()
    for setup in setups:
        explore(setup, TINY)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checks", nargs="*",
                        default=["spec-lru", "spec-vllm-form+no-stale-completions"],
                        choices=sorted(CHECKS_BY_NAME))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tier", action="store_true",
                        help="also time every TINY comparison row of the default tier")
    args = parser.parse_args()
    print(f"TINY: {TINY.describe()}; {len(LAW_NAMES)} laws; {args.rounds} interleaved "
          "round(s); median (lowest-highest)")
    for name in args.checks:
        print(compare(CHECKS_BY_NAME[name], args.rounds), flush=True)
    laws_rows = [laws_only(CHECKS_BY_NAME[name]).setup for name, preset in LAWS_ROWS
                 if preset == "tiny" and name not in SLOW_LAWS_ROWS]
    batch = [_batch(laws_rows) for _ in range(args.rounds)]
    print(f"  the default tier's {len(laws_rows)} laws-alone rows: "
          f"{statistics.median(batch):.2f} s ({min(batch):.2f}-{max(batch):.2f})", flush=True)
    if args.tier:
        rows = [c.setup for c in CHECKS if "tiny" in c.presets]
        print(f"  the default tier's {len(rows)} TINY comparison rows (one round): "
              f"{_batch(rows):.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
