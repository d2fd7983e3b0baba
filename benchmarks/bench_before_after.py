"""Two versions of ``OffloadManager`` side by side in one process: before and after a
change, on the drivers of ``bench_manager.py`` and ``bench_traffic_speed.py``.

Run from the repository root, with this tree first on ``PYTHONPATH`` (the "after")::

    git archive main impl/kvoffload | tar -x -C /tmp/before --strip-components=1
    python benchmarks/bench_before_after.py /tmp/before

The "before" is the ``kvoffload/impl`` package under the given folder, imported under
another name (``kvoffload_impl_before``), so both versions run in the same process on
the same inputs, in rounds that alternate which goes first; the figure is the median of
the per-round ratios after / before, with the lowest and highest round. Parts: the
trace and the decode rounds of ``bench_manager.py`` (same drivers, same shapes) and
the traffic stream of ``bench_traffic_speed.py`` at chosen cells. Both versions must
make the same block operations (checked).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_manager import decode_batches
from bench_traffic_speed import Stream, stream_of
from kvoffload.conformance.traffic import load
from kvoffload.impl import OffloadManager
from manager_drivers import decode_native, drive_native, traffic_native
from manager_trace import TraceShape, make_requests

Part = Callable[[Callable[[int], Any]], tuple[int, int]]
"""One timed run of a part on a manager class: CPU ns and block operations."""


def before_class(root: Path) -> Callable[[int], Any]:
    """``OffloadManager`` of the ``kvoffload/impl`` package under ``root``."""
    package = root / "kvoffload" / "impl"
    spec = importlib.util.spec_from_file_location(
        "kvoffload_impl_before", package / "__init__.py",
        submodule_search_locations=[str(package)])
    if spec is None or spec.loader is None:
        raise SystemExit(f"no kvoffload/impl package under {root}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    made: Callable[[int], Any] = module.OffloadManager
    return made


def timed(drive: Callable[[], tuple[int, int]]) -> tuple[int, int]:
    gc.collect()
    start = time.process_time_ns()
    ops, _ = drive()
    return time.process_time_ns() - start, ops


def trace_part(capacity: int, drive: Callable[[Any], tuple[int, int]]) -> Part:
    """A part that makes a manager of ``capacity`` slots and times ``drive`` on it."""
    def run(make: Callable[[int], Any]) -> tuple[int, int]:
        manager = make(capacity)
        return timed(lambda: drive(manager))
    return run


def decode_part(capacity: int, filler: list[list[bytes]], batches: list[list[bytes]]
                ) -> Part:
    """bench_manager's decode rounds on a tier filled beforehand (untimed)."""
    def run(make: Callable[[int], Any]) -> tuple[int, int]:
        manager = make(capacity)
        for keys in filler:
            manager.prepare_store(keys)
            manager.complete_store(keys)
        return timed(lambda: decode_native(manager, batches))
    return run


def traffic_drive(stream: Stream) -> Callable[[Any], tuple[int, int]]:
    """bench_traffic_speed's call stream on a native manager."""
    return lambda manager: traffic_native(manager, stream)


def parts(cells: Sequence[str]) -> dict[str, Part]:
    shape = TraceShape()
    requests = make_requests(shape)
    found: dict[str, Part] = {"bench_manager trace": trace_part(
        shape.capacity, lambda m: drive_native(m, requests, shape))}
    filler = decode_batches(1_000, shape.capacity, "decode fill")
    for size in (1, 16, 256):
        found[f"bench_manager decode {size}"] = decode_part(
            shape.capacity, filler, decode_batches(size, 32_768, f"decode {size}"))
    for cell in cells:
        name, _, capacity = cell.partition("@")
        found[f"traffic {name} at {int(capacity):,}"] = trace_part(
            int(capacity), traffic_drive(stream_of(load(name))[0]))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path,
                        help="folder holding the 'before' kvoffload/impl package")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--traffic", default="conversation@4096,synthetic@2048",
                        help="comma-separated trace@capacity cells ('' for none)")
    args = parser.parse_args(argv)
    versions: dict[str, Callable[[int], Any]] = {
        "before": before_class(args.before), "after": OffloadManager}
    print(f"# bench_before_after: {' '.join(sys.argv)}; {args.rounds} rounds")
    for name, part in parts([c for c in args.traffic.split(",") if c]).items():
        per_round: dict[str, list[float]] = {"before": [], "after": []}
        seen: set[int] = set()
        for number in range(args.rounds):
            order = ["before", "after"] if number % 2 == 0 else ["after", "before"]
            for version in order:
                elapsed, ops = part(versions[version])
                per_round[version].append(elapsed / ops)
                seen.add(ops)
        if len(seen) != 1:
            print(f"# MISMATCH in {name}: block operations {sorted(seen)}")
            return 1
        ratios = sorted(a / b for a, b in zip(per_round["after"], per_round["before"],
                                               strict=True))
        print(f"{name:32s} before {statistics.median(per_round['before']):5.0f} "
              f"after {statistics.median(per_round['after']):5.0f} ns/op  after / before "
              f"{statistics.median(ratios):.3f} ({ratios[0]:.2f}..{ratios[-1]:.2f})",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
