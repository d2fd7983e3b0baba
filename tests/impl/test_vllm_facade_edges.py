"""The facade at vLLM's edges (issue 12): 0 slots, the constructor arguments of each
release, events in vLLM's form, ``get_stats``, and being the release's OffloadingManager."""

from __future__ import annotations

import abc
import dataclasses
import random
from collections.abc import Sequence
from typing import Any

import pytest

from kvoffload.impl.vllm_facade import UnsupportedArgument, VllmFacade
from kvoffload.impl.vllm_types import (
    CpuOffloadingMetrics,
    OffloadingStats,
    VllmLookupResult,
    VllmTypes,
)
from kvoffload.spec import BadCapacity, LookupResult, NotReadable
from vllm_releases import release_or_skip, req_context, types_of

USAGE, SKIPPED = CpuOffloadingMetrics.CPU_CACHE_USAGE_PERC, CpuOffloadingMetrics.STORES_SKIPPED
MISS, PENDING, HIT = VllmLookupResult.MISS, VllmLookupResult.HIT_PENDING, VllmLookupResult.HIT


def make(capacity: int = 4, **kwargs: Any) -> VllmFacade:
    return VllmFacade(num_blocks=capacity, types=VllmTypes.stand_ins(), **kwargs)


def usage(vllm: VllmFacade) -> float:
    stats = vllm.get_stats()
    assert isinstance(stats, OffloadingStats)
    return stats.reduce()[USAGE]


# --- 0 slots -----------------------------------------------------------------------


def test_zero_slots_are_accepted_and_every_store_is_rejected() -> None:
    vllm = make(0, enable_events=True)
    assert vllm.prepare_store([b"a"], None) is None
    assert vllm.prepare_store([b"a", b"a"], None) is None
    empty = vllm.prepare_store([], None)
    assert empty is not None
    assert (empty.keys_to_store, empty.evicted_keys) == ([], [])
    assert vllm.lookup(b"a", None) is MISS
    with pytest.raises(NotReadable):
        vllm.prepare_load([b"a"], None)
    vllm.complete_store([b"a"], None)  # nothing was stored: ignored, as in vLLM
    assert list(vllm.take_events()) == []
    assert usage(vllm) == 0.0
    vllm.reset_cache()
    assert vllm.prepare_store([b"b"], None) is None


@pytest.mark.parametrize("bad", [-1, 1.5, True, "4"])
def test_a_tier_size_that_is_not_an_int_of_zero_or_more_is_refused(bad: Any) -> None:
    with pytest.raises(BadCapacity):
        make(bad)


def test_the_size_is_num_blocks_or_034s_num_chunks_exactly_one() -> None:
    vllm = VllmFacade(num_chunks=3, types=VllmTypes.stand_ins())
    assert vllm.num_slots == 3
    with pytest.raises(UnsupportedArgument):
        VllmFacade(num_blocks=3, num_chunks=3, types=VllmTypes.stand_ins())
    with pytest.raises(UnsupportedArgument):
        VllmFacade(types=VllmTypes.stand_ins())


# --- store_threshold, max_tracker_size and the rest of the constructor ---------------


@pytest.mark.parametrize("threshold", [0, 1])
def test_a_threshold_under_two_filters_nothing_and_counts_nothing(threshold: int) -> None:
    vllm = make(store_threshold=threshold)
    assert vllm.counts is None
    out = vllm.prepare_store([b"a"], None)
    assert out is not None
    assert out.keys_to_store == [b"a"]
    assert SKIPPED not in vllm.get_stats().reduce()


def test_a_threshold_stores_only_keys_looked_up_often_enough() -> None:
    vllm = make(store_threshold=3, max_tracker_size=2)
    for _ in range(3):
        vllm.lookup(b"a", None)
    vllm.lookup(b"b", None)
    out = vllm.prepare_store([b"b", b"a", b"c"], None)
    assert out is not None
    assert out.keys_to_store == [b"a"]
    assert vllm.get_stats().reduce()[SKIPPED] == 2
    assert vllm.get_stats().reduce()[SKIPPED] == 0  # reported once, then reset


