"""docs/vendoring.md followed literally: its module, resolved by vLLM 0.24.0's own
``OffloadingSpecFactory`` (loaded from the release wheel), builds the facade.

vLLM's ``CPUOffloadingSpec`` itself imports vLLM's config and platform modules, which
the wheel loader does not load; it is replaced by a double holding the attributes its
``__init__`` sets in 0.24.0 (``num_blocks``, ``eviction_policy``, ``extra_config``,
``kv_events_config``, ``_manager``). Everything else is the release's code.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from kvoffload.impl.vllm_facade import VllmFacade
from kvoffload.impl.vllm_types import VllmTypes
from vllm_releases import release_or_skip, req_context, types_of

DOC = Path(__file__).resolve().parents[2] / "docs" / "vendoring.md"


def documented_module() -> str:
    """The first Python block of docs/vendoring.md: the module a user writes."""
    found = re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert found is not None, "docs/vendoring.md lost its Python block"
    return found.group(1)


@pytest.fixture
def vllm_024(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """vLLM 0.24.0's factory, with the documented module importable as ``my_kv_offload``."""
    release = release_or_skip(request.config, "0.24.0")
    base = release.base()

    class CPUOffloadingSpec(base.OffloadingSpec):  # type: ignore[misc, name-defined]  # the release's class, loaded at run time
        def __init__(self, vllm_config: Any, kv_cache_config: Any) -> None:
            self.vllm_config = vllm_config
            self.extra_config = vllm_config.kv_transfer_config.kv_connector_extra_config
            self.kv_events_config = base.OffloadingKVEventsConfig(
                enable_kv_cache_events=True, self_describing_kv_events=False)
            self.num_blocks = kv_cache_config.num_blocks
            self.eviction_policy = self.extra_config.get("eviction_policy", "lru")
            self._manager = None

        def get_handlers(self, kv_caches: Any) -> Any:
            raise NotImplementedError("worker side: not under test")

    spec_module = ModuleType(f"{release.alias}.v1.kv_offload.cpu.spec")
    spec_module.CPUOffloadingSpec = CPUOffloadingSpec  # type: ignore[attr-defined]  # a module built here
    monkeypatch.setitem(sys.modules, spec_module.__name__, spec_module)
    user_module = ModuleType("my_kv_offload")
    code = re.sub(r"(?<![\w.])vllm\.", f"{release.alias}.", documented_module())
    exec(compile(code, str(DOC), "exec"), user_module.__dict__)
    monkeypatch.setitem(sys.modules, "my_kv_offload", user_module)
    # inside vLLM, VllmTypes.from_vllm() finds the running release's classes
    types = types_of(release)
    monkeypatch.setattr(VllmTypes, "from_vllm", classmethod(lambda cls: types))
    return SimpleNamespace(release=release, base=base,
                           factory=release.module("vllm.v1.kv_offload.factory"))


def config(**extra: Any) -> Any:
    extra = {"spec_name": "KvOffloadCPUSpec", "spec_module_path": "my_kv_offload",
             "cpu_bytes_to_use": 8_000_000_000, "eviction_policy": "lru", **extra}
    return SimpleNamespace(kv_transfer_config=SimpleNamespace(kv_connector_extra_config=extra))


@pytest.mark.vllm_matrix
def test_vllms_factory_builds_the_facade_from_the_documented_module(vllm_024: Any) -> None:
    spec = vllm_024.factory.OffloadingSpecFactory.create_spec(
        config(), SimpleNamespace(num_blocks=4))
    manager = spec.get_manager()
    assert isinstance(manager, VllmFacade)
    assert isinstance(manager, vllm_024.base.OffloadingManager)
    assert spec.get_manager() is manager
    context = req_context(vllm_024.release)
    out = manager.prepare_store([b"a"], context)
    assert isinstance(out, vllm_024.base.PrepareStoreOutput)
    manager.complete_store([b"a"], context)
    assert manager.lookup(b"a", context) is True
    assert [e.removed for e in manager.take_events()] == [False]


@pytest.mark.vllm_matrix
def test_the_documented_module_passes_store_threshold_through(vllm_024: Any) -> None:
    spec = vllm_024.factory.OffloadingSpecFactory.create_spec(
        config(store_threshold="2", max_tracker_size="8"), SimpleNamespace(num_blocks=4))
    manager = spec.get_manager()
    context = req_context(vllm_024.release)
    assert manager.prepare_store([b"a"], context).keys_to_store == []
    manager.lookup(b"a", context)
    manager.lookup(b"a", context)
    assert manager.prepare_store([b"a"], context).keys_to_store == [b"a"]
    assert (manager.store_threshold, manager.max_tracker_size) == (2, 8)


@pytest.mark.vllm_matrix
def test_the_documented_module_starts_with_no_cpu_slots(vllm_024: Any) -> None:
    spec = vllm_024.factory.OffloadingSpecFactory.create_spec(
        config(), SimpleNamespace(num_blocks=0))
    manager = spec.get_manager()
    context = req_context(vllm_024.release)
    assert manager.prepare_store([b"a"], context) is None
    assert manager.lookup(b"a", context) is False
