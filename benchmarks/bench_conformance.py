"""How long the conformance suite takes: the default run, and killing PR #41795's bug.

Goals (docs/conformance.md): the default ``kvoffload check`` run (the reference
manager, default budget) well under 60 s on the project's 2-core machine, and the
median time to kill the PR #41795 variant (lookup answers MISS for a block whose store
is in flight) under 2 s. Printed side by side with the cost of the same calls replayed
without Hypothesis, so the suite's own overhead shows as a ratio.

    python benchmarks/bench_conformance.py [--kills 10] [--runs 1] [--rounds 5]
    python benchmarks/bench_conformance.py --boundary BEFORE_TREE --rounds 3 --kills 10
    python benchmarks/bench_conformance.py --round-trips
    python benchmarks/bench_conformance.py --host-vs-in-process --rounds 5 [--boundary TREE]

The overhead ratio (a whole ``check`` call / a lockstep call alone) is measured in
interleaved rounds, each timing a short check and then the lockstep alone, so both
see the same machine load; the median of the per-round ratios is printed with its
spread.

Not a test: timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

from kvoffload.conformance.command.runner import run_check
from kvoffload.conformance.config import CheckConfig, describe_tiers
from kvoffload.conformance.judge.lockstep import Lockstep
from kvoffload.conformance.judge.machine import key_pool
from kvoffload.conformance.target.native import NativeAdapter
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
    from kvoffload.conformance.selftest import mutants

    times = []
    for seed in range(1, count + 1):
        result = run_check("kvoffload.conformance.selftest.mutants:LookupPendingAsMiss",
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
    # Typed in newer Hypothesis releases, untyped in older ones: a cast is right for both
    # (an ignore comment is unused, an error under --strict, on one of them).
    run = cast("Callable[..., None]", run_state_machine_as_test)
    start = time.perf_counter()
    run(PerOperation, settings=options)
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


_KILL = """
import json, statistics, sys
from kvoffload.conformance.config import CheckConfig
from kvoffload.conformance.command.runner import run_check
out = []
for seed in range(1, {kills} + 1):
    r = run_check("vllm==0.20.2", CheckConfig(seed=seed, stop_at_first=True, assume=(
        "unique-keys", "no-misuse", "no-stale-completions", "no-reset-in-flight")))
    if r.violation is None or r.violation.prop != "lookup":
        sys.exit(f"vllm==0.20.2 not killed by lookup at seed {{seed}}")
    out.append((r.seconds, r.extra.get("host_start_s")))
print(json.dumps(out))
"""
"""PR #41795's kill in vLLM 0.20.2's own code: per seed, (seconds from the first call to
the verdict, the host's start-up or None in process). Only what both trees have."""


