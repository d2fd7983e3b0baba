"""Cost per block operation of ``OffloadManager`` against vLLM's managers, side by side.

Run from the repository root::

    python benchmarks/bench_manager.py            # the published figures
    python benchmarks/bench_manager.py --quick    # a smaller, faster run

What it does, in one run:

1. builds a seeded trace (:mod:`manager_trace`: prefix reuse with zipf popularity,
   multi-turn continuations; lookups, loads, stores, completions and failures, events
   drained every request; no ``touch``, no duplicate keys);
2. checks agreement (:mod:`manager_agreement`): ``OffloadManager`` against vLLM 0.24.0
   in lockstep on the whole trace (lookups, rejections, keys, victims, slots up to
   renaming, event replay), and ``OffloadManager``, 0.24.0 and 0.34.0 against the spec
   on a smaller trace (0.34.0's victims are allowed to differ: it ranks by request);
3. times the trace on ``OffloadManager`` (LRU), a bare dict-and-OrderedDict LRU, the
   vLLM facade over ``OffloadManager``, and vLLM 0.24.0's and 0.34.0's
   ``CPUOffloadingManager`` loaded from their PyPI wheels (:mod:`vllm_wheels`),
   interleaved, ``--repeats`` times, keeping each one's fastest run;
4. times eviction with 60,000 pinned (or in-flight) blocks against none
   (:mod:`manager_pinned`).

Times are CPU time of this process (``time.process_time_ns``), so that other
processes competing for the cores do not count; the driver loop's own cost is in
every figure alike. Needs torch and numpy for the vLLM releases (vLLM's base module
imports them); without them the vLLM columns are skipped and say why.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bare_lru import BareLru
from kvoffload.conformance.vllm_wheels import (
    VllmRelease,
    VllmReleaseUnavailable,
    load_release,
)
from kvoffload.impl import OffloadManager
from kvoffload.impl.vllm_facade import VllmFacade
from kvoffload.impl.vllm_types import VllmLookupResult, VllmTypes
from manager_agreement import (
    Agreement,
    NativeSide,
    VllmSide,
    check_against_spec,
    lockstep_with_vllm,
)
from manager_drivers import drive_native, drive_vllm
from manager_pinned import MODES, fill, native_round_cost, vllm_round_cost
from manager_trace import Request, TraceShape, block_key, make_requests

VLLM_RELEASES = ("0.24.0", "0.34.0")
SMALL = TraceShape(requests=600, prompts=120, prompt_blocks=(2, 12), own_blocks=(1, 4),
                   capacity=96, delay=3)


def contexts_for(release: VllmRelease, requests: Sequence[Request]) -> list[Any]:
    """One ``ReqContext`` per request, with the key positions vLLM's scheduler records."""
    context_class = release.base().ReqContext
    contexts = []
    for request in requests:
        context = context_class(req_id=request.req_id)
        if hasattr(context, "set_offload_key_position"):
            for key, position in zip(request.keys, request.positions, strict=True):
                context.set_offload_key_position(key, position)
        contexts.append(context)
    return contexts


def hit_answer(release: VllmRelease) -> object:
    lookup_result = getattr(release.base(), "LookupResult", None)
    return True if lookup_result is None else lookup_result.HIT


def load_vllm() -> tuple[dict[str, VllmRelease], list[str]]:
    releases, problems = {}, []
    for version in VLLM_RELEASES:
        try:
            release = load_release(version)
            release.manager_class()
            releases[version] = release
        except VllmReleaseUnavailable as missing:
            problems.append(f"vLLM {version} skipped: {missing}")
    return releases, problems


def print_agreement(name: str, report: Agreement) -> None:
    checked = sum(report.checked.values())
    line = f"  {name:44s} {checked:>9,} comparisons, {report.total} mismatches"
    if report.policy_differences:
        line += f" ({report.policy_differences} stores chose other victims than LRU: policy)"
    print(line)
    for aspect in sorted(report.checked):
        print(f"      {aspect:34s} {report.checked[aspect]:>9,}  mismatches "
              f"{report.mismatches[aspect]}")
    for example in report.examples:
        print(f"      e.g. {example}")


def agreement(releases: dict[str, VllmRelease], requests: Sequence[Request],
              shape: TraceShape) -> int:
    print("\nAgreement (untimed)")
    total = 0
    if "0.24.0" in releases:
        release = releases["0.24.0"]
        theirs = VllmSide(release.manager_class()(shape.capacity, "lru", enable_events=True),
                          contexts_for(release, requests))
        report = lockstep_with_vllm(theirs, requests, shape, same_victims=True)
        print_agreement("OffloadManager vs vLLM 0.24.0, full trace", report)
        total += report.total
    small = make_requests(SMALL)
    targets: list[tuple[str, Callable[[], VllmSide | NativeSide], bool]] = [
        ("OffloadManager vs spec, small trace",
         lambda: NativeSide(OffloadManager(SMALL.capacity)), True)]
    for version, release in releases.items():
        targets.append((f"vLLM {version} vs spec, small trace",
                        lambda r=release: VllmSide(
                            r.manager_class()(SMALL.capacity, "lru", enable_events=True),
                            contexts_for(r, small)),
                        version == "0.24.0"))
    for name, make, exact in targets:
        report = check_against_spec(make(), small, SMALL, exact_victims=exact)
        print_agreement(name, report)
        total += report.total
    print(f"  mismatches in all: {total}")
    return total


