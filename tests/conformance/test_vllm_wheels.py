"""Tests of ``kvoffload.conformance.target.vllm_wheels``: synthetic wheels offline, real ones on
demand."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

from kvoffload.conformance.target import vllm_wheels
from kvoffload.conformance.target.vllm_wheels import (
    RELEASES,
    VllmReleaseUnavailable,
    alias_of,
    cache_dir,
    load_release,
    release_tree,
)

BASE = '''
from vllm.logger import init_logger
from vllm.v1.core.kv_cache_utils import BlockHash
logger = init_logger(__name__)
VERSION = "{version}"

class OffloadingManager:
    pass
'''
MANAGER = '''
import importlib
from vllm.v1.kv_offload.base import OffloadingManager, VERSION

class CPUOffloadingManager(OffloadingManager):
    def __init__(self, num_blocks):
        self.num_blocks = num_blocks
        # a lazy import by module path, as vLLM's policy factory does
        self.base = importlib.import_module("vllm.v1.kv_offload.base")
'''


def fake_wheel(cache: Path, version: str, extra: dict[str, str] | None = None) -> Path:
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    wheel = wheels / f"vllm-{version}-py3-none-any.whl"
    files = {"vllm/__init__.py": "raise RuntimeError('the real vllm/__init__ must not run')",
             "vllm/v1/kv_offload/__init__.py": "",
             "vllm/v1/kv_offload/base.py": BASE.format(version=version),
             "vllm/v1/kv_offload/cpu/__init__.py": "",
             "vllm/v1/kv_offload/cpu/manager.py": MANAGER,
             "vllm/v1/kv_offload/data.bin": "not python", **(extra or {})}
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KVOFFLOAD_CACHE", str(tmp_path))
    return tmp_path


def test_cache_dir_follows_the_environment(cache: Path) -> None:
    assert cache_dir() == cache


def test_cache_dir_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KVOFFLOAD_CACHE", raising=False)
    assert cache_dir() == Path.home() / ".cache" / "kvoffload"


def test_aliases_are_per_release_and_versions_are_checked() -> None:
    assert alias_of("0.24.0") == "_kvoffload_vllm_0_24_0"
    with pytest.raises(VllmReleaseUnavailable):
        alias_of("0.24; rm -rf /")


def test_no_download_and_no_cache_is_a_clear_error(cache: Path) -> None:
    with pytest.raises(VllmReleaseUnavailable, match="not in the cache"):
        release_tree("9.0.1", download=False)


def test_extracts_only_kv_offload_python_and_drops_the_wheel(cache: Path) -> None:
    wheel = fake_wheel(cache, "9.0.2")
    tree = release_tree("9.0.2", download=False)
    files = sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file())
    assert files == ["LAYOUT", "vllm/v1/kv_offload/__init__.py", "vllm/v1/kv_offload/base.py",
                     "vllm/v1/kv_offload/cpu/__init__.py",
                     "vllm/v1/kv_offload/cpu/manager.py"]
    assert not wheel.exists()
    assert release_tree("9.0.2", download=False) == tree  # cached now


def test_two_releases_load_side_by_side_without_touching_vllm(cache: Path) -> None:
    fake_wheel(cache, "9.0.3")
    fake_wheel(cache, "9.0.4")
    modules_before = {m for m in sys.modules if m == "vllm" or m.startswith("vllm.")}
    first, second = load_release("9.0.3"), load_release("9.0.4")
    one, two = first.manager_class()(4), second.manager_class()(8)
    assert (one.base.VERSION, two.base.VERSION) == ("9.0.3", "9.0.4")
    assert first.base().OffloadingManager is not second.base().OffloadingManager
    assert type(one).__module__ == "_kvoffload_vllm_9_0_3.v1.kv_offload.cpu.manager"
    assert {m for m in sys.modules if m == "vllm" or m.startswith("vllm.")} == modules_before
    assert load_release("9.0.3") is first


def test_stubs_stand_in_for_outside_modules(cache: Path) -> None:
    fake_wheel(cache, "9.0.5")
    base = load_release("9.0.5").base()
    base.logger.warning_once("said once")
    assert base.BlockHash(b"x") == b"x"


def test_a_module_outside_the_loaded_code_is_named(cache: Path) -> None:
    fake_wheel(cache, "9.0.6", {"vllm/v1/kv_offload/spec.py": "from vllm.config import X"})
    with pytest.raises(ModuleNotFoundError, match=r"vllm\.config is outside"):
        load_release("9.0.6").module("vllm.v1.kv_offload.spec")


def test_a_missing_third_party_package_is_a_clear_error(cache: Path) -> None:
    fake_wheel(cache, "9.0.7", {"vllm/v1/kv_offload/gpu.py": "import no_such_package_xyz"})
    with pytest.raises(VllmReleaseUnavailable, match="no_such_package_xyz"):
        load_release("9.0.7").module("vllm.v1.kv_offload.gpu")


def test_a_failed_download_is_a_clear_error(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Done:
        returncode, stdout, stderr = 1, "", "ERROR: No matching distribution found"

    monkeypatch.setattr(vllm_wheels.subprocess, "run", lambda *a, **k: Done())
    with pytest.raises(VllmReleaseUnavailable, match="No matching distribution"):
        release_tree("9.0.8")


@pytest.mark.vllm_matrix
def test_every_release_of_the_matrix_loads_in_one_process() -> None:
    pytest.importorskip("torch")
    classes = {}
    for version in RELEASES:
        release = load_release(version)
        classes[version] = release.manager_class()
        assert classes[version].__module__.startswith(alias_of(version))
    assert classes["0.18.0"].__name__ == "LRUOffloadingManager"
    assert {c.__name__ for v, c in classes.items() if v != "0.18.0"} == {"CPUOffloadingManager"}
    assert len(set(classes.values())) == len(RELEASES)
