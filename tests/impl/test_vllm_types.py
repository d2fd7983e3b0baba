"""Unit tests of ``kvoffload.impl.vllm_types``: stand-ins, and vLLM's classes from wheels."""

from __future__ import annotations

import dataclasses

import pytest

from kvoffload.impl.vllm_types import (
    CpuBlockIds,
    OffloadingEvent,
    PrepareStoreOutput,
    VllmLookupResult,
    VllmTypes,
)
from kvoffload.spec import LookupResult
from vllm_releases import common_module, release_or_skip, types_of


def test_vllm_lookup_result_is_not_the_specs() -> None:
    assert VllmLookupResult is not LookupResult
    assert [m.name for m in VllmLookupResult] == ["MISS", "HIT", "HIT_PENDING", "RETRY"]


def test_stand_ins_choose_the_lookup_flavour() -> None:
    assert VllmTypes.stand_ins().lookup_result is VllmLookupResult
    assert VllmTypes.stand_ins(enum_lookup=False).lookup_result is None


def test_stand_in_block_ids() -> None:
    ids = CpuBlockIds([3, 1])
    assert (ids.block_ids, ids.medium()) == ([3, 1], "CPU")
    assert ids == CpuBlockIds([3, 1])
    assert ids != CpuBlockIds([1, 3])


def test_no_vllm_here_means_no_vllm_types() -> None:
    pytest.importorskip("kvoffload.impl")  # keeps the intent plain: vLLM is not installed
    try:
        import vllm  # noqa: F401  # imported only to learn whether vLLM is there
    except ImportError:
        assert VllmTypes.from_vllm() is None
    else:  # pragma: no cover - only where vLLM is installed
        assert VllmTypes.from_vllm() is not None


@pytest.mark.vllm_matrix
@pytest.mark.parametrize("version", ["0.21.0", "0.24.0", "0.25.0", "0.34.0"])
def test_stand_ins_have_vllms_field_names(request: pytest.FixtureRequest, version: str) -> None:
    release = release_or_skip(request.config, version)
    base = release.base()
    for ours, theirs in [(PrepareStoreOutput, base.PrepareStoreOutput),
                         (OffloadingEvent, base.OffloadingEvent)]:
        their_fields = [f.name for f in dataclasses.fields(theirs)]
        assert [f.name for f in dataclasses.fields(ours)] == their_fields[:3]
    assert hasattr(common_module(release).CPULoadStoreSpec([1]), "block_ids")


@pytest.mark.vllm_matrix
@pytest.mark.parametrize(("version", "enum_lookup", "orphans"),
                         [("0.21.0", False, "at-reset"), ("0.24.0", False, "at-reset"),
                          ("0.25.0", True, "at-reset"), ("0.34.0", True, "when-flushed")])
def test_types_from_a_release(request: pytest.FixtureRequest, version: str,
                              enum_lookup: bool, orphans: str) -> None:
    release = release_or_skip(request.config, version)
    types = types_of(release)
    assert (types.lookup_result is not None) is enum_lookup
    assert types.orphans_released == orphans
    assert types.prepare_store_output is release.base().PrepareStoreOutput
    assert str(getattr(types.medium, "value", types.medium)) == "CPU"