def test_the_tracker_forgets_the_least_recently_looked_up_key() -> None:
    vllm = make(store_threshold=2, max_tracker_size=2)
    vllm.lookup(b"a", None)
    vllm.lookup(b"b", None)
    vllm.lookup(b"a", None)  # a is now the most recent
    vllm.lookup(b"c", None)  # the tracker is full: b, the oldest, leaves
    assert vllm.counts is not None
    assert dict(vllm.counts) == {b"a": 2, b"c": 1}
    vllm.lookup(b"b", None)  # b starts again from one; a leaves
    assert dict(vllm.counts) == {b"c": 1, b"b": 1}


def test_counting_lives_in_the_facade_the_managers_lookup_stays_pure() -> None:
    vllm = make(store_threshold=2)
    before = vllm.manager.view()
    assert vllm.lookup(b"a", None) is MISS
    assert VllmFacade.lookup(vllm, b"a", None) is MISS  # the method counts too
    assert vllm.manager.view() == before
    assert vllm.manager.lookup(b"a") is LookupResult.MISS
    assert vllm.counts is not None
    assert vllm.counts[b"a"] == 2


def test_arguments_the_facade_cannot_honour_are_refused_not_dropped() -> None:
    with pytest.raises(UnsupportedArgument, match="cache_policy_module_path"):
        make(cache_policy_module_path="my.policies")
    with pytest.raises(UnsupportedArgument, match="max_tracker_size"):
        make(store_threshold=2, max_tracker_size=0)


class Request:
    """A request context with 0.34's per-request state (``get_state`` / ``set_state``)."""

    def __init__(self) -> None:
        self.state: dict[type, Any] = {}

    def get_state(self, cls: type) -> Any:
        return self.state.get(cls)

    def set_state(self, value: Any) -> None:
        self.state[type(value)] = value


def offers(capacity: int = 8, **kwargs: Any) -> VllmFacade:
    types = dataclasses.replace(VllmTypes.stand_ins(), threshold_counts="offers")
    return VllmFacade(num_chunks=capacity, types=types, **kwargs)


def test_034s_threshold_counts_offers_once_per_request_not_lookups() -> None:
    vllm = offers(store_threshold=2)
    first, second = Request(), Request()
    vllm.lookup(b"a", first)
    vllm.lookup(b"a", first)  # lookups do not count in 0.34
    assert vllm.prepare_store([b"a"], first).keys_to_store == []
    assert vllm.prepare_store([b"a"], first).keys_to_store == []  # a retry: no new count
    assert vllm.get_stats().reduce()[SKIPPED] == 1  # skipped once for this request
    assert vllm.prepare_store([b"a"], second).keys_to_store == [b"a"]  # another request
    vllm.reset_cache()  # a request's record of counted offers ends with the reset
    assert vllm.counts == {b"a": 2}  # the tracker outlives the reset, as in vLLM
    assert vllm.prepare_store([b"a"], first).keys_to_store == [b"a"]
    assert vllm.counts == {b"a": 3}


def test_034s_tracker_keeps_the_keys_offered_now() -> None:
    vllm = offers(store_threshold=3, max_tracker_size=2)
    vllm.prepare_store([b"a", b"b"], Request())
    vllm.prepare_store([b"a", b"b", b"c"], Request())  # full of keys offered now: c waits
    assert vllm.counts == {b"a": 2, b"b": 2}
    vllm.prepare_store([b"c"], Request())  # a, the least recent, makes room for c
    assert vllm.counts == {b"b": 2, b"c": 1}
    # without request state every offer counts
    assert vllm.prepare_store([b"b"], None).keys_to_store == [b"b"]


def test_info_gives_the_config_info() -> None:
    class Info:
        def as_config_info(self) -> dict[str, int]:
            return {"cpu_num_chunks": 4}

    assert make(info=Info()).config_info() == [{"cpu_num_chunks": 4}]
    assert make().config_info() == [{}]


