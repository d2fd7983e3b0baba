"""What the spec's laws cost the model checker: the same exploration with and without them.

Each chosen check is explored at TINY twice per round, once with every property it
selects (the spec's laws on every call included) and once with the laws left out, in
alternating order, for several rounds; the table gives the median seconds of each, their
spread (lowest to highest) and the median ratio of the paired rounds. The state and call
counts must agree (the laws only read). The laws-alone mutant rows (``--laws-only``) are
timed as one batch: all 17 spec mutants at TINY, which is what the laws add to the
default test tier besides the per-call cost.

    python benchmarks/bench_laws.py                         # spec-lru and vLLM's form, 5 rounds
    python benchmarks/bench_laws.py --checks spec-arc --rounds 1

Times depend on the machine and on what else runs; the ratios are measured side by side
in one run. No figure here is a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proofs.modelcheck.bounds import TINY
from proofs.modelcheck.checks import CHECKS_BY_NAME, Check, laws_only
from proofs.modelcheck.explorer import Result, Setup, explore
from proofs.modelcheck.mutants import MUTANTS
from proofs.modelcheck.properties import ALL_PROPERTIES

from kvoffload.spec.laws import LAW_NAMES


def _without_laws(setup: Setup) -> Setup:
    chosen = frozenset(ALL_PROPERTIES) if setup.properties is None else setup.properties
    return replace(setup, properties=chosen - frozenset(LAW_NAMES))


def _timed(setup: Setup) -> tuple[float, Result]:
    start = time.perf_counter()
    result = explore(setup, TINY)
    return time.perf_counter() - start, result


def compare(check: Check, rounds: int) -> str:
    """One line: median seconds with and without the laws, spread, paired ratio."""
    with_laws: list[float] = []
    without: list[float] = []
    counts: set[tuple[int, int, str]] = set()
    for number in range(rounds):
        order = (True, False) if number % 2 == 0 else (False, True)
        for laws in order:
            seconds, result = _timed(check.setup if laws else _without_laws(check.setup))
            (with_laws if laws else without).append(seconds)
            counts.add((result.states, result.transitions, result.verdict))
    ratios = [a / b for a, b in zip(with_laws, without, strict=True)]
    agree = "counts agree" if len(counts) == 1 else f"COUNTS DIFFER: {sorted(counts)}"
    states, calls, _ = min(counts)
    return (f"  {check.name:42} {states:>6,} states {calls:>8,} calls | with laws "
            f"{statistics.median(with_laws):6.2f} s ({min(with_laws):.2f}-{max(with_laws):.2f})"
            f" | without {statistics.median(without):6.2f} s ({min(without):.2f}-"
            f"{max(without):.2f}) | ratio {statistics.median(ratios):.2f} "
            f"({min(ratios):.2f}-{max(ratios):.2f}) | {agree}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checks", nargs="+",
                        default=["spec-lru", "spec-vllm-form+no-stale-completions"],
                        choices=sorted(CHECKS_BY_NAME))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"TINY: {TINY.describe()}; {len(LAW_NAMES)} laws; {args.rounds} interleaved "
          "round(s); median (lowest-highest)")
    for name in args.checks:
        print(compare(CHECKS_BY_NAME[name], args.rounds), flush=True)
    batch: list[float] = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        for m in MUTANTS:
            explore(laws_only(CHECKS_BY_NAME[f"mutant:{m.name}"]).setup, TINY)
        batch.append(time.perf_counter() - start)
    print(f"  {'the 17 mutants, laws alone (--laws-only)':42} {statistics.median(batch):.2f} s "
          f"({min(batch):.2f}-{max(batch):.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