def timed_runs(releases: dict[str, VllmRelease], requests: Sequence[Request],
               shape: TraceShape, repeats: int) -> dict[str, tuple[float, int]]:
    """Each contender's fastest CPU ns per block operation, and its operation count."""
    contenders: dict[str, Callable[[], tuple[int, int]]] = {}
    contenders["OffloadManager (lru)"] = lambda: _run(
        lambda: OffloadManager(shape.capacity), lambda m: drive_native(m, requests, shape))
    contenders["bare dict+OrderedDict LRU"] = lambda: _run(
        lambda: BareLru(shape.capacity), lambda m: drive_native(m, requests, shape, bare=True))
    no_contexts = [None] * len(requests)
    contenders["VllmFacade over OffloadManager"] = lambda: _run(
        lambda: VllmFacade(shape.capacity, "lru", True, types=VllmTypes.stand_ins()),
        lambda m: drive_vllm(m, requests, shape, no_contexts, VllmLookupResult.HIT))
    for version, release in releases.items():
        contenders[f"vLLM {version} CPUOffloadingManager"] = (
            lambda r=release: _run_vllm(r, requests, shape))
    best: dict[str, tuple[float, int]] = {}
    for round_number in range(repeats):
        for name, run in contenders.items():
            elapsed, (ops, _) = run()
            per_op = elapsed / ops
            if name not in best or per_op < best[name][0]:
                best[name] = (per_op, ops)
        print(f"  round {round_number + 1}/{repeats} done", file=sys.stderr)
    return best


def _run(make: Callable[[], Any], drive: Callable[[Any], tuple[int, int]]
         ) -> tuple[int, tuple[int, int]]:
    manager = make()
    gc.collect()
    start = time.process_time_ns()
    result = drive(manager)
    return time.process_time_ns() - start, result


def _run_vllm(release: VllmRelease, requests: Sequence[Request], shape: TraceShape
              ) -> tuple[int, tuple[int, int]]:
    contexts = contexts_for(release, requests)  # built outside the timing, fresh each run
    return _run(lambda: release.manager_class()(shape.capacity, "lru", enable_events=True),
                lambda m: drive_vllm(m, requests, shape, contexts, hit_answer(release)))


def pinned_runs(releases: dict[str, VllmRelease], pinned: int, evictable: int,
                rounds: int) -> None:
    print(f"\nEviction with {pinned:,} unevictable blocks against none "
          f"({evictable:,} evictable; one store evicting one block, then its completion; "
          f"CPU ns per round, cheapest 100-round batch, garbage collector paused)")
    print(f"  {'manager':34s}" + "".join(f"{mode:>12s}" for mode in MODES)
          + "  pinned/none  in flight/none")
    rows: list[tuple[str, Callable[[str], float]]] = []
    for policy in ("lru", "arc"):
        rows.append((f"OffloadManager ({policy})", lambda mode, p=policy: native_round_cost(
            lambda c: OffloadManager(c, policy=p), mode, pinned, evictable, rounds)))
    rows.append(("bare dict+OrderedDict LRU", lambda mode: native_round_cost(
        BareLru, mode, pinned, evictable, rounds)))
    for version, release in releases.items():
        context = contexts_for(release, [Request("pinned", (), (), False)])[0]
        for policy in ("lru", "arc"):
            rows.append((f"vLLM {version} ({policy})", lambda mode, r=release, p=policy, c=context:
                         vllm_round_cost(lambda n: r.manager_class()(n, p), c, mode, pinned,
                                         evictable, rounds)))
    for name, cost in rows:
        costs = {mode: cost(mode) for mode in MODES}
        print(f"  {name:34s}" + "".join(f"{costs[m]:>12,.0f}" for m in MODES)
              + f"  {costs['pinned'] / costs['none']:>11.2f}"
              + f"  {costs['in flight'] / costs['none']:>14.2f}")