# --- events in vLLM's form -----------------------------------------------------------


def test_a_block_stored_and_evicted_between_drains_is_reported_both_ways() -> None:
    vllm = make(2, enable_events=True)
    for keys in ([b"a", b"b"], [b"c"], [b"d"]):
        vllm.prepare_store(keys, None)
        vllm.complete_store(keys, None)
    native = vllm.manager.take_events()  # the net change: c and d READY, nothing else
    assert (native.stored, native.removed) == ({b"c", b"d"}, frozenset())
    assert [(e.keys, e.removed) for e in vllm.take_events()] == [
        ([b"a", b"b"], False), ([b"a"], True), ([b"c"], False), ([b"b"], True),
        ([b"d"], False)]
    assert list(vllm.take_events()) == []


def test_only_blocks_that_became_ready_make_a_stored_event() -> None:
    vllm = make(2, enable_events=True)
    vllm.prepare_store([b"a", b"b"], None)
    vllm.complete_store([b"a", b"a", b"x"], None)  # duplicates and strangers: once / never
    vllm.complete_store([b"b"], None, success=False)  # a failed store: no event (0.24)
    assert [(e.keys, e.removed) for e in vllm.take_events()] == [([b"a"], False)]


def test_a_reset_announces_the_ready_blocks_it_drops_after_the_pending_events() -> None:
    vllm = make(3, enable_events=True)
    vllm.prepare_store([b"a", b"b", b"c"], None)
    vllm.complete_store([b"a", b"b"], None)
    assert [(e.keys, e.removed) for e in vllm.take_events()] == [([b"a", b"b"], False)]
    vllm.prepare_load([b"a"], None)
    vllm.complete_store([b"c"], None)
    vllm.reset_cache()  # c's stored event first, then one removal: a, b, c (c is READY)
    events = [(sorted(e.keys), e.removed) for e in vllm.take_events()]
    assert events == [([b"c"], False), ([b"a", b"b", b"c"], True)]
    vllm.reset_cache()  # nothing READY: nothing to announce
    assert list(vllm.take_events()) == []


def test_a_subscriber_replaying_the_events_sees_the_ready_set() -> None:
    vllm = make(2, enable_events=True)
    subscriber: set[bytes] = set()
    for keys in ([b"a"], [b"b", b"c"], [b"d"], [b"a", b"e"]):
        out = vllm.prepare_store(keys, None)
        if out is not None:
            vllm.complete_store(out.keys_to_store, None, success=keys != [b"d"])
        if keys == [b"b", b"c"]:
            vllm.reset_cache()
        for event in vllm.take_events():
            (subscriber.difference_update if event.removed else subscriber.update)(event.keys)
        ready = {k for k in [b"a", b"b", b"c", b"d", b"e"] if vllm.lookup(k, None) is HIT}
        assert subscriber == ready


@dataclasses.dataclass
class TrackedEvent:
    """An event class with 0.34's extra fields."""

    keys: list[bytes]
    medium: Any
    removed: bool
    removal_expected: bool = False
    metadata_only: bool = False
    req_context: Any = dataclasses.field(default=None, compare=False)


def test_034s_form_stored_events_expect_removal_failed_stores_are_metadata_only() -> None:
    types = dataclasses.replace(VllmTypes.stand_ins(), offloading_event=TrackedEvent,
                                tracked_events=True)
    vllm = VllmFacade(num_chunks=3, enable_events=True, types=types)
    vllm.prepare_store([b"a", b"b"], "ctx")
    vllm.complete_store([b"a"], "ctx")
    vllm.complete_store([b"b"], "ctx", success=False)
    events = list(vllm.take_events())
    assert events == [TrackedEvent([b"a"], "CPU", False, removal_expected=True),
                      TrackedEvent([b"b"], "CPU", True, metadata_only=True)]
    assert events[0].req_context == "ctx"
    # a metadata-only removal drops the keys stored again before the drain
    vllm.prepare_store([b"b", b"c"], "ctx")
    vllm.complete_store([b"b", b"c"], "ctx", success=False)
    vllm.prepare_store([b"b"], "ctx")
    assert list(vllm.take_events()) == [TrackedEvent([b"c"], "CPU", True, metadata_only=True)]


