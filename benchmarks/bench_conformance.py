"""How long the conformance suite takes: the default run, and killing PR #41795's bug.

Goals (docs/conformance.md): the default ``kvoffload check`` run (the reference
manager, default budget) well under 60 s on the project's 2-core machine, and the
median time to kill the PR #41795 variant (lookup answers MISS for a block whose store
is in flight) under 2 s. Printed side by side with the cost of the same calls replayed
without Hypothesis, so the suite's own overhead shows as a ratio.

    python benchmarks/bench_conformance.py [--kills 10] [--runs 1]

Not a test: timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import statistics
import time

from kvoffload.conformance.config import CheckConfig
from kvoffload.conformance.lockstep import Lockstep
from kvoffload.conformance.machine import key_pool
from kvoffload.conformance.native import NativeAdapter
from kvoffload.conformance.runner import run_check
from kvoffload.impl import OffloadManager
from kvoffload.spec import Call, Op

GOAL_DEFAULT_RUN_S = 60.0
GOAL_KILL_S = 2.0


def default_runs(runs: int) -> list[tuple[float, int, int]]:
    """(seconds, examples, calls) of ``kvoffload check`` on the reference, default budget."""
    out = []
    for seed in range(1, runs + 1):
        result = run_check("kvoffload.impl:OffloadManager", CheckConfig(seed=seed))
        if result.verdict != "conforms":
            raise SystemExit(f"the reference did not conform (seed {seed}): {result.violation}")
        out.append((result.seconds, result.examples, result.steps))
    return out


def kill_times(count: int) -> list[float]:
    """Seconds until ``kvoffload check`` reports (found and shrunk) the PR #41795 variant."""
    from kvoffload.conformance import mutants

    times = []
    for seed in range(1, count + 1):
        result = run_check("kvoffload.conformance.mutants:LookupPendingAsMiss",
                           CheckConfig(seed=seed), obj=mutants.LookupPendingAsMiss)
        if result.violation is None or result.violation.prop != "lookup":
            raise SystemExit(f"PR #41795 variant not killed by 'lookup' (seed {seed})")
        times.append(result.seconds)
    return times


def lockstep_only(calls: int) -> float:
    """Seconds per call for the lockstep driver alone (no Hypothesis), on a fixed mix."""
    keys = key_pool(4)
    cycle = []
    for i, key in enumerate(keys):
        other = keys[(i + 3) % len(keys)]
        cycle += [Call(Op.PREPARE_STORE, (key, other)), Call(Op.LOOKUP, (key,)),
                  Call(Op.COMPLETE_STORE, (key, other)), Call(Op.PREPARE_LOAD, (key,)),
                  Call(Op.TOUCH, (other, key)), Call(Op.COMPLETE_LOAD, (key,)),
                  Call(Op.TAKE_EVENTS)]
    config = CheckConfig(capacity=4)
    done = 0
    start = time.perf_counter()
    while done < calls:
        run = Lockstep(NativeAdapter(OffloadManager(4)), config)
        for call in cycle:
            run.step(call)
        done += len(cycle)
    return (time.perf_counter() - start) / done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10, help="PR #41795 kills to time")
    parser.add_argument("--runs", type=int, default=1, help="default runs to time")
    args = parser.parse_args()
    config = CheckConfig()
    print(f"default budget: {config.max_examples} examples x {config.steps} calls, tiers "
          f"1..{config.capacity}")

    runs = default_runs(args.runs)
    worst = max(s for s, _, _ in runs)
    per_call = sum(s for s, _, _ in runs) / sum(c for _, _, c in runs)
    for seconds, examples, calls in runs:
        print(f"default run (reference, conforms): {seconds:6.2f} s  {examples} examples, "
              f"{calls} calls, {calls / seconds:,.0f} calls/s")
    print(f"  worst / goal ({GOAL_DEFAULT_RUN_S:.0f} s): {worst / GOAL_DEFAULT_RUN_S:.2f}")

    times = kill_times(args.kills)
    median = statistics.median(times)
    print(f"PR #41795 kill (found + shrunk), {len(times)} seeds: median {median:.3f} s, "
          f"max {max(times):.3f} s")
    print(f"  median / goal ({GOAL_KILL_S:.0f} s): {median / GOAL_KILL_S:.3f}")

    alone = lockstep_only(20_000)
    print(f"lockstep alone: {alone * 1e6:.0f} us/call; whole check: {per_call * 1e6:.0f} "
          f"us/call; ratio {per_call / alone:.2f} (Hypothesis, generation, drain)")


if __name__ == "__main__":
    main()
