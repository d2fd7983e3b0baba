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
   ``CPUOffloadingManager`` loaded from their PyPI wheels (:mod:`vllm_wheels`) in
   ``--repeats`` interleaved rounds (each round runs every contender once), and
   reports for each ratio the median of the per-round ratios with their spread,
   never a contender's fastest run;
4. times decode rounds with 1, 16 and 256 keys per call on a full tier of 16,384
   slots (store the keys, complete, look each up, load them, complete, drain the
   events; every store evicts) on ``OffloadManager``, the bare LRU and vLLM 0.24.0,
   reported the same way;
5. times eviction with 60,000 pinned (or in-flight) blocks against none
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
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bare_lru import BareLru
from kvoffload.conformance.target.vllm_wheels import (
    VllmRelease,
    VllmReleaseUnavailable,
    load_release,
)
from kvoffload.impl import OffloadManager
from kvoffload.impl.vllm_facade import VllmFacade
from kvoffload.impl.vllm_types import VllmLookupResult, VllmTypes
from manager_agreement import Agreement, Target, check_against_spec, lockstep_with_vllm
from manager_drivers import decode_native, decode_vllm, drive_native, drive_vllm
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


def load_vllm(versions: Sequence[str] = VLLM_RELEASES
              ) -> tuple[dict[str, VllmRelease], list[str]]:
    releases, problems = {}, []
    for version in versions:
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
        theirs = Target.vllm(release.manager_class()(shape.capacity, "lru",
                                                     enable_events=True),
                             contexts_for(release, requests))
        report = lockstep_with_vllm(theirs, requests, shape, same_victims=True)
        print_agreement("OffloadManager vs vLLM 0.24.0, full trace", report)
        total += report.total
    small = make_requests(SMALL)
    targets: list[tuple[str, Callable[[], Target], bool]] = [
        ("OffloadManager vs spec, small trace",
         lambda: Target.native(OffloadManager(SMALL.capacity)), True)]
    def vllm_target(release: VllmRelease) -> Callable[[], Target]:
        return lambda: Target.vllm(
            release.manager_class()(SMALL.capacity, "lru", enable_events=True),
            contexts_for(release, small))

    for version, release in releases.items():
        targets.append((f"vLLM {version} vs spec, small trace", vllm_target(release),
                        version == "0.24.0"))
    for name, make, exact in targets:
        report = check_against_spec(make(), small, SMALL, exact_victims=exact)
        print_agreement(name, report)
        total += report.total
    print(f"  mismatches in all: {total}")
    return total


def interleaved(contenders: dict[str, Callable[[], tuple[int, tuple[int, int]]]],
                rounds: int, label: str) -> dict[str, list[float]]:
    """CPU ns per block operation of each contender in each round. Every round runs
    every contender once, in an order rotated by one each round (so no contender always
    follows the same one)."""
    names = list(contenders)
    per_round: dict[str, list[float]] = {name: [] for name in names}
    for number in range(rounds):
        shift = number % len(names)
        for name in names[shift:] + names[:shift]:
            elapsed, (ops, _) = contenders[name]()
            per_round[name].append(elapsed / ops)
        print(f"  {label}: round {number + 1}/{rounds} done", file=sys.stderr)
    return per_round


def ratio_line(name: str, ours: Sequence[float], theirs: Sequence[float]) -> str:
    """The median of per-round ratios, with their spread (lowest .. highest)."""
    ratios = sorted(a / b for a, b in zip(ours, theirs, strict=True))
    return (f"  {name:52s} {statistics.median(ratios):5.2f}  "
            f"(spread {ratios[0]:.2f} .. {ratios[-1]:.2f}, {len(ratios)} rounds)")