def _tree_env(tree: str | None) -> dict[str, str]:
    """The environment of a run of the suite in ``tree`` (None: this tree)."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            f"{tree}/{part}" for part in ("spec", "impl", "conformance"))
    return env


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(wall s, CPU s of the process and all it waited for, standard output)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{argv} exited {done.returncode}: {done.stderr[-2000:]}")
    return wall, cpu, done.stdout


def boundary_rounds(before: str, rounds: int, kills: int) -> None:
    """Issue 22: the default ``kvoffload check`` (a separate process: CPU summed over the
    judge and its host) and PR #41795's kill in vLLM 0.20.2, the suite in ``before`` (a
    checkout of the tree before the boundary) and this tree, alternating, ``rounds``
    times; medians with their spread."""
    import tempfile

    rows: dict[str, list[tuple[float, float, int]]] = {"before": [], "after": []}
    kills_by: dict[str, list[tuple[float, float | None]]] = {"before": [], "after": []}
    for round_ in range(rounds):
        for name, tree in (("before", before), ("after", None)):
            with tempfile.TemporaryDirectory() as report:
                wall, cpu, _ = _timed(
                    [sys.executable, "-m", "kvoffload.conformance.cli", "check", "--seed",
                     str(round_ + 1), "--no-database", "--quiet", "--report-dir", report],
                    _tree_env(tree))
                steps = json.loads((Path(report) / "report.json").read_text())["run"]["steps"]
            rows[name].append((wall, cpu, steps))
            if kills:
                _, _, out = _timed([sys.executable, "-c", _KILL.format(kills=kills)],
                                   _tree_env(tree))
                kills_by[name].extend(json.loads(out.splitlines()[-1]))
            print(f"round {round_ + 1} {name}: {wall:.1f} s wall, {cpu:.1f} s CPU, "
                  f"{steps} steps", flush=True)
    for name, got in rows.items():
        per_wall = [steps / wall for wall, _, steps in got]
        per_cpu = [steps / cpu for _, cpu, steps in got]
        print(f"{name}: default run {_spread([w for w, _, _ in got], 's wall')}; steps per "
              f"wall-second {_spread(per_wall)}; steps per CPU-second {_spread(per_cpu)}")
    ratios = [a[0] / b[0] for a, b in zip(rows["after"], rows["before"], strict=True)]
    print(f"after / before, wall time of the default run, per round: {_spread(ratios)} "
          f"(goal: at most 1.25)")
    for name, got_kills in kills_by.items():
        if got_kills:
            starts = [s for _, s in got_kills if s is not None]
            print(f"{name}: vllm==0.20.2 kill, first call to verdict, {len(got_kills)} runs: "
                  f"{_spread([t for t, _ in got_kills], 's')}"
                  + (f"; host start-up {_spread(starts, 's')}" if starts else ""))


def host_vs_in_process(rounds: int, examples: int | None = None,
                       before: str | None = None) -> None:
    """Issue 22, item 5: the default ``kvoffload check`` of the reference with its target
    in a host (the default) and in the judge's process (``KVOFFLOAD_IN_PROCESS=1``), this
    tree both times, alternating (which goes first alternates too), ``rounds`` times.

    Each run is the whole command, a process of its own, timed from its start to its exit:
    the judge's imports, the host's start-up (and its end) are inside the wall time. CPU
    is the command's and every process it waited for (the judge and its host, summed).
    With ``before`` (a checkout of an earlier tree), that tree's host run is timed in the
    same rounds too."""
    import tempfile

    rows: dict[str, list[tuple[float, float, int]]] = {"host": [], "in process": []}
    order: list[tuple[str, bool, str | None]] = [("host", False, None),
                                                 ("in process", True, None)]
    if before is not None:
        rows["host, before"] = []
        order.append(("host, before", False, before))
    for round_ in range(rounds):
        for name, local, tree in order if round_ % 2 == 0 else order[::-1]:
            env = _tree_env(tree)
            env.pop("KVOFFLOAD_IN_PROCESS", None)
            if local:
                env["KVOFFLOAD_IN_PROCESS"] = "1"
            budget = [] if examples is None else ["--max-examples", str(examples)]
            with tempfile.TemporaryDirectory() as report:
                wall, cpu, _ = _timed(
                    [sys.executable, "-m", "kvoffload.conformance.cli", "check", "--seed",
                     str(round_ + 1), "--no-database", "--quiet", "--report-dir", report,
                     *budget], env)
                steps = json.loads((Path(report) / "report.json").read_text())["run"]["steps"]
            rows[name].append((wall, cpu, steps))
            print(f"round {round_ + 1} {name}: {wall:.2f} s wall, {cpu:.2f} s CPU, {steps} "
                  f"steps (load {os.getloadavg()[0]:.1f})", flush=True)
    for name, got in rows.items():
        print(f"{name}: default run {_spread([w for w, _, _ in got], 's wall')}; CPU "
              f"{_spread([c for _, c, _ in got], 's')}; steps per wall-second "
              f"{_spread([s / w for w, _, s in got])}; steps per CPU-second "
              f"{_spread([s / c for _, c, s in got])}")
    walls = [a[0] / b[0] for a, b in zip(rows["host"], rows["in process"], strict=True)]
    cpus = [a[1] / b[1] for a, b in zip(rows["host"], rows["in process"], strict=True)]
    print(f"host / in process, wall time per round: {_spread(walls)} (goal: at most 1.25); "
          f"CPU per round: {_spread(cpus)}")
    if before is not None:
        walls = [a[0] / b[0] for a, b in zip(rows["host, before"], rows["in process"],
                                             strict=True)]
        print(f"host, before / in process, wall time per round: {_spread(walls)}")


def round_trips(examples: int = 60, seed: int = 1) -> tuple[int, int, int]:
    """(round trips, writes, steps) of one ``kvoffload check`` of the reference in a
    host. A round trip is a wait of the judge for an answer it has not read yet
    (counted by wrapping ``HostProcess._line``, which every such wait goes through);
    writes are the judge's writes to the host (``HostProcess.flush`` with something to
    send): one per round trip when the calls wait for the next wait, up to one per call
    while the judge writes calls as it posts them (:mod:`~kvoffload.conformance.target.polling`)."""
    from kvoffload.conformance.target import remote

    waits, writes = [0], [0]
    line, flush = remote.HostProcess._line, remote.HostProcess.flush

    def counting_line(self: remote.HostProcess, timeout: float, during: str) -> bytes:
        waits[0] += 1
        return line(self, timeout, during)

    def counting_flush(self: remote.HostProcess) -> None:
        if self.outgoing:
            writes[0] += 1
        flush(self)

    remote.HostProcess._line = counting_line  # type: ignore[method-assign]  # counting, restored below
    remote.HostProcess.flush = counting_flush  # type: ignore[method-assign]  # counting, restored below
    try:
        os.environ.pop("KVOFFLOAD_IN_PROCESS", None)  # the default: a host
        result = run_check("kvoffload.impl:OffloadManager",
                           CheckConfig(seed=seed, max_examples=examples))
    finally:
        remote.HostProcess._line = line  # type: ignore[method-assign]  # restored
        remote.HostProcess.flush = flush  # type: ignore[method-assign]  # restored
    if result.verdict != "conforms":
        raise SystemExit(f"the reference did not conform: {result.violation}")
    return waits[0], writes[0], result.steps


def _spread(values: list[float], unit: str = "") -> str:
    return (f"median {statistics.median(values):,.3g}{' ' + unit if unit else ''} "
            f"(spread {min(values):,.3g} to {max(values):,.3g})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10, help="PR #41795 kills to time")
    parser.add_argument("--runs", type=int, default=1, help="default runs to time")
    parser.add_argument("--rounds", type=int, default=5, help="overhead-ratio rounds")
    parser.add_argument("--boundary", metavar="BEFORE_TREE", default=None,
                        help="issue 22: time the default kvoffload check and vLLM 0.20.2's "
                             "kill in BEFORE_TREE (a checkout) and in this tree, alternating "
                             "--rounds times")
    parser.add_argument("--round-trips", action="store_true",
                        help="issue 22: count the judge's round trips to its host in "
                             "kvoffload check --max-examples 60 --seed 1 of the reference")
    parser.add_argument("--host-vs-in-process", action="store_true",
                        help="issue 22: time the default kvoffload check of the reference "
                             "with its target in a host and in process, alternating --rounds "
                             "times (whole commands: start-up included); with --boundary "
                             "BEFORE_TREE, that tree's host run too")
    parser.add_argument("--max-examples", type=int, default=None,
                        help="with --host-vs-in-process: a smaller budget than the default")
    args = parser.parse_args()
    if args.host_vs_in_process:
        host_vs_in_process(args.rounds, args.max_examples, args.boundary)
        return
    if args.round_trips:
        trips, writes, steps = round_trips()
        print(f"round trips to the host, kvoffload check --max-examples 60 --seed 1: "
              f"{trips:,} for {steps:,} steps ({trips / steps:.2f} per step), in "
              f"{writes:,} writes")
        return
    if args.boundary is not None:
        boundary_rounds(args.boundary, args.rounds, args.kills)
        return
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