# --- get_stats ---------------------------------------------------------------------------


def test_usage_counts_stores_in_flight_and_blocks_being_read() -> None:
    vllm = make(4)
    assert usage(vllm) == 0.0
    vllm.prepare_store([b"a", b"b"], None)
    assert usage(vllm) == 0.5
    vllm.complete_store([b"a"], None)
    vllm.complete_store([b"b"], None, success=False)
    assert usage(vllm) == 0.0
    vllm.prepare_load([b"a"], None)
    vllm.prepare_load([b"a"], None)  # a second reader of the same block: one slot
    vllm.prepare_store([b"c"], None)
    assert usage(vllm) == 0.5
    vllm.complete_load([b"a"], None)
    assert usage(vllm) == 0.5
    vllm.complete_load([b"a"], None)
    assert usage(vllm) == 0.25
    vllm.reset_cache()
    assert usage(vllm) == 0.0


def test_no_stats_where_the_release_had_none() -> None:
    types = dataclasses.replace(VllmTypes.stand_ins(), stats=None, metrics=None)
    assert VllmFacade(2, types=types).get_stats() is None


# --- the release's OffloadingManager ---------------------------------------------------


class Base(abc.ABC):
    @abc.abstractmethod
    def lookup(self, key: bytes, req_context: Any) -> Any: ...

    def added_later(self) -> str:
        return "the base's default"


class BaseWithNewDuty(Base):
    @abc.abstractmethod
    def new_duty(self) -> None: ...


def test_the_facade_is_an_instance_of_the_releases_base_class() -> None:
    types = dataclasses.replace(VllmTypes.stand_ins(), offloading_manager=Base)
    vllm = VllmFacade(2, types=types)
    assert isinstance(vllm, Base)
    assert isinstance(vllm, VllmFacade)
    assert vllm.added_later() == "the base's default"
    assert type(VllmFacade(3, types=types)) is type(vllm)  # one class per base
    assert not isinstance(make(), Base)


def test_a_new_abstract_method_fails_loudly_at_construction() -> None:
    types = dataclasses.replace(VllmTypes.stand_ins(), offloading_manager=BaseWithNewDuty)
    with pytest.raises(TypeError, match="new_duty"):
        VllmFacade(2, types=types)


def test_lookup_is_answered_while_a_store_is_in_flight() -> None:
    vllm = make(store_threshold=2)
    vllm.lookup(b"a", None)
    vllm.lookup(b"a", None)
    vllm.prepare_store([b"a"], None)
    assert vllm.lookup(b"a", None) is PENDING
    vllm.complete_store([b"a"], None)
    assert vllm.lookup(b"a", None) is HIT


# --- against vLLM's own code, from the release wheels -------------------------------

RELEASES = ["0.21.0", "0.24.0", "0.25.0", "0.34.0"]


@pytest.mark.vllm_matrix
@pytest.mark.parametrize("version", RELEASES)
def test_with_a_releases_types_the_facade_is_its_offloading_manager(
        request: pytest.FixtureRequest, version: str) -> None:
    release = release_or_skip(request.config, version)
    types = types_of(release)
    vllm = VllmFacade(num_blocks=2, types=types)
    assert isinstance(vllm, release.base().OffloadingManager)
    assert types.threshold_counts == ("offers" if version == "0.34.0" else "lookups")
    assert types.tracked_events is (version == "0.34.0")
    stats = vllm.get_stats()
    if version == "0.21.0":  # its manager had no stats
        assert stats is None
    else:
        metrics = release.module(
            "vllm.distributed.kv_transfer.kv_connector.v1.offloading.metrics")
        assert isinstance(stats, metrics.OffloadingConnectorStats)


