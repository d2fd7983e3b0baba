"""Host copy throughput of the data path, as a ratio to a 1 GiB torch copy in the same run.

For 64 KiB, 512 KiB and 2 MiB blocks in batches of 1, 16 and 256, stores (device
tensor -> host pool) and loads (back), with three slot patterns:

* ``contiguous``: consecutive pool slots and consecutive device blocks;
* ``scattered``: pool slots in random order (a fragmented pool), consecutive device
  blocks;
* ``both``: random on both sides.

Three ways are timed per cell: ``plain`` is one torch ``copy_`` per batch of the same
bytes between consecutive rows of the same regions, with no plan (the most any block
copier can get from torch for that batch: the method's ceiling, not the code's);
``copy`` plans and runs each batch's copy on the calling
thread (what an engine's worker does per job: :class:`BlockCopy`), ``engine`` goes
through a :class:`ThreadedEngine` (submit, the worker copies, wait, poll), so its
ratio includes validation, the guard and the hand-off between threads: a round
submits all its batches, then waits for them, so planning overlaps copying as it
would in an engine fed by a scheduler.

Every timed round moves a region of at least 128 MiB per side and each timed call
copies the other of two regions than the call before it (``copy``, ``plain`` and
``engine`` alternate within a round), so none finds its data in the 32 MiB L3 cache
left by the one before; the reference copy is cold for the same reason.
Each timed round of a cell follows a 1 GiB reference copy, and the cell shows the
median of its per-round ratios with the lowest and highest round (the spread), so
load from other processes that comes and goes moves both sides of a ratio alike and
the rounds it did move are visible. The goals of issue 12 are counted at the end.
One torch thread (on two cores the default two threads add milliseconds per op).

    python benchmarks/bench_datapath.py [--rounds N] [--blocks 64 512 2048] [--json FILE]
    python benchmarks/bench_datapath.py --ways [--rounds N] [--blocks 64]

``--ways`` times, instead, the torch calls a planner could use for each pattern
(scattered destinations, scattered sources, both), side by side with one ``copy_``
of the same bytes between consecutive rows, index tensors and views built before
the clock starts, so that the choice of way in ``copyplan`` rests on figures.

Optionally, with CUDA: store and load through :class:`CudaEngine` in GB/s against a
plain pinned copy of the same bytes (skipped without CUDA).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial

import torch

from kvoffload.impl.datapath import BlockLayout, HostBlockPool, ThreadedEngine, TransferEngine
from kvoffload.impl.datapath.copyplan import BlockCopy
from kvoffload.impl.datapath.rows import Rows

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
LAYOUTS = {
    64 * KIB: BlockLayout(layers=4, block_size=16, kv_heads=4, head_dim=64),
    512 * KIB: BlockLayout(layers=32, block_size=16, kv_heads=4, head_dim=64),
    2 * MIB: BlockLayout(layers=32, block_size=16, kv_heads=8, head_dim=128),
}
BATCHES = (1, 16, 256)
PATTERNS = ("contiguous", "scattered", "both")
DIRECTIONS = ("store", "load")
REGION = 128 * MIB


@dataclass
class Cell:
    """One cell: each column's ratio in every timed round, in round order.

    ``copy``, ``engine`` and ``plain``: to the 1 GiB copy timed just before the round;
    ``copy_of_plain``: ``plain`` / ``copy`` time in the round (1.0: the code adds nothing).
    """

    block_kib: int
    batch: int
    direction: str
    pattern: str
    copy: list[float]
    engine: list[float]
    plain: list[float]
    copy_of_plain: list[float]

    def median(self, column: str) -> float:
        return statistics.median(self.rounds(column))

    def rounds(self, column: str) -> list[float]:
        rounds: list[float] = getattr(self, column)
        return rounds

    def shown(self, column: str) -> str:
        """The median of the column's per-round ratios, with their lowest and highest."""
        rounds = self.rounds(column)
        return f"{statistics.median(rounds):.2f} ({min(rounds):.2f}..{max(rounds):.2f})"


COLUMNS = ("plain", "copy", "engine", "copy_of_plain")
GOALS: tuple[tuple[str, float, Callable[[Cell], bool]], ...] = (
    ("at least 0.95 for blocks of 512 KiB or more in batches of 16 or more", 0.95,
     lambda cell: cell.block_kib >= 512 and cell.batch >= 16),
    ("at least 0.7 for scattered 64 KiB blocks in batches of 16 or more", 0.7,
     lambda cell: cell.block_kib == 64 and cell.batch >= 16 and cell.pattern == "scattered"),
)
"""The host-copy goals (issue 12), counted over the cells of the run by their medians."""


