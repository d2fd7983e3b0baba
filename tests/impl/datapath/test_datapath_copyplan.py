"""The copy planner moves exactly the rows it is asked to, whichever way it picks."""

from __future__ import annotations

import gc
import random
import sys
import threading
import time
from itertools import pairwise

import pytest
import torch

from kvoffload.impl.datapath import BadBlockIds, copyplan
from kvoffload.impl.datapath.copyplan import POISON, BlockCopy, Way, check_pairs, runs
from kvoffload.impl.datapath.rows import Rows


def blocks(count: int, dtype: torch.dtype = torch.float16, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(-1000, 1000, (count, 2, 2, 3, 2, 4), generator=generator).to(dtype)


def naive(src: torch.Tensor, src_ids: list[int], dst: torch.Tensor,
          dst_ids: list[int]) -> torch.Tensor:
    expected = dst.clone()
    for s, d in zip(src_ids, dst_ids, strict=True):
        expected[d] = src[s]
    return expected


def test_runs_merge_pairs_consecutive_on_both_sides_by_destination() -> None:
    assert runs([4, 5, 6, 9], [0, 1, 2, 3]) == [(4, 0, 3), (9, 3, 1)]
    assert runs([7, 2, 3], [5, 0, 1]) == [(2, 0, 2), (7, 5, 1)]
    assert runs([], []) == []


@pytest.mark.parametrize(("src_ids", "dst_ids", "way"), [
    ([3, 4, 5], [0, 1, 2], Way.SLICE),
    ([9], [4], Way.SLICE),
    ([5, 1, 7], [2, 3, 4], Way.GATHER),
    ([5, 1, 7], [4, 2, 3], Way.GATHER),
    ([0, 1, 2], [7, 1, 4], Way.SCATTER),
    ([4, 2, 3], [9, 0, 5], Way.SCATTER),
    ([2, 3, 9], [0, 1, 6], Way.EACH),
    ([3, 3], [0, 6], Way.EACH),
])
def test_the_way_a_copy_is_planned(src_ids: list[int], dst_ids: list[int], way: Way) -> None:
    src, dst = blocks(10, seed=1), blocks(10, seed=2)
    expected = naive(src, src_ids, dst, dst_ids)
    copy = BlockCopy(Rows(src), src_ids, Rows(dst), dst_ids)
    assert copy.way is way
    assert copy.blocks == len(src_ids)
    copy.run()
    assert torch.equal(dst, expected)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.int8])
def test_random_copies_match_a_block_by_block_copy(seed: int, dtype: torch.dtype) -> None:
    rng = random.Random(seed)
    for _ in range(40):
        n_src, n_dst = rng.randint(1, 24), rng.randint(1, 24)
        count = rng.randint(0, min(n_src, n_dst))
        if rng.random() < 0.4:
            s0, d0 = rng.randint(0, n_src - count), rng.randint(0, n_dst - count)
            src_ids, dst_ids = list(range(s0, s0 + count)), list(range(d0, d0 + count))
            if rng.random() < 0.5:
                rng.shuffle(src_ids)
        else:
            src_ids = [rng.randrange(n_src) for _ in range(count)]  # sources may repeat
            dst_ids = rng.sample(range(n_dst), count)
        src, dst = blocks(n_src, dtype, seed), blocks(n_dst, dtype, seed + 100)
        expected = naive(src, src_ids, dst, dst_ids)
        check_pairs(Rows(src), src_ids, Rows(dst), dst_ids)
        BlockCopy(Rows(src), src_ids, Rows(dst), dst_ids).run()
        assert torch.equal(dst, expected), (src_ids, dst_ids)