def complete_a_store(rng: random.Random, storing: list[list[bytes]], managers: Sequence[Any],
                     context: Any, success_rate: float) -> tuple[list[bytes], bool]:
    """Complete one pending store job, picked at random, on every manager alike (success
    with ``success_rate``); returns the job and whether it succeeded."""
    job = storing.pop(rng.randrange(len(storing)))
    success = rng.random() < success_rate
    for manager in managers:
        manager.complete_store(job, context, success)
    return job, success


def lockstep(theirs: Any, ours: VllmFacade, context: Any, seed: int, steps: int = 400) -> int:
    """Drive vLLM's manager and the facade with the same well-formed calls; every
    answer, output, event and stat must agree. Returns the number of comparisons."""
    rng = random.Random(seed)
    keys = [bytes([k]) for k in range(12)]
    ready: list[bytes] = []
    storing: list[list[bytes]] = []
    loading: list[list[bytes]] = []
    compared = 0

    def same(a: Any, b: Any) -> None:
        nonlocal compared
        assert a == b, (a, b)
        compared += 1

    for _ in range(steps):
        op = rng.randrange(7)
        if op == 0:
            key = rng.choice(keys)
            same(theirs.lookup(key, context), ours.lookup(key, context))
        elif op == 1:
            offer = rng.sample(keys, rng.randint(1, 3))
            a, b = theirs.prepare_store(offer, context), ours.prepare_store(offer, context)
            same(a is None, b is None)
            if a is not None:
                same((a.keys_to_store, list(a.store_spec.block_ids), a.evicted_keys),
                     (b.keys_to_store, list(b.store_spec.block_ids), b.evicted_keys))
                ready[:] = [k for k in ready if k not in a.evicted_keys]
                if a.keys_to_store:
                    storing.append(list(a.keys_to_store))
        elif op == 2 and storing:
            job, success = complete_a_store(rng, storing, (theirs, ours), context, 0.8)
            if success:
                ready.extend(job)
        elif op == 3 and ready:
            job = rng.sample(ready, min(len(ready), rng.randint(1, 2)))
            same(list(theirs.prepare_load(job, context).block_ids),
                 list(ours.prepare_load(job, context).block_ids))
            loading.append(job)
        elif op == 4 and loading:
            job = loading.pop(rng.randrange(len(loading)))
            theirs.complete_load(job, context)
            ours.complete_load(job, context)
        elif op == 5:
            touched = rng.sample(keys, 2)
            theirs.touch(touched, context)
            ours.touch(touched, context)
        else:
            same([(e.keys, e.removed) for e in theirs.take_events()],
                 [(e.keys, e.removed) for e in ours.take_events()])
            same(theirs.get_stats().values, ours.get_stats().values)
    return compared


@pytest.mark.vllm_matrix
@pytest.mark.parametrize("version", ["0.24.0", "0.25.0"])
@pytest.mark.parametrize(("capacity", "threshold"), [(0, 0), (1, 0), (3, 0), (3, 2), (5, 3)])
def test_in_lockstep_with_vllms_own_manager(request: pytest.FixtureRequest, version: str,
                                            capacity: int, threshold: int) -> None:
    release = release_or_skip(request.config, version)
    manager_class = release.manager_class()
    for seed in range(5):
        theirs = manager_class(num_blocks=capacity, cache_policy="lru", enable_events=True,
                               store_threshold=threshold, max_tracker_size=4)
        ours = VllmFacade(num_blocks=capacity, cache_policy="lru", enable_events=True,
                          store_threshold=threshold, max_tracker_size=4,
                          types=types_of(release))
        assert lockstep(theirs, ours, req_context(release), seed) > 100


def test_a_load_names_one_slot_per_key_of_the_call_duplicates_included() -> None:
    # vLLM's worker pairs block_ids[i] with the call's i-th key (found by kvoffload check)
    vllm = make(3)
    vllm.prepare_store([b"a", b"b"], None)
    vllm.complete_store([b"a", b"b"], None)
    assert list(vllm.prepare_load([b"b", b"a", b"b"], None).block_ids) == [1, 0, 1]
    vllm.complete_load([b"b", b"a", b"b"], None)
    assert usage(vllm) == 0.0


