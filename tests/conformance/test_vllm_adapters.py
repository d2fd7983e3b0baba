"""The vLLM adapter's hooks for a scheduler-shaped driver (the benchmark's agreement
check): keys passed through as vLLM bytes, and one request's context on every call."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kvoffload.conformance.adapter_api import EventBatch
from kvoffload.conformance.errors import Untranslatable
from kvoffload.conformance.target.vllm_adapters import VllmAdapter
from kvoffload.spec import LookupResult


class ReqContext:
    def __init__(self, req_id: str = "") -> None:
        self.req_id = req_id


class Recorder:
    """A vLLM 0.19-era manager that records what each lookup received."""

    def __init__(self) -> None:
        self.seen: list[tuple[bytes, object]] = []

    def lookup(self, key: bytes, req_context: ReqContext) -> bool | None:
        self.seen.append((key, req_context))
        return False


def test_raw_keys_reach_the_manager_unchanged() -> None:
    raw = b"\x01" * 8 + bytes(4)
    translated = VllmAdapter(Recorder(), "vllm-bool")
    passed = VllmAdapter(Recorder(), "vllm-bool", raw_keys=True)
    assert translated.lookup(raw) is LookupResult.MISS
    assert passed.lookup(raw) is LookupResult.MISS
    assert passed.manager.seen[0][0] == raw
    assert translated.manager.seen[0][0] != raw  # the key's text plus group index 0


def test_a_set_request_context_is_passed_on_every_call() -> None:
    adapter = VllmAdapter(Recorder(), "vllm-bool")
    adapter.lookup("a")
    fresh = adapter.manager.seen[-1][1]
    assert isinstance(fresh, ReqContext)
    assert fresh.req_id == "kvoffload-check"
    request = ReqContext("req-7")
    adapter.req_context = request
    adapter.lookup("a")
    adapter.lookup("b")
    assert [context for _, context in adapter.manager.seen[1:]] == [request, request]


def test_an_event_batch_replays_in_delivery_order() -> None:
    ready = {"a", "b"}
    EventBatch(((True, ("a",)), (False, ("c", "a")), (True, ("b",)))).replay_onto(ready)
    assert ready == {"a", "c"}


class FloatBlockIds(Recorder):
    """A vLLM-shaped manager whose load spec names block 0.5 (read through ``int()``, it
    looked like block 0)."""

    def prepare_load(self, keys: list[bytes], req_context: ReqContext) -> object:
        return SimpleNamespace(block_ids=[0.5])


def test_block_ids_are_read_as_ints_not_truncated() -> None:
    """Regression (fifth session of 3 December): block ids went through ``int()``, so a
    float id was truncated into a plausible slot instead of failing."""
    with pytest.raises(Untranslatable) as raised:
        VllmAdapter(FloatBlockIds(), "vllm-bool").prepare_load(["a"])
    assert raised.value.prop == "load-plan"
    assert "0.5 is not an int" in str(raised.value)
