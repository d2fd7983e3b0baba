"""Unit tests of ``kvoffload.impl.vllm_facade``: vLLM's API over the reference manager."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from kvoffload.impl.vllm_facade import VllmFacade
from kvoffload.impl.vllm_types import (
    CpuBlockIds,
    CpuOffloadingMetrics,
    OffloadingEvent,
    OffloadingStats,
    PrepareStoreOutput,
    RequestOffloadingContext,
    VllmLookupResult,
    VllmTypes,
)
from kvoffload.spec import NotReadable, Policy, UnmatchedCompleteLoad
from vllm_releases import common_module, release_or_skip, req_context, types_of


def facade(capacity: int = 2, *, enum_lookup: bool = True, events: bool = True) -> VllmFacade:
    return VllmFacade(capacity, "lru", events,
                      types=VllmTypes.stand_ins(enum_lookup=enum_lookup))


def test_lookup_in_the_enum_flavour() -> None:
    vllm = facade()
    vllm.prepare_store([b"a"], None)
    assert vllm.lookup(b"a", None) is VllmLookupResult.HIT_PENDING
    assert vllm.lookup(b"b", None) is VllmLookupResult.MISS
    vllm.complete_store([b"a"], None)
    assert vllm.lookup(b"a", None) is VllmLookupResult.HIT


def test_lookup_in_the_bool_or_none_flavour() -> None:
    vllm = facade(enum_lookup=False)
    vllm.prepare_store([b"a"], None)
    assert vllm.lookup(b"a", None) is None
    assert vllm.lookup(b"b", None) is False
    vllm.complete_store([b"a"], None)
    assert vllm.lookup(b"a", None) is True


def test_prepare_store_is_vllm_shaped_or_none_when_rejected() -> None:
    vllm = facade()
    out = vllm.prepare_store([b"a", b"b", b"a"], None)
    assert out == PrepareStoreOutput([b"a", b"b"], CpuBlockIds([0, 1]), [])
    vllm.complete_store([b"a", b"b"], None)
    vllm.prepare_load([b"a"], None)
    assert vllm.prepare_store([b"c", b"d"], None) is None
    assert vllm.prepare_store([b"c"], None) == PrepareStoreOutput(
        [b"c"], CpuBlockIds([1]), [b"b"])
    assert vllm.prepare_store([b"a"], None) == PrepareStoreOutput([], CpuBlockIds([]), [])


def test_prepare_load_gives_block_ids_and_misuse_raises() -> None:
    vllm = facade()
    vllm.prepare_store([b"a", b"b"], None)
    vllm.complete_store([b"b"], None)
    assert vllm.prepare_load([b"b"], None) == CpuBlockIds([1])
    with pytest.raises(NotReadable):
        vllm.prepare_load([b"a"], None)
    vllm.complete_load([b"b"], None)
    with pytest.raises(UnmatchedCompleteLoad):
        vllm.complete_load([b"b"], None)


def test_events_one_per_eviction_and_per_completion_in_order() -> None:
    vllm = facade(capacity=1)
    for key in [b"a", b"b"]:
        vllm.prepare_store([key], None)
        vllm.complete_store([key], None)
    events = list(vllm.take_events())
    assert all(isinstance(e, OffloadingEvent) and e.medium == "CPU" for e in events)
    assert [(e.keys, e.removed) for e in events] == [
        ([b"a"], False), ([b"a"], True), ([b"b"], False)]
    vllm.reset_cache()  # vLLM announces nothing here; the spec (and the facade) does
    assert [(e.keys, e.removed) for e in vllm.take_events()] == [([b"b"], True)]


def test_events_off_by_default_like_vllm() -> None:
    vllm = VllmFacade(2, types=VllmTypes.stand_ins())
    vllm.prepare_store([b"a"], None)
    vllm.complete_store([b"a"], None)
    assert list(vllm.take_events()) == []


def test_failed_store_and_touch() -> None:
    vllm = facade(capacity=2)
    vllm.prepare_store([b"a", b"b"], None)
    vllm.complete_store([b"a", b"b"], None)
    vllm.touch([b"a"], None)
    out = vllm.prepare_store([b"c"], None)
    assert out is not None
    assert out.evicted_keys == [b"b"]
    vllm.complete_store([b"c"], None, success=False)
    assert vllm.lookup(b"c", None) is VllmLookupResult.MISS


def test_hooks_and_defaults() -> None:
    vllm = VllmFacade(3, cache_policy="arc", types=VllmTypes.stand_ins())
    assert vllm.manager.policy is Policy.ARC
    assert vllm.on_new_request(None) == RequestOffloadingContext()
    assert vllm.has_pending_work() is False
    assert vllm.get_stats() == OffloadingStats({CpuOffloadingMetrics.CPU_CACHE_USAGE_PERC: 0.0})
    assert vllm.config_info() == [{}]
    with vllm.lock:
        vllm.on_schedule_end(None)
        vllm.on_request_finished(None)
        vllm.on_reset_flushed()
    vllm.shutdown()


def test_without_vllm_the_stand_ins_are_used() -> None:
    try:
        import vllm  # noqa: F401  # imported only to learn whether vLLM is there
    except ImportError:
        assert VllmFacade(1).types == VllmTypes.stand_ins()
    else:  # pragma: no cover - only where vLLM is installed
        assert VllmFacade(1).types.origin == "vllm"


# --- against vLLM's own classes, from the release wheels --------------------------

RELEASES = [("0.21.0", False), ("0.24.0", False), ("0.25.0", True), ("0.34.0", True)]


@pytest.mark.vllm_matrix
@pytest.mark.parametrize(("version", "enum_lookup"), RELEASES)
def test_facade_returns_vllms_own_classes(request: pytest.FixtureRequest, version: str,
                                          enum_lookup: bool) -> None:
    release = release_or_skip(request.config, version)
    base, types = release.base(), types_of(release)
    vllm = VllmFacade(2, "lru", True, types=types)
    ctx = req_context(release)
    out = vllm.prepare_store([b"a", b"b"], ctx)
    assert isinstance(out, base.PrepareStoreOutput)
    assert isinstance(out.store_spec, common_module(release).CPULoadStoreSpec)
    assert list(out.store_spec.block_ids) == [0, 1]
    pending = vllm.lookup(b"a", ctx)
    if enum_lookup:
        assert pending is base.LookupResult.HIT_PENDING
    else:
        assert pending is None
    vllm.complete_store([b"a", b"b"], ctx)
    events = list(vllm.take_events())
    assert all(isinstance(e, base.OffloadingEvent) for e in events)
    assert isinstance(vllm.prepare_load([b"a"], ctx), common_module(release).CPULoadStoreSpec)


@pytest.mark.vllm_matrix
@pytest.mark.parametrize(("version", "enum_lookup"), RELEASES)
def test_facade_offers_every_method_of_vllms_base_class(
        request: pytest.FixtureRequest, version: str, enum_lookup: bool) -> None:
    release = release_or_skip(request.config, version)
    theirs = release.base().OffloadingManager
    for name, member in inspect.getmembers(theirs):
        if name.startswith("_"):
            continue
        ours = getattr(VllmFacade, name, None)
        assert ours is not None, f"vLLM {version}'s OffloadingManager.{name} is missing"
        if inspect.isfunction(member):
            their_params = list(inspect.signature(member).parameters)
            our_params = list(inspect.signature(ours).parameters)
            assert our_params[:len(their_params)] == their_params, name


def test_the_fast_instance_lookup_matches_the_method() -> None:
    for enum_lookup in (True, False):
        vllm = facade(enum_lookup=enum_lookup)
        vllm.prepare_store([b"a", b"b"], None)
        vllm.complete_store([b"a"], None)
        for key in (b"a", b"b", b"c"):
            assert vllm.lookup(key, None) is VllmFacade.lookup(vllm, key, None)


@pytest.mark.parametrize("release", ["by-completions", "at-reset", "when-flushed"])
def test_reset_frees_running_copies_when_the_environment_says(release: str) -> None:
    types = dataclasses.replace(VllmTypes.stand_ins(), orphans_released=release)
    vllm = VllmFacade(1, types=types)
    vllm.prepare_store([b"a"], None)
    vllm.reset_cache()
    if release == "at-reset":  # vLLM before 0.34: its workers flush old jobs first
        assert vllm.prepare_store([b"b"], None) is not None
        return
    assert vllm.prepare_store([b"b"], None) is None  # a's copy may still be writing
    vllm.on_reset_flushed()
    if release == "by-completions":
        assert vllm.prepare_store([b"b"], None) is None  # no flush outside vLLM
        vllm.complete_store([b"a"], None)  # the old job's own completion frees it
    out = vllm.prepare_store([b"b"], None)
    assert out is not None
    assert out.keys_to_store == [b"b"]
    vllm.manager.check()