def test_usage_counts_loads_begun_before_the_first_get_stats() -> None:
    vllm = make(4)
    vllm.prepare_store([b"a", b"b"], None)
    vllm.complete_store([b"a", b"b"], None)
    vllm.prepare_load([b"a", b"b"], None)
    vllm.prepare_load([b"a"], None)
    assert usage(vllm) == 0.5  # readers are counted from here on
    vllm.complete_load([b"a"], None)
    vllm.complete_load([b"a", b"b"], None)
    assert usage(vllm) == 0.0


@pytest.mark.vllm_matrix
@pytest.mark.parametrize("threshold", [0, 2, 3])
def test_in_lockstep_with_vllm_034s_own_manager(request: pytest.FixtureRequest,
                                                threshold: int) -> None:
    # 0.34 ranks victims by request position, not LRU: a tier larger than the keys keeps
    # evictions out, and everything else (admission by offers per request, events with
    # their 0.34 fields, the usage gauge, the skipped counter) must agree
    release = release_or_skip(request.config, "0.34.0")
    names = release.module("vllm.v1.kv_offload.cpu.common").CPUOffloadingMetrics
    kinds: set[tuple[bool, bool]] = set()
    for seed in range(5):
        rng = random.Random(seed)
        contexts = [req_context(release) for _ in range(3)]
        theirs = release.manager_class()(num_chunks=16, enable_events=True,
                                         store_threshold=threshold, max_tracker_size=4)
        ours = VllmFacade(num_chunks=16, enable_events=True, store_threshold=threshold,
                          max_tracker_size=4, types=types_of(release))
        keys = [bytes([k]) * 8 for k in range(12)]
        storing: list[list[bytes]] = []
        reset_in_flight = False
        for _ in range(300):
            op, context = rng.randrange(5), rng.choice(contexts)
            if op == 0:
                key = rng.choice(keys)
                assert theirs.lookup(key, context) == ours.lookup(key, context)
            elif op == 1:
                offer = rng.sample(keys, rng.randint(1, 3))
                a, b = theirs.prepare_store(offer, context), ours.prepare_store(offer, context)
                assert a.keys_to_store == b.keys_to_store
                # a reset with copies running: the facade hands the freed slots out in
                # another (equally valid) order than vLLM's restart from slot 0
                slots = list(a.store_spec.block_ids), list(b.store_spec.block_ids)
                assert slots[0] == slots[1] if not reset_in_flight else (
                    len(slots[0]) == len(slots[1]))
                if a.keys_to_store:
                    storing.append(list(a.keys_to_store))
            elif op == 2 and storing:
                complete_a_store(rng, storing, (theirs, ours), context, 0.7)
            elif op == 3 and rng.random() < 0.1:  # vLLM drops the old jobs' completions
                for manager in (theirs, ours):
                    manager.reset_cache()
                    manager.on_reset_flushed()
                reset_in_flight = reset_in_flight or bool(storing)
                storing.clear()
            else:
                events = [(e.keys, e.removed, e.metadata_only, e.removal_expected)
                          for e in ours.take_events()]
                their_events = [(e.keys, e.removed, e.metadata_only, e.removal_expected)
                                for e in theirs.take_events()]
                # the one difference on purpose: a reset announces the READY blocks it
                # drops (a plain removal; without evictions no other is made here)
                assert their_events == [e for e in events if not (e[1] and not e[2])]
                kinds.update((removed, metadata) for _, removed, metadata, _ in events)
                mine, vllms = ours.get_stats().values, theirs.get_stats().values
                for name in (names.CPU_CACHE_USAGE_PERC, names.STORES_SKIPPED):
                    assert mine.get(name) == vllms.get(name), name
                assert ours.counts == theirs.counts
    assert {(False, False), (True, True)} <= kinds  # stored, and failed-store removals