def drive_once(name: str, requests_count: int, setup_only: bool) -> int:
    """Drive the trace once on one manager, untimed: for counting instructions, e.g.
    ``valgrind --tool=cachegrind --cache-sim=no python benchmarks/bench_manager.py
    --drive ours`` minus the same with ``--setup-only``."""
    shape = replace(TraceShape(), requests=requests_count)
    requests = make_requests(shape)
    drive: Callable[[], tuple[int, int]]
    if name == "ours":
        manager: Any = OffloadManager(shape.capacity)
        drive = lambda: drive_native(manager, requests, shape)  # noqa: E731
    elif name == "bare":
        manager = BareLru(shape.capacity)
        drive = lambda: drive_native(manager, requests, shape, bare=True)  # noqa: E731
    elif name == "facade":
        manager = VllmFacade(shape.capacity, "lru", True, types=VllmTypes.stand_ins())
        contexts: list[Any] = [None] * len(requests)
        drive = lambda: drive_vllm(manager, requests, shape, contexts,  # noqa: E731
                                   VllmLookupResult.HIT)
    else:
        release = load_release(name.removeprefix("vllm-"))
        manager = release.manager_class()(shape.capacity, "lru", enable_events=True)
        contexts = contexts_for(release, requests)
        drive = lambda: drive_vllm(manager, requests, shape, contexts,  # noqa: E731
                                   hit_answer(release))
    if not setup_only:
        print(f"{name}: {drive()[0]} block operations")
    return 0


def drive_pinned_once(policy: str, mode: str, pinned: int, rounds: int) -> int:
    """Fill as :mod:`manager_pinned` does, then ``rounds`` untimed rounds: instructions
    per round are the difference with ``rounds`` = 0, divided by ``rounds`` (keys for
    2,000 rounds are made either way, so their hashing cancels out)."""
    manager: Any = (BareLru(pinned + 4_096) if policy == "bare"
                    else OffloadManager(pinned + 4_096, policy=policy))
    fill(manager.prepare_store, manager.complete_store, manager.prepare_load, mode,
         pinned, 4_096)
    fresh = [[block_key("round", i)] for i in range(max(rounds, 2_000))]
    for keys in fresh[:rounds]:
        manager.prepare_store(keys)
        manager.complete_store(keys)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=TraceShape.requests)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pinned", type=int, default=60_000)
    parser.add_argument("--rounds", type=int, default=1_000)
    parser.add_argument("--quick", action="store_true",
                        help="3,000 requests, 2 repeats, 300 rounds")
    parser.add_argument("--parts", default="agreement,trace,pinned",
                        help="comma-separated: agreement, trace, pinned (default: all)")
    parser.add_argument("--drive", choices=["ours", "bare", "facade", *(
        f"vllm-{v}" for v in VLLM_RELEASES)],
                        help="only drive the trace once on this manager (for instruction "
                             "counting under valgrind); prints the block operations")
    parser.add_argument("--setup-only", action="store_true",
                        help="with --drive: everything but the drive (the baseline)")
    parser.add_argument("--drive-pinned", metavar="POLICY:MODE",
                        help="only fill an OffloadManager (lru or arc) or the bare LRU "
                             "(bare) in MODE (none, pinned or in-flight) and run --rounds "
                             "rounds, untimed (for valgrind)")
    args = parser.parse_args(argv)
    if args.drive:
        return drive_once(args.drive, args.requests, args.setup_only)
    if args.drive_pinned:
        policy, _, mode = args.drive_pinned.partition(":")
        return drive_pinned_once(policy, mode.replace("-", " "), args.pinned, args.rounds)
    if args.quick:
        args.requests, args.repeats, args.rounds = 3_000, 2, 300
    parts = set(args.parts.split(","))
    shape = replace(TraceShape(), requests=args.requests)
    print(f"python {platform.python_version()} on {platform.machine()}, "
          f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}")
    requests = make_requests(shape)
    print(f"trace: {shape}")
    print(f"       {len(requests):,} requests, {sum(len(r.keys) for r in requests):,} keys")
    releases, problems = load_vllm()
    for problem in problems:
        print(problem)
    mismatches = agreement(releases, requests, shape) if "agreement" in parts else 0
    if "trace" in parts:
        trace_runs(releases, requests, shape, args.repeats)
    if "pinned" in parts:
        pinned_runs(releases, args.pinned, 4_096, args.rounds)
    return 1 if mismatches else 0


def trace_runs(releases: dict[str, VllmRelease], requests: Sequence[Request],
               shape: TraceShape, repeats: int) -> None:
    print(f"\nCost per block operation (fastest of {repeats} interleaved runs)")
    best = timed_runs(releases, requests, shape, repeats)
    ours = best["OffloadManager (lru)"][0]
    vllm = {name: per_op for name, (per_op, _) in best.items() if name.startswith("vLLM")}
    fastest_vllm = min(vllm.values()) if vllm else None
    for name, (per_op, ops) in best.items():
        ratio = f"  {per_op / fastest_vllm:5.2f} x the faster vLLM" if fastest_vllm else ""
        print(f"  {name:36s} {per_op:8.0f} ns/op  ({ops:,} block ops){ratio}")
    for name, per_op in vllm.items():
        print(f"  OffloadManager / {name:30s} {ours / per_op:5.2f}")
    print(f"  OffloadManager / bare LRU {ours / best['bare dict+OrderedDict LRU'][0]:27.2f}")


if __name__ == "__main__":
    sys.exit(main())