def median_time(action: Callable[[], None], rounds: int) -> float:
    action()  # warm-up: page faults, allocator, first-call costs
    times = []
    for _ in range(rounds):
        times.append(timed(action))
    return statistics.median(times)


def timed(action: Callable[[], None]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


class Reference:
    """The 1 GiB torch copy every ratio is measured against (cold: two 1 GiB buffers)."""

    def __init__(self) -> None:
        self.src = torch.empty(GIB // 8, dtype=torch.int64).fill_(1)
        self.dst = torch.empty_like(self.src).fill_(2)
        self.dst.copy_(self.src)
        self.samples: list[float] = []

    def _copy(self) -> None:
        self.dst.copy_(self.src)

    def time(self) -> float:
        """Seconds for one 1 GiB copy; every sample is kept for the report."""
        seconds = timed(self._copy)
        self.samples.append(seconds)
        return seconds


def batches(rows: int, batch: int, pattern: str, side: str, seed: int) -> list[list[int]]:
    """One region's ids, cut into batches: in order, or in a fixed random order."""
    ids = list(range(rows))
    if pattern == "both" or (pattern == "scattered" and side == "pool"):
        random.Random(f"{seed}-{side}").shuffle(ids)
    return [ids[i:i + batch] for i in range(0, rows - rows % batch, batch)]


def goal_lines(cells: list[Cell]) -> list[str]:
    """For each goal: how many of its cells in this run meet it, by ``copy`` and by
    ``engine`` (cell medians), with the lowest and highest median."""
    lines = []
    for text, least, applies in GOALS:
        chosen = [cell for cell in cells if applies(cell)]
        if not chosen:
            lines.append(f"# goal {text}: no such cell in this run")
            continue
        counts = []
        for column in ("copy", "engine"):
            medians = sorted(cell.median(column) for cell in chosen)
            met = sum(m >= least for m in medians)
            counts.append(f"{column} {met} of {len(medians)} (medians {medians[0]:.2f}.."
                          f"{medians[-1]:.2f})")
        lines.append(f"# goal {text}: " + "; ".join(counts))
    return lines


def measure_block_size(nbytes: int, rounds: int, reference: Reference) -> list[Cell]:
    """Every cell of one block size. Each timed round of a cell comes right after a 1 GiB
    reference copy, and the cell's ratio is the median of the per-round ratios, so a
    neighbour's load that comes and goes shifts both sides of a ratio alike."""
    layout = LAYOUTS[nbytes]
    region_rows = max(REGION, 256 * nbytes) // nbytes
    pool = HostBlockPool(2 * region_rows, layout, pin=False)
    device = torch.empty((2 * region_rows, *layout.shape), dtype=layout.dtype)
    pool.rows.tensor.fill_(3)
    Rows(device).tensor.fill_(4)
    device_rows = Rows(device)
    engine = ThreadedEngine(pool, device)
    cells = []
    try:
        for batch in BATCHES:
            for pattern in PATTERNS:
                plan = {side: batches(region_rows, batch, pattern, side, nbytes)
                        for side in ("pool", "device")}
                moved = len(plan["pool"]) * batch * nbytes
                for direction in DIRECTIONS:
                    copy = _rounds(partial(_copy, direction, pool.rows, device_rows), plan,
                                   region_rows)
                    through = _drained(engine, _rounds(
                        partial(_through_engine, engine, direction), plan, region_rows))
                    # plain starts in the other region: within a round copy, plain and
                    # engine alternate regions, so none finds the bytes of the one before
                    # in the cache (the random rows a scattered copy wrote last would
                    # otherwise speed up the plain copy after it)
                    plain = _plain_rounds(direction, pool.rows, device_rows, batch,
                                          len(plan["pool"]), region_rows, start=1)
                    copy()  # warm-up: first-call costs
                    through()
                    plain()
                    copy_ratios: list[float] = []
                    engine_ratios: list[float] = []
                    plain_ratios: list[float] = []
                    of_plain: list[float] = []
                    for _ in range(rounds):
                        gib_s = reference.time()
                        copy_s, plain_s = timed(copy), timed(plain)
                        copy_ratios.append(gib_s / copy_s * moved / GIB)
                        engine_ratios.append(gib_s / timed(through) * moved / GIB)
                        plain_ratios.append(gib_s / plain_s * moved / GIB)
                        of_plain.append(plain_s / copy_s)
                    cells.append(Cell(nbytes // KIB, batch, direction, pattern, copy_ratios,
                                      engine_ratios, plain_ratios, of_plain))
    finally:
        engine.close()
    return cells


def _rounds(move: Callable[[list[int], list[int]], None], plan: dict[str, list[list[int]]],
            region_rows: int) -> Callable[[], None]:
    """One timed round: every batch of the plan, in the other region than the last round.

    The ids of both regions are computed here, once, so a round times only the moves.
    """
    shifted = [[([r * region_rows + i for i in p], [r * region_rows + i for i in d])
                for p, d in zip(plan["pool"], plan["device"], strict=True)] for r in (0, 1)]
    state = {"region": 0}

    def one_round() -> None:
        region = state["region"]
        state["region"] ^= 1
        for pool_ids, device_ids in shifted[region]:
            move(pool_ids, device_ids)

    return one_round


def _plain_rounds(direction: str, pool: Rows, device: Rows, batch: int, count: int,
                  region_rows: int, start: int) -> Callable[[], None]:
    """One round of ``plain``: ``count`` torch copies of ``batch`` consecutive rows each,
    in the other region than the last round (the same bytes and calls as a cell's round);
    the first round in region ``start``."""
    views = [[(pool.tensor[start:start + batch], device.tensor[start:start + batch])
              for start in range(r * region_rows, r * region_rows + count * batch, batch)]
             for r in (0, 1)]
    state = {"region": start}

    def one_round() -> None:
        region = state["region"]
        state["region"] ^= 1
        for host, dev in views[region]:
            if direction == "store":
                host.copy_(dev)
            else:
                dev.copy_(host)

    return one_round


def _copy(direction: str, pool: Rows, device: Rows, pool_ids: list[int],
          device_ids: list[int]) -> None:
    if direction == "store":
        BlockCopy(device, device_ids, pool, pool_ids).run()
    else:
        BlockCopy(pool, pool_ids, device, device_ids).run()


def _through_engine(engine: ThreadedEngine, direction: str, pool_ids: list[int],
                    device_ids: list[int]) -> None:
    if direction == "store":
        engine.submit_store(device_ids, pool_ids)
    else:
        engine.submit_load(pool_ids, device_ids)


def _drained(engine: ThreadedEngine, round_: Callable[[], None]) -> Callable[[], None]:
    """A round that submits every batch (they overlap the caller's planning of the next
    ones), then waits for all and polls them."""

    def one_round() -> None:
        round_()
        engine.wait()
        results = engine.poll()
        if not all(result.success for result in results):
            raise RuntimeError(f"a benchmark copy failed: {results}")

    return one_round


def way_rows(nbytes: int, rounds: int) -> list[dict[str, object]]:
    """``--ways``: per pattern and batch, each candidate torch call's per-round time
    ratio to one plain ``copy_`` of the same bytes, interleaved, 128 MiB regions.

    Stores only (device rows -> pool rows): ``scatter`` (consecutive sources,
    random destinations), ``gather`` (random sources, consecutive destinations),
    ``both`` (random on both sides). ``planned`` is :class:`BlockCopy`, planning
    included; every other row is the bare torch call on prepared indexes and views.
    """
    region = max(REGION, 256 * nbytes) // nbytes
    src = Rows(torch.full((2 * region, nbytes // 8), 1, dtype=torch.int64))
    dst = Rows(torch.full((2 * region, nbytes // 8), 2, dtype=torch.int64))
    narrow = (src.tensor, dst.tensor)  # 8-byte elements
    out: list[dict[str, object]] = []
    for pattern in ("scatter", "gather", "both"):
        for batch in (16, 256):
            jobs = []
            for r in (0, 1):
                src_order, dst_order = list(range(region)), list(range(region))
                rng = random.Random(f"{nbytes}-{pattern}-{batch}-{r}")
                if pattern in ("gather", "both"):
                    rng.shuffle(src_order)
                if pattern in ("scatter", "both"):
                    rng.shuffle(dst_order)
                jobs.append([([r * region + i for i in src_order[k:k + batch]],
                              [r * region + i for i in dst_order[k:k + batch]])
                             for k in range(0, region - region % batch, batch)])
            ways = _ways(pattern, batch, region, jobs, src, dst, narrow)
            for action in ways.values():
                action(0)  # warm-up, both regions
                action(1)
            times: dict[str, list[float]] = {name: [] for name in ways}
            calls = 0
            for _ in range(rounds):
                for name, action in ways.items():
                    # each call copies the other region than the call before it, so
                    # none finds the bytes the one before left in the cache
                    times[name].append(timed(partial(action, calls % 2)))
                    calls += 1
            for name in ways:
                ratios = [p / t for p, t in zip(times["plain"], times[name], strict=True)]
                out.append({"block_kib": nbytes // KIB, "pattern": pattern, "batch": batch,
                            "way": name, "us_per_job": statistics.median(times[name])
                            / len(jobs[0]) * 1e6, "of_plain": ratios})
    return out


def _ways(pattern: str, batch: int, region: int, jobs: list[list[tuple[list[int], list[int]]]],
          src: Rows, dst: Rows, narrow: tuple[torch.Tensor, torch.Tensor]
          ) -> dict[str, Callable[[int], None]]:
    """The candidate calls for one pattern: each takes the region (0 or 1) to copy."""
    prepared = [[(torch.tensor(s), torch.tensor(d), s, d) for s, d in region_jobs]
                for region_jobs in jobs]
    plain = [[(dst.tensor[k:k + batch], src.tensor[k:k + batch])
              for k in range(r * region, r * region + len(jobs[0]) * batch, batch)]
             for r in (0, 1)]
    views = [[([src.views[i] for i in s], [dst.views[i] for i in d]) for s, d in region_jobs]
             for region_jobs in jobs]
    scratch = Rows(torch.empty((batch, src.tensor.shape[1]), dtype=torch.int64))

    def plain_copy(r: int) -> None:
        for target, source in plain[r]:
            target.copy_(source)

    def planned(r: int) -> None:
        for s, d in jobs[r]:
            BlockCopy(src, s, dst, d).run()

    def foreach(r: int) -> None:
        for sources, targets in views[r]:
            torch._foreach_copy_(targets, sources)

    def loop(r: int) -> None:
        for sources, targets in views[r]:
            for target, source in zip(targets, sources, strict=True):
                target.copy_(source)

    def index_copy(wide: bool) -> Callable[[int], None]:
        into, rows = (dst.wide, src.wide) if wide else (narrow[1], narrow[0])

        def call(r: int) -> None:
            for _, d, s, _ in prepared[r]:
                into.index_copy_(0, d, rows[s[0]:s[0] + batch])
        return call

    def index_put(wide: bool) -> Callable[[int], None]:
        into, rows = (dst.wide, src.wide) if wide else (narrow[1], narrow[0])

        def call(r: int) -> None:
            for _, d, s, _ in prepared[r]:
                into.index_put_((d,), rows[s[0]:s[0] + batch])
        return call

    def index_select(r: int) -> None:
        for s, _, _, d in prepared[r]:
            torch.index_select(src.tensor, 0, s, out=dst.tensor[d[0]:d[0] + batch])

    def through_scratch(r: int) -> None:
        for s, d, _, _ in prepared[r]:
            torch.index_select(src.tensor, 0, s, out=scratch.tensor)
            dst.wide.index_copy_(0, d, scratch.wide)

    ways: dict[str, Callable[[int], None]] = {"plain": plain_copy, "planned": planned}
    if pattern == "scatter":
        ways.update({"index_copy_ 16-byte": index_copy(True),
                     "index_copy_ 8-byte": index_copy(False),
                     "index_put_ 16-byte": index_put(True),
                     "index_put_ 8-byte": index_put(False)})
    elif pattern == "gather":
        ways["index_select"] = index_select
    else:
        ways["index_select + index_copy_ via scratch"] = through_scratch
    ways.update({"_foreach_copy_": foreach, "loop of copy_": loop})
    return ways


def print_ways(rows: list[dict[str, object]]) -> None:
    print("| block | pattern | batch | way | us per job | of plain |")
    print("| ---: | --- | ---: | --- | ---: | ---: |")
    for row in rows:
        ratios = row["of_plain"]
        if not isinstance(ratios, list):
            raise TypeError(f"of_plain holds a list of ratios; got {ratios!r}")
        print(f"| {row['block_kib']} KiB | {row['pattern']} | {row['batch']} | {row['way']} | "
              f"{row['us_per_job']:.1f} | {statistics.median(ratios):.2f} "
              f"({min(ratios):.2f}..{max(ratios):.2f}) |")


def cuda_cells(rounds: int) -> list[dict[str, object]]:
    """GB/s of CudaEngine stores and loads against a plain pinned copy of the same bytes."""
    from kvoffload.impl.datapath.cuda import CudaEngine

    out: list[dict[str, object]] = []
    for nbytes, layout in LAYOUTS.items():
        for batch in (16, 256):
            pool = HostBlockPool(2 * batch, layout, pin=True)
            device = torch.zeros((2 * batch, *layout.shape), dtype=layout.dtype, device="cuda")
            engine = CudaEngine(pool, device)
            rng = random.Random(nbytes + batch)
            ids = (rng.sample(range(2 * batch), batch), rng.sample(range(2 * batch), batch))
            flat = (pool.rows.tensor[:batch], Rows(device).tensor[:batch])
            for direction in DIRECTIONS:
                engine_s = median_time(partial(_cuda_engine_copy, engine, direction, *ids),
                                       rounds)
                plain_s = median_time(partial(_cuda_plain_copy, direction, *flat), rounds)
                moved = batch * nbytes
                out.append({"block_kib": nbytes // KIB, "batch": batch, "direction": direction,
                            "engine_gbps": moved / engine_s / 1e9,
                            "pinned_gbps": moved / plain_s / 1e9,
                            "ratio": plain_s / engine_s})
            engine.close()
    return out


def _cuda_engine_copy(engine: TransferEngine, direction: str, slots: list[int],
                      blocks: list[int]) -> None:
    if direction == "store":
        engine.submit_store(blocks, slots)
    else:
        engine.submit_load(slots, blocks)
    engine.wait()
    engine.poll()


def _cuda_plain_copy(direction: str, host: torch.Tensor, device: torch.Tensor) -> None:
    if direction == "store":
        host.copy_(device, non_blocking=True)
    else:
        device.copy_(host, non_blocking=True)
    torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds per cell")
    parser.add_argument("--blocks", type=int, nargs="+", default=[n // KIB for n in LAYOUTS],
                        choices=[n // KIB for n in LAYOUTS], help="block sizes in KiB")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--ways", action="store_true",
                        help="time the candidate torch calls per pattern instead (see above)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    load_before = os.getloadavg()
    if args.ways:
        rows = [row for kib in args.blocks for row in way_rows(kib * KIB, args.rounds)]
        load_after = os.getloadavg()
        print(f"# bench_datapath: {' '.join(sys.argv)}")
        print(f"# torch {torch.__version__}, threads {torch.get_num_threads()}, python "
              f"{platform.python_version()}, {os.cpu_count()} cpus, rounds {args.rounds}")
        print(f"# load average before {load_before[0]:.2f} {load_before[1]:.2f}, after "
              f"{load_after[0]:.2f} {load_after[1]:.2f}")
        print("# stores of 128 MiB per round; of plain: the median of per-round time ratios "
              "plain / way, with the lowest and highest round in brackets")
        print_ways(rows)
        if args.json:
            with open(args.json, "w") as out:
                json.dump({"load_before": load_before, "load_after": load_after,
                           "ways": rows}, out, indent=1)
        return 0
    reference = Reference()
    sizes = [n * KIB for n in args.blocks]
    cells = [c for nbytes in sizes for c in measure_block_size(nbytes, args.rounds, reference)]
    load_after = os.getloadavg()
    speeds = sorted(GIB / t / 1e9 for t in reference.samples)
    print(f"# bench_datapath: {' '.join(sys.argv)}")
    print(f"# torch {torch.__version__}, threads {torch.get_num_threads()}, python "
          f"{platform.python_version()}, {os.cpu_count()} cpus, rounds {args.rounds}")
    print(f"# load average before {load_before[0]:.2f} {load_before[1]:.2f}, after "
          f"{load_after[0]:.2f} {load_after[1]:.2f}")
    print(f"# 1 GiB torch copy: median {statistics.median(speeds):.2f} GB/s over "
          f"{len(speeds)} copies (min {speeds[0]:.2f}, max {speeds[-1]:.2f}); each cell is "
          "the median of its per-round ratios (to the copy timed just before the round), "
          "with the lowest and highest round in brackets")
    print("| block | batch | direction | pattern | plain | copy | engine | copy of plain |")
    print("| ---: | ---: | --- | --- | ---: | ---: | ---: | ---: |")
    for cell in cells:
        print(f"| {cell.block_kib} KiB | {cell.batch} | {cell.direction} | {cell.pattern} | "
              + " | ".join(cell.shown(column) for column in COLUMNS) + " |")
    for line in goal_lines(cells):
        print(line)
    cuda: list[dict[str, object]] = []
    if torch.cuda.is_available():
        cuda = cuda_cells(args.rounds)
        print("| block | batch | direction | CudaEngine GB/s | pinned copy GB/s | ratio |")
        print("| ---: | ---: | --- | ---: | ---: | ---: |")
        for row in cuda:
            print(f"| {row['block_kib']} KiB | {row['batch']} | {row['direction']} | "
                  f"{row['engine_gbps']:.1f} | {row['pinned_gbps']:.1f} | {row['ratio']:.2f} |")
    else:
        print("# CUDA variant skipped: no CUDA device")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"reference_gbps": statistics.median(speeds), "load_before": load_before,
                       "load_after": load_after, "reference_samples_s": reference.samples,
                       "cells": [asdict(c) for c in cells],
                       "cuda": cuda}, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