def timed_runs(releases: dict[str, VllmRelease], requests: Sequence[Request],
               shape: TraceShape, rounds: int) -> dict[str, list[float]]:
    """Each contender's CPU ns per block operation on the trace, per round."""
    contenders: dict[str, Callable[[], tuple[int, tuple[int, int]]]] = {}
    contenders["OffloadManager (lru)"] = lambda: _run(
        lambda: OffloadManager(shape.capacity), lambda m: drive_native(m, requests, shape))
    contenders["bare dict+OrderedDict LRU"] = lambda: _run(
        lambda: BareLru(shape.capacity), lambda m: drive_native(m, requests, shape, bare=True))
    no_contexts = [None] * len(requests)
    contenders["VllmFacade over OffloadManager"] = lambda: _run(
        lambda: VllmFacade(shape.capacity, "lru", True, types=VllmTypes.stand_ins()),
        lambda m: drive_vllm(m, requests, shape, no_contexts, VllmLookupResult.HIT))
    def vllm_run(release: VllmRelease) -> Callable[[], tuple[int, tuple[int, int]]]:
        return lambda: _run_vllm(release, requests, shape)

    for version, release in releases.items():
        contenders[f"vLLM {version} CPUOffloadingManager"] = vllm_run(release)
    return interleaved(contenders, rounds, "trace")


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
          f"CPU ns per round, median 100-round batch, garbage collector paused)")
    print(f"  {'manager':34s}" + "".join(f"{mode:>12s}" for mode in MODES)
          + "  pinned/none  in flight/none")
    def native_row(policy: str) -> Callable[[str], float]:
        return lambda mode: native_round_cost(
            lambda c: OffloadManager(c, policy=policy), mode, pinned, evictable, rounds)

    def vllm_row(release: VllmRelease, policy: str, context: Any) -> Callable[[str], float]:
        return lambda mode: vllm_round_cost(lambda n: release.manager_class()(n, policy),
                                            context, mode, pinned, evictable, rounds)

    rows: list[tuple[str, Callable[[str], float]]] = []
    for policy in ("lru", "arc"):
        rows.append((f"OffloadManager ({policy})", native_row(policy)))
    rows.append(("bare dict+OrderedDict LRU", lambda mode: native_round_cost(
        BareLru, mode, pinned, evictable, rounds)))
    for version, release in releases.items():
        context = contexts_for(release, [Request("pinned", (), (), False)])[0]
        for policy in ("lru", "arc"):
            rows.append((f"vLLM {version} ({policy})", vllm_row(release, policy, context)))
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
        drive = lambda: drive_native(manager, requests, shape)  # noqa: E731  # a closure over this contender's state, one line each
    elif name == "bare":
        manager = BareLru(shape.capacity)
        drive = lambda: drive_native(manager, requests, shape, bare=True)  # noqa: E731  # a closure over this contender's state, one line each
    elif name == "facade":
        manager = VllmFacade(shape.capacity, "lru", True, types=VllmTypes.stand_ins())
        contexts: list[Any] = [None] * len(requests)
        drive = lambda: drive_vllm(manager, requests, shape, contexts,  # noqa: E731  # a closure over this contender's state, one line each
                                   VllmLookupResult.HIT)
    else:
        release = load_release(name.removeprefix("vllm-"))
        manager = release.manager_class()(shape.capacity, "lru", enable_events=True)
        contexts = contexts_for(release, requests)
        drive = lambda: drive_vllm(manager, requests, shape, contexts,  # noqa: E731  # a closure over this contender's state, one line each
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
    parser.add_argument("--repeats", type=int, default=7,
                        help="interleaved rounds of the timed parts (at least 7 for "
                             "published figures)")
    parser.add_argument("--releases", default=",".join(VLLM_RELEASES),
                        help="comma-separated vLLM releases to time and check")
    parser.add_argument("--decode-keys", type=int, default=32_768,
                        help="keys per decode run (after filling the tier)")
    parser.add_argument("--pinned", type=int, default=60_000)
    parser.add_argument("--rounds", type=int, default=1_000)
    parser.add_argument("--quick", action="store_true",
                        help="3,000 requests, 3 repeats, 300 pinned rounds, 8,192 decode keys")
    parser.add_argument("--parts", default="agreement,trace,decode,pinned",
                        help="comma-separated: agreement, trace, decode, pinned (default: all)")
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
        args.requests, args.repeats, args.rounds, args.decode_keys = 3_000, 3, 300, 8_192
    parts = set(args.parts.split(","))
    shape = replace(TraceShape(), requests=args.requests)
    print(f"python {platform.python_version()} on {platform.machine()}, "
          f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}")
    requests = make_requests(shape)
    print(f"trace: {shape}")
    print(f"       {len(requests):,} requests, {sum(len(r.keys) for r in requests):,} keys")
    releases, problems = load_vllm(args.releases.split(","))
    for problem in problems:
        print(problem)
    mismatches = agreement(releases, requests, shape) if "agreement" in parts else 0
    if "trace" in parts:
        trace_runs(releases, requests, shape, args.repeats)
    if "decode" in parts:
        decode_runs(releases, (1, 16, 256), shape.capacity, args.decode_keys, args.repeats)
    if "pinned" in parts:
        pinned_runs(releases, args.pinned, 4_096, args.rounds)
    return 1 if mismatches else 0


def trace_runs(releases: dict[str, VllmRelease], requests: Sequence[Request],
               shape: TraceShape, rounds: int) -> None:
    print(f"\nTrace: CPU ns per block operation (median of {rounds} interleaved rounds), "
          f"and ratios (median of per-round ratios)")
    per_round = timed_runs(releases, requests, shape, rounds)
    for name, costs in per_round.items():
        print(f"  {name:36s} {statistics.median(costs):8.0f} ns/op  "
              f"(spread {min(costs):.0f} .. {max(costs):.0f})")
    ours, bare = per_round["OffloadManager (lru)"], per_round["bare dict+OrderedDict LRU"]
    facade = per_round["VllmFacade over OffloadManager"]
    for version in releases:
        theirs = per_round[f"vLLM {version} CPUOffloadingManager"]
        print(ratio_line(f"OffloadManager / vLLM {version}", ours, theirs))
        print(ratio_line(f"VllmFacade over OffloadManager / vLLM {version}", facade, theirs))
        print(ratio_line(f"bare LRU / vLLM {version}", bare, theirs))
    print(ratio_line("OffloadManager / bare LRU", ours, bare))


def decode_batches(keys_per_call: int, total: int, tag: str) -> list[list[bytes]]:
    """Fresh keys for the decode rounds, ``keys_per_call`` per round, ``total`` in all."""
    return [[block_key(tag, start + i) for i in range(keys_per_call)]
            for start in range(0, total, keys_per_call)]


def decode_runs(releases: dict[str, VllmRelease], sizes: Sequence[int], capacity: int,
                total: int, rounds: int) -> None:
    """Decode rounds with ``size`` keys per call on a full tier (every store evicts)."""
    print(f"\nDecode rounds (store k keys, complete, look each up, load them, complete, "
          f"drain events) on a full tier of {capacity:,} slots, {total:,} keys per run: "
          f"CPU ns per block operation (median of {rounds} interleaved rounds) and "
          f"ratios (median of per-round ratios)")
    filler = decode_batches(1_000, capacity, "decode fill")
    release = releases.get("0.24.0")
    for size in sizes:
        batches = decode_batches(size, total, f"decode {size}")

        def native(make: Callable[[], Any], bare: bool = False, batches: list[list[bytes]] = batches
                   ) -> Callable[[], tuple[int, tuple[int, int]]]:
            def run() -> tuple[int, tuple[int, int]]:
                manager = make()
                for keys in filler:
                    manager.prepare_store(keys)
                    manager.complete_store(keys)
                return _run(lambda: manager, lambda m: decode_native(m, batches, bare))
            return run

        contenders: dict[str, Callable[[], tuple[int, tuple[int, int]]]] = {
            "OffloadManager (lru)": native(lambda: OffloadManager(capacity)),
            "bare dict+OrderedDict LRU": native(lambda: BareLru(capacity), bare=True),
        }
        if release is not None:
            context = contexts_for(release, [Request("decode", (), (), False)])[0]

            def vllm_run(r: VllmRelease = release, c: Any = context,
                         batches: list[list[bytes]] = batches) -> tuple[int, tuple[int, int]]:
                manager = r.manager_class()(capacity, "lru", enable_events=True)
                for keys in filler:
                    manager.prepare_store(keys, c)
                    manager.complete_store(keys, c)
                list(manager.take_events())
                return _run(lambda: manager, lambda m: decode_vllm(m, batches, c))
            contenders["vLLM 0.24.0 CPUOffloadingManager"] = vllm_run
        per_round = interleaved(contenders, rounds, f"{size} keys per call")
        print(f"  {size} key(s) per call:")
        for name, costs in per_round.items():
            print(f"    {name:34s} {statistics.median(costs):8.0f} ns/op  "
                  f"(spread {min(costs):.0f} .. {max(costs):.0f})")
        ours, bare = per_round["OffloadManager (lru)"], per_round["bare dict+OrderedDict LRU"]
        if release is not None:
            theirs = per_round["vLLM 0.24.0 CPUOffloadingManager"]
            print("  " + ratio_line(f"OffloadManager / vLLM 0.24.0, {size} per call",
                                    ours, theirs).strip())
            print("  " + ratio_line(f"bare LRU / vLLM 0.24.0, {size} per call",
                                    bare, theirs).strip())


if __name__ == "__main__":
    sys.exit(main())