@pytest.mark.parametrize("way", [Way.SLICE, Way.GATHER, Way.SCATTER, Way.EACH])
def test_every_way_moves_any_bit_pattern_unchanged(way: Way) -> None:
    # SCATTER reinterprets rows as complex128: NaN payloads (signalling ones too) and
    # every other bit pattern must come through exactly.
    ids = {Way.SLICE: ([0, 1], [2, 3]), Way.GATHER: ([3, 0], [1, 2]),
           Way.SCATTER: ([0, 1], [3, 1]), Way.EACH: ([3, 0], [0, 2])}[way]
    src = torch.empty((4, 2, 2, 4, 2, 8), dtype=torch.float16)
    words = Rows(src).tensor
    seeded = torch.Generator().manual_seed(1)
    words.copy_(torch.randint(-(2**62), 2**62, words.shape, generator=seeded))
    words[:, 0] = 0x7FF0000000000001  # a signalling NaN as float64
    words[:, 1] = -0x0008000000000001  # a negative quiet NaN with a payload
    dst = torch.zeros_like(src)
    copy = BlockCopy(Rows(src), ids[0], Rows(dst), ids[1])
    assert copy.way is way
    copy.run()
    for s, d in zip(*ids, strict=True):
        assert torch.equal(Rows(dst).tensor[d], words[s])


def test_poison_overwrites_only_the_destination_blocks() -> None:
    src, dst = blocks(4, seed=3), blocks(6, seed=4)
    before = dst.clone()
    copy = BlockCopy(Rows(src), [0, 2], Rows(dst), [5, 1])
    copy.poison()
    rows = Rows(dst).tensor
    assert bool((rows[[1, 5]] == POISON).all())
    assert torch.equal(dst[[0, 2, 3, 4]], before[[0, 2, 3, 4]])


