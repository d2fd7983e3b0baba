"""How long the conformance suite takes: the default run, and killing PR #41795's bug.

Goals (docs/conformance.md): the default ``kvoffload check`` run (the reference
manager, default budget) well under 60 s on the project's 2-core machine, and the
median time to kill the PR #41795 variant (lookup answers MISS for a block whose store
is in flight) under 2 s. Printed side by side with the cost of the same calls replayed
without Hypothesis, so the suite's own overhead shows as a ratio.

    python benchmarks/bench_conformance.py [--kills 10] [--runs 1] [--rounds 5]

The overhead ratio (a whole ``check`` call / a lockstep call alone) is measured in
interleaved rounds, each timing a short check and then the lockstep alone, so both
see the same machine load; the median of the per-round ratios is printed with its
spread.

Not a test: timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import statistics
import time

from kvoffload.conformance.config import CheckConfig, describe_tiers
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
                           CheckConfig(seed=seed, stop_at_first=True),
                           obj=mutants.LookupPendingAsMiss)
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


def overhead_rounds(rounds: int, examples: int = 60) -> list[float]:
    """Per-round ratios: seconds per call of a whole check (the reference, ``examples``
    examples) over seconds per call of the lockstep alone, measured right after it."""
    ratios = []
    for round_ in range(rounds):
        result = run_check("kvoffload.impl:OffloadManager",
                           CheckConfig(seed=1000 + round_, max_examples=examples))
        if result.verdict != "conforms":
            raise SystemExit(f"the reference did not conform: {result.violation}")
        whole = result.seconds / result.steps
        ratios.append(whole / lockstep_only(result.steps))
    return ratios


def rule_per_operation(examples: int, steps: int = 150) -> float:
    """Seconds per call of the same lockstep driven the usual Hypothesis way: one rule
    per operation, every argument drawn by Hypothesis, preconditions as ``precondition``
    (the design the suite's machine departs from; docs/conformance.md)."""
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis import strategies as st
    from hypothesis.stateful import (
        RuleBasedStateMachine,
        initialize,
        precondition,
        rule,
        run_state_machine_as_test,
    )

    from kvoffload.spec import Phase as BlockPhase

    keys = st.sampled_from(key_pool(4))
    calls = [0]

    class PerOperation(RuleBasedStateMachine):
        run: Lockstep

        @initialize(capacity=st.integers(1, 4))
        def begin(self, capacity: int) -> None:
            self.run = Lockstep(NativeAdapter(OffloadManager(capacity)),
                                CheckConfig(capacity=capacity))

        def do(self, call: Call) -> None:
            calls[0] += 1
            self.run.step(call)

        @rule(key=keys)
        def lookup(self, key: str) -> None:
            self.do(Call(Op.LOOKUP, (key,)))

        @rule(chosen=st.lists(keys, min_size=1, max_size=5))
        def prepare_store(self, chosen: list[str]) -> None:
            self.do(Call(Op.PREPARE_STORE, tuple(chosen)))

        @precondition(lambda self: bool(self.run.state.keys_in(BlockPhase.STORING)))
        @rule(data=st.data(), success=st.booleans())
        def complete_store(self, data: st.DataObject, success: bool) -> None:
            storing = sorted(self.run.state.keys_in(BlockPhase.STORING), key=str)
            chosen = data.draw(st.lists(st.sampled_from(storing), min_size=1, unique=True))
            self.do(Call(Op.COMPLETE_STORE, tuple(chosen), success=success))

        @precondition(lambda self: bool(self.run.state.keys_in(BlockPhase.READY)))
        @rule(data=st.data())
        def prepare_load(self, data: st.DataObject) -> None:
            ready = sorted(self.run.state.keys_in(BlockPhase.READY), key=str)
            self.do(Call(Op.PREPARE_LOAD, (data.draw(st.sampled_from(ready)),)))

        @precondition(lambda self: any(b.readers for b in self.run.state.blocks))
        @rule(data=st.data())
        def complete_load(self, data: st.DataObject) -> None:
            read = sorted((b.key for b in self.run.state.blocks if b.readers), key=str)
            self.do(Call(Op.COMPLETE_LOAD, (data.draw(st.sampled_from(read)),)))

        @rule(chosen=st.lists(keys, min_size=1, max_size=5))
        def touch(self, chosen: list[str]) -> None:
            self.do(Call(Op.TOUCH, tuple(chosen)))

        @rule()
        def reset_cache(self) -> None:
            self.do(Call(Op.RESET_CACHE))

        @rule()
        def take_events(self) -> None:
            self.do(Call(Op.TAKE_EVENTS))

    options = settings(max_examples=examples, stateful_step_count=steps, deadline=None,
                       database=None, phases=(Phase.generate,),
                       suppress_health_check=list(HealthCheck))
    start = time.perf_counter()
    run_state_machine_as_test(PerOperation, settings=options)  # type: ignore[no-untyped-call]  # hypothesis ships it untyped
    return (time.perf_counter() - start) / calls[0]


def design_rounds(rounds: int, examples: int = 40) -> list[float]:
    """Per-round speed-ups: seconds per call of the rule-per-operation machine over
    seconds per call of the suite's machine, interleaved."""
    ratios = []
    for round_ in range(rounds):
        result = run_check("kvoffload.impl:OffloadManager",
                           CheckConfig(seed=2000 + round_, max_examples=examples))
        ours = result.seconds / result.steps
        ratios.append(rule_per_operation(examples) / ours)
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10, help="PR #41795 kills to time")
    parser.add_argument("--runs", type=int, default=1, help="default runs to time")
    parser.add_argument("--rounds", type=int, default=5, help="overhead-ratio rounds")
    args = parser.parse_args()
    config = CheckConfig()
    print(f"default budget: {config.max_examples} examples x {config.steps} calls, "
          f"{describe_tiers(config.capacity)}")

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
          f"us/call (not interleaved)")
    speedups = design_rounds(args.rounds)
    print(f"rule-per-operation machine / the suite's machine, seconds per call, "
          f"{len(speedups)} interleaved rounds: median {statistics.median(speedups):.2f} "
          f"(spread {min(speedups):.2f} to {max(speedups):.2f})")
    ratios = overhead_rounds(args.rounds)
    print(f"whole check / lockstep alone, {len(ratios)} interleaved rounds: median "
          f"{statistics.median(ratios):.2f} (spread {min(ratios):.2f} to {max(ratios):.2f}; "
          f"Hypothesis, generation, drain)")


if __name__ == "__main__":
    main()