def test_a_torn_copy_keeps_the_first_half_and_poisons_the_rest() -> None:
    src, dst = blocks(4, seed=5), blocks(4, seed=6)
    copy = BlockCopy(Rows(src), [3], Rows(dst), [0])
    copy.run()
    copy.poison(torn=True)
    rows, width = Rows(dst).tensor, Rows(dst).tensor.shape[1]
    assert torch.equal(rows[0, : width // 2], Rows(src).tensor[3, : width // 2])
    assert bool((rows[0, width // 2:] == POISON).all())


@pytest.mark.parametrize(("src_ids", "dst_ids", "match"), [
    ([0, 1], [0], "one to one"),
    ([0, 9], [0, 1], "source blocks"),
    ([0, 1], [0, -1], "destination blocks"),
    ([0, 1], [2, 2], "once"),
    ([True], [0], "source blocks"),
])
def test_bad_ids_are_refused(src_ids: list[int], dst_ids: list[int], match: str) -> None:
    with pytest.raises(BadBlockIds, match=match):
        check_pairs(Rows(blocks(4)), src_ids, Rows(blocks(4)), dst_ids)


@pytest.mark.parametrize("way", [Way.SLICE, Way.GATHER, Way.SCATTER, Way.EACH])
def test_every_way_releases_the_gil_while_it_copies(way: Way) -> None:
    """What lets a worker thread copy while the caller runs: the caller must get the GIL
    while the copy is in torch. With a long switch interval, a copy that held the GIL
    would let the caller run only after it returned, when ``copying`` is false again."""
    count = 2048  # 8 KiB rows: 16 MiB moved, out of twice as many rows per side
    src = torch.ones((2 * count, 1024), dtype=torch.int64)
    dst = torch.zeros_like(src)
    rng = random.Random(0)
    scattered, other = rng.sample(range(2 * count), count), rng.sample(range(2 * count), count)
    ids = {Way.SLICE: (list(range(count)), list(range(count))),
           Way.GATHER: (scattered, list(range(count))),
           Way.SCATTER: (list(range(count)), scattered),
           Way.EACH: (scattered, other)}[way]
    copy = BlockCopy(Rows(src), ids[0], Rows(dst), ids[1])
    assert copy.way is way
    state = {"copying": False, "seen": 0}

    def worker() -> None:
        for _ in range(4):
            state["copying"] = True
            copy.run()
            state["copying"] = False

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    try:
        thread = threading.Thread(target=worker)
        thread.start()
        while thread.is_alive():
            state["seen"] += state["copying"]
            time.sleep(0)  # hand the GIL back, so the worker never waits long for it
        thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert state["seen"] > 0, state


def test_each_copies_without_the_private_foreach_function(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(copyplan, "_FOREACH_COPY", None)
    src, dst = blocks(10, seed=7), blocks(10, seed=8)
    expected = naive(src, [2, 3, 9], dst, [0, 1, 6])
    copy = BlockCopy(Rows(src), [2, 3, 9], Rows(dst), [0, 1, 6])
    assert copy.way is Way.EACH
    copy.run()
    assert torch.equal(dst, expected)


def merged_one_by_one(src_ids: list[int], dst_ids: list[int]) -> list[tuple[int, int, int]]:
    """The runs, merged pair by pair in a plain loop (what :func:`runs` computes on ints)."""
    merged: list[tuple[int, int, int]] = []
    for s, d in sorted(zip(src_ids, dst_ids, strict=True), key=lambda pair: pair[1]):
        if merged and merged[-1][0] + merged[-1][2] == s and merged[-1][1] + merged[-1][2] == d:
            merged[-1] = (merged[-1][0], merged[-1][1], merged[-1][2] + 1)
        else:
            merged.append((s, d, 1))
    return merged


@pytest.mark.parametrize("seed", range(6))
def test_runs_match_a_pair_by_pair_merge(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(200):
        count = rng.randint(1, 40)
        dst_ids = rng.sample(range(rng.randint(count, 3 * count)), count)
        if rng.random() < 0.5:  # runs: consecutive sources for consecutive destinations
            start = rng.randint(0, 50)
            src_ids = [start + d - min(dst_ids) if rng.random() < 0.8 else rng.randrange(60)
                       for d in dst_ids]
        else:
            src_ids = [rng.randrange(rng.randint(1, 60)) for _ in range(count)]  # repeats too
        assert runs(src_ids, dst_ids) == merged_one_by_one(src_ids, dst_ids), (src_ids, dst_ids)


def test_runs_do_not_merge_a_source_step_back_to_zero_with_a_destination_gap() -> None:
    # pairs are merged on ints dst * big + src with big = max(src) + 2: a destination
    # step of 2 with the source falling from its largest to 0 must stay two runs
    assert runs([5, 0], [0, 2]) == [(5, 0, 1), (0, 2, 1)]
    assert runs([0, 6, 0], [3, 4, 6]) == [(0, 3, 1), (6, 4, 1), (0, 6, 1)]
    assert runs([2, 3, 4, 0, 1], [7, 8, 9, 10, 11]) == [(2, 7, 3), (0, 10, 2)]


@pytest.mark.parametrize(("src_ids", "dst_ids", "way"), [
    ([5, 3, 4], [2, 0, 1], Way.SLICE),  # one run, given out of order
    ([1, 0], [6, 5], Way.SLICE),
    ([9, 2, 6, 0], [3, 1, 0, 2], Way.GATHER),  # destinations: one range, out of order
    ([2, 0, 3, 1], [9, 4, 0, 7], Way.SCATTER),  # sources: one range, once each, out of order
    ([1, 1, 2], [0, 5, 9], Way.EACH),  # sources span one range but repeat
    ([0, 1, 7, 8], [10, 11, 3, 4], Way.EACH),  # two runs of two
    ([4, 4, 4], [9, 1, 5], Way.EACH),  # one source everywhere
])
def test_the_way_for_ids_in_no_simple_order(src_ids: list[int], dst_ids: list[int],
                                            way: Way) -> None:
    src, dst = blocks(12, seed=11), blocks(12, seed=12)
    expected = naive(src, src_ids, dst, dst_ids)
    copy = BlockCopy(Rows(src), src_ids, Rows(dst), dst_ids)
    assert copy.way is way
    copy.run()
    assert torch.equal(dst, expected)


@pytest.mark.parametrize("pattern", ["contiguous", "scattered", "both", "runs"])
@pytest.mark.parametrize("direction", ["store", "load"])
@pytest.mark.parametrize("count", [1, 2, 16, 300])
def test_big_jobs_move_the_right_bytes(pattern: str, direction: str, count: int) -> None:
    """Store (device rows -> pool slots) and load (back) between tensors of different
    lengths, for the patterns the benchmark times and for jobs made of runs."""
    rng = random.Random(f"{pattern}-{direction}-{count}")
    pool, device = blocks(3 * count + 3, seed=21), blocks(3 * count + 5, seed=22)
    slots, rows = list(range(3, 3 + count)), list(range(2, 2 + count))
    if pattern in ("scattered", "both"):
        slots = rng.sample(range(len(pool)), count)
    if pattern == "both":
        rows = rng.sample(range(len(device)), count)
    if pattern == "runs":  # three runs, apart on both sides, listed in another order
        cut = sorted(rng.sample(range(1, count), 2)) if count > 2 else [count, count]
        chunks = [list(zip(slots[a:b], rows[a:b], strict=True))
                  for a, b in pairwise([0, *cut, count])]
        # shifts whose differences never agree with the gap between two runs in the
        # list, so no run continues another whichever order they come in
        pairs = [(s + (2 * count, 0, count)[i], r + (0, count, 2 * count)[i])
                 for i, chunk in enumerate(chunks) for s, r in chunk]
        bounds = list(pairwise([0, *cut, count]))
        rng.shuffle(bounds)
        pairs = [pair for a, b in bounds for pair in pairs[a:b]]
        slots, rows = [s for s, _ in pairs], [r for _, r in pairs]
    src, src_ids, dst, dst_ids = ((device, rows, pool, slots) if direction == "store"
                                  else (pool, slots, device, rows))
    check_pairs(Rows(src), src_ids, Rows(dst), dst_ids)
    expected = naive(src, src_ids, dst, dst_ids)
    copy = BlockCopy(Rows(src), src_ids, Rows(dst), dst_ids)
    if count > 2:
        scattered = Way.SCATTER if direction == "store" else Way.GATHER
        assert copy.way is {"contiguous": Way.SLICE, "scattered": scattered,
                            "both": Way.EACH, "runs": Way.EACH}[pattern]
        continued = sum(s2 == s1 + 1 and d2 == d1 + 1 for (s1, d1), (s2, d2)
                        in pairwise(zip(src_ids, dst_ids, strict=True)))
        assert copy.copies == {"both": count - continued, "runs": 3}.get(pattern, 1)
    copy.run()
    assert torch.equal(dst, expected)


@pytest.mark.parametrize(("src_ids", "dst_ids", "copies"), [
    ([0, 1, 7, 8], [10, 11, 3, 4], 2),  # two runs, each in order
    ([7, 8, 0, 1], [3, 4, 10, 11], 2),  # the same runs, listed the other way round
    ([0, 7, 1, 8], [10, 3, 11, 4], 4),  # the runs' pairs listed apart: not merged
    ([8, 7, 1, 0], [4, 3, 11, 10], 4),  # each run backwards: not merged
    ([2, 3, 4, 9], [5, 6, 7, 0], 2),
    ([5, 5, 6], [0, 8, 9], 2),  # a repeated source, then a run from it
])
def test_each_copies_one_run_at_a_time_merging_pairs_in_the_order_given(
        src_ids: list[int], dst_ids: list[int], copies: int) -> None:
    src, dst = blocks(12, seed=17), blocks(12, seed=18)
    expected = naive(src, src_ids, dst, dst_ids)
    copy = BlockCopy(Rows(src), src_ids, Rows(dst), dst_ids)
    assert copy.way is Way.EACH
    assert copy.copies == copies
    copy.run()
    assert torch.equal(dst, expected)


def test_an_empty_copy_moves_and_poisons_nothing() -> None:
    src, dst = blocks(3, seed=13), blocks(3, seed=14)
    before = dst.clone()
    copy = BlockCopy(Rows(src), [], Rows(dst), [])
    assert (copy.blocks, copy.nbytes, copy.copies) == (0, 0, 0)
    copy.run()
    copy.poison()
    assert torch.equal(dst, before)


@pytest.mark.parametrize(("src_ids", "dst_ids"), [
    ([7, 3, 5], [0, 1, 2]), ([0, 1, 2], [7, 3, 5]), ([7, 3, 5], [2, 8, 4]),
])
def test_a_planned_copy_keeps_its_ids_after_the_caller_drops_or_changes_them(
        src_ids: list[int], dst_ids: list[int]) -> None:
    """Index tensors live on buffers the plan built: they must outlive the caller's lists.

    The caller's lists are this test's own copies (pytest keeps the parameters), so
    ``del`` frees them at once: they hold ints and no cycle. The young generations are
    collected for anything else the plan dropped; a full collection (``gc.collect()``)
    would scan the whole session's heap, 2.1 s of CPU in the default tier."""
    src_ids, dst_ids = list(src_ids), list(dst_ids)
    src, dst = blocks(10, seed=15), blocks(10, seed=16)
    expected = naive(src, src_ids, dst, dst_ids)
    copy = BlockCopy(Rows(src), src_ids, Rows(dst), dst_ids)
    planned_dst = list(dst_ids)
    src_ids[:] = [0] * len(src_ids)
    dst_ids[:] = [9] * len(dst_ids)
    del src_ids, dst_ids
    gc.collect(1)
    _ = [list(range(64)) for _ in range(100)]  # reuse freed memory
    copy.run()
    assert torch.equal(dst, expected)
    copy.poison()
    assert bool((Rows(dst).tensor[planned_dst] == POISON).all())
    assert torch.equal(dst[9], expected[9])


@pytest.mark.parametrize(("src_ids", "dst_ids"), [([1.0], [0]), ([0], ["1"]), ([0, None], [1, 2])])
def test_ids_that_are_not_ints_are_refused(src_ids: list[object], dst_ids: list[object]) -> None:
    with pytest.raises(BadBlockIds, match="must be ints"):
        check_pairs(Rows(blocks(4)), src_ids, Rows(blocks(4)), dst_ids)  # type: ignore[arg-type]  # the wrong types are the point


@pytest.mark.parametrize(("src_ids", "dst_ids", "way", "copies"), [
    ([4], [1], Way.SLICE, 1),
    ([3, 4, 5], [0, 1, 2], Way.SLICE, 1),
    ([5, 3, 4], [2, 0, 1], Way.SLICE, 1),  # one run, out of order
    ([5, 1, 7], [2, 3, 4], Way.EACH, 3),  # a gather on one device
    ([0, 1, 2], [7, 1, 4], Way.EACH, 3),  # a scatter on one device
    ([9, 2, 6, 0], [3, 1, 0, 2], Way.EACH, 4),
    ([0, 1, 7, 8], [10, 11, 3, 4], Way.EACH, 2),
])
def test_across_devices_the_plan_uses_no_index_kernel(
        src_ids: list[int], dst_ids: list[int], way: Way, copies: int,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Host <-> CUDA (what CudaEngine plans; no GPU here): the rows say they live on
    another device, so the plan must copy runs one by one, never gather or scatter."""
    src, dst = blocks(12, seed=19), blocks(12, seed=20)
    expected = naive(src, src_ids, dst, dst_ids)
    device_rows = Rows(dst)
    device_rows.torch_device = torch.device("cuda", 0)  # only the plan reads it
    copy = BlockCopy(Rows(src), src_ids, device_rows, dst_ids)
    assert (copy.way, copy.copies) == (way, copies)

    def no_foreach(*_: object, **__: object) -> None:
        raise AssertionError("_foreach_copy_ runs on one device only")

    monkeypatch.setattr(copyplan, "_FOREACH_COPY", no_foreach)
    copy.run(non_blocking=True)
    assert torch.equal(dst, expected)
