"""Load a vLLM release's real ``vllm/v1/kv_offload`` code from its PyPI wheel.

The conformance suite and the benchmarks drive vLLM's own managers, release by
release, without installing vLLM (a multi-GB dependency tree, one version per
environment). For each release this module

1. downloads the wheel once (``pip download --no-deps vllm==X``, about 250 MB) into the
   cache (``$KVOFFLOAD_CACHE``, default ``~/.cache/kvoffload``), extracts only
   ``vllm/v1/kv_offload`` and deletes the wheel;
2. imports that code under a top-level alias of its own (``_kvoffload_vllm_0_24_0``),
   rewriting the release's absolute ``vllm.`` imports to the alias as each module is
   compiled, so several releases live side by side in one process and the real
   ``vllm`` name in ``sys.modules`` is never touched;
3. gives the handful of outside modules the manager code imports (vLLM's logger, its
   metrics class, the ``BlockHash`` type, ``vllm.v1.kv_hints``, the cache-hit-source
   enum, math helpers) small stubs, and synthesises the parent packages (so vLLM's
   heavy ``vllm/__init__.py`` never runs).

vLLM's ``kv_offload/base.py`` imports numpy and torch (from 0.21 on), so loading those
releases needs both; without them the import fails with :class:`VllmReleaseUnavailable`
naming the missing package. Nothing of vLLM is ever committed or vendored: the code is
read from the user's cache at run time.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from .vllm_stubs import STUBS

RELEASES: tuple[str, ...] = ("0.18.0", "0.20.2", "0.21.0", "0.24.0", "0.25.0", "0.34.0")
"""The releases the conformance suite runs (seed releases 0.20.2 and 0.21.0 in CI)."""

_PACKAGE = "vllm/v1/kv_offload/"
_LAYOUT = "kv_offload-only/1"
"""What an extracted tree holds; a tree extracted by another layout is redone."""


class VllmReleaseUnavailable(ImportError):
    """A vLLM release could not be downloaded, extracted or imported here."""


def cache_dir() -> Path:
    """Where wheels are unpacked: ``$KVOFFLOAD_CACHE``, else ``~/.cache/kvoffload``."""
    configured = os.environ.get("KVOFFLOAD_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "kvoffload"


def alias_of(version: str) -> str:
    """The top-level module name release ``version`` is imported under."""
    if not re.fullmatch(r"\d+(\.\d+)*([a-z0-9.+-]*)", version):
        raise VllmReleaseUnavailable(f"not a vLLM version number: {version!r}")
    return "_kvoffload_vllm_" + re.sub(r"\W", "_", version)


def release_tree(version: str, *, download: bool = True) -> Path:
    """The directory holding release ``version``'s extracted ``vllm/v1/kv_offload``.

    Downloads and extracts the wheel on first use (``download=False`` only looks in
    the cache). A wheel already in ``<cache>/wheels`` is used instead of downloading.

    raises: VllmReleaseUnavailable
    """
    alias_of(version)
    tree = cache_dir() / "vllm" / version
    marker = tree / "LAYOUT"
    if marker.is_file() and marker.read_text().strip() == _LAYOUT:
        return tree
    wheel = _cached_wheel(version)
    if wheel is None:
        if not download:
            raise VllmReleaseUnavailable(
                f"vLLM {version} is not in the cache {cache_dir()} and download=False")
        wheel = _download(version)
    _extract(wheel, tree)
    wheel.unlink()
    return tree


def _cached_wheel(version: str) -> Path | None:
    found = sorted((cache_dir() / "wheels").glob(f"vllm-{version}-*.whl"))
    return found[0] if found else None


def _download(version: str) -> Path:
    target = cache_dir() / "wheels"
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
         f"vllm=={version}", "-d", str(target)],
        capture_output=True, text=True, check=False)
    wheel = _cached_wheel(version)
    if done.returncode != 0 or wheel is None:
        raise VllmReleaseUnavailable(
            f"`pip download --no-deps vllm=={version}` failed (exit {done.returncode}): "
            f"{(done.stderr or done.stdout).strip()[-600:]}")
    return wheel


def _extract(wheel: Path, tree: Path) -> None:
    """Unpack only ``vllm/v1/kv_offload`` (Python files), atomically."""
    tree.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{tree.name}-", dir=tree.parent))
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.namelist()
                       if m.startswith(_PACKAGE) and m.endswith(".py")]
            if not members:
                raise VllmReleaseUnavailable(f"{wheel.name} holds no {_PACKAGE}")
            for member in members:
                archive.extract(member, staging)
        (staging / "LAYOUT").write_text(_LAYOUT + "\n")
        if tree.exists():
            shutil.rmtree(tree)
        staging.rename(tree)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


# --- stubs for the outside modules the manager code imports ----------------------


_STUBS: dict[str, dict[str, Any]] = STUBS
"""Outside module (relative to ``vllm``) -> the names its stub provides (:mod:`.vllm_stubs`,
which an engine-native reproducer carries)."""


# --- importing under an alias -------------------------------------------------------


class _Loader(importlib.abc.Loader):
    """Builds one module of a release: its rewritten source, a stub, or an empty package."""

    def __init__(self, release: _Registered, relative: str, source: Path | None) -> None:
        self.release = release
        self.relative = relative
        self.source = source

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        stub = _STUBS.get(self.relative)
        if stub is not None:
            module.__dict__.update(stub)
            return
        if self.source is None:
            return  # a synthesised parent package
        text = self.release.rewrite(self.source.read_text(encoding="utf-8"))
        code = compile(text, str(self.source), "exec", dont_inherit=True)
        try:
            exec(code, module.__dict__)
        except ModuleNotFoundError as missing:
            if missing.name and not missing.name.startswith(self.release.alias):
                raise VllmReleaseUnavailable(
                    f"vLLM {self.release.version}'s vllm.{self.relative} imports "
                    f"{missing.name!r}, which is not installed here (vLLM's kv_offload needs "
                    f"numpy and, from 0.21 on, torch: `pip install torch`)") from missing
            raise


@dataclass(frozen=True)
class _Registered:
    version: str
    alias: str
    root: Path

    def rewrite(self, text: str) -> str:
        """Point the release's absolute ``vllm`` imports (and module-path strings) at the alias."""
        text = re.sub(r"(?<![\w.])vllm(?=\.[A-Za-z_])", self.alias, text)
        return re.sub(r"\bfrom\s+vllm\s+import\b", f"from {self.alias} import", text)


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds the modules of every registered release under its alias, and nothing else."""

    def __init__(self) -> None:
        self.releases: dict[str, _Registered] = {}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        top, _, relative = fullname.partition(".")
        release = self.releases.get(top)
        if release is None:
            return None
        base = release.root / "vllm" / relative.replace(".", "/") if relative else (
            release.root / "vllm")
        if relative in _STUBS:
            return self._spec(fullname, _Loader(release, relative, None), package=None)
        if base.with_suffix(".py").is_file():
            return self._spec(fullname, _Loader(release, relative, base.with_suffix(".py")),
                              package=None)
        if (base / "__init__.py").is_file():
            return self._spec(fullname, _Loader(release, relative, base / "__init__.py"),
                              package=base)
        if not relative or base.is_dir() or any(s.startswith(relative + ".") for s in _STUBS):
            return self._spec(fullname, _Loader(release, relative, None), package=base)
        raise ModuleNotFoundError(
            f"vLLM {release.version}'s module vllm.{relative} is outside what kvoffload loads "
            f"(vllm/v1/kv_offload and stubs for its outside imports)", name=fullname)

    @staticmethod
    def _spec(name: str, loader: _Loader, package: Path | None) -> importlib.machinery.ModuleSpec:
        spec = importlib.machinery.ModuleSpec(name, loader, is_package=package is not None)
        if loader.source is not None:
            spec.origin = str(loader.source)
            spec.has_location = True
        if package is not None:
            spec.submodule_search_locations = [str(package)]
        return spec


_FINDER = _AliasFinder()
_LOADED: dict[str, VllmRelease] = {}


@dataclass(frozen=True)
class VllmRelease:
    """One vLLM release's ``kv_offload`` code, importable under its own alias."""

    version: str
    alias: str
    root: Path

    @property
    def version_info(self) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", self.version)[:3])

    def module(self, name: str) -> ModuleType:
        """Import one of the release's modules by its vLLM name (``vllm.v1.kv_offload.base``).

        raises: VllmReleaseUnavailable, ModuleNotFoundError
        """
        relative = name.removeprefix("vllm.").removeprefix("vllm")
        return importlib.import_module(f"{self.alias}.{relative}" if relative else self.alias)

    def has(self, name: str) -> bool:
        """Does the release ship module ``name`` (``vllm.v1.kv_offload.cpu.manager``)?"""
        relative = name.removeprefix("vllm.").replace(".", "/")
        path = self.root / "vllm" / relative
        return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()

    def base(self) -> ModuleType:
        """The module of the manager's abstract API: ``base`` (0.21 on) or ``abstract``."""
        name = ("vllm.v1.kv_offload.base" if self.has("vllm.v1.kv_offload.base")
                else "vllm.v1.kv_offload.abstract")
        return self.module(name)

    def manager_class(self, policy: str = "lru") -> type[Any]:
        """The CPU manager class: ``CPUOffloadingManager`` (0.20 on), or 0.18's
        ``LRUOffloadingManager`` / ``ARCOffloadingManager`` (one class per policy)."""
        if self.has("vllm.v1.kv_offload.cpu.manager"):
            return self.module("vllm.v1.kv_offload.cpu.manager").CPUOffloadingManager  # type: ignore[no-any-return]  # a class of the loaded wheel
        if policy == "arc":
            return self.module("vllm.v1.kv_offload.arc_manager").ARCOffloadingManager  # type: ignore[no-any-return]  # a class of the loaded wheel
        return self.module("vllm.v1.kv_offload.lru_manager").LRUOffloadingManager  # type: ignore[no-any-return]  # a class of the loaded wheel


def release_of_alias(alias: str) -> str:
    """The version of the release loaded under ``alias`` (``_kvoffload_vllm_0_20_2``)."""
    release = _FINDER.releases.get(alias)
    if release is None:
        raise VllmReleaseUnavailable(f"no vLLM release is loaded under {alias!r}")
    return release.version


def load_release(version: str, *, download: bool = True) -> VllmRelease:
    """Release ``version`` of vLLM's kv_offload code, ready to import (cached per process).

    raises: VllmReleaseUnavailable
    """
    loaded = _LOADED.get(version)
    if loaded is not None:
        return loaded
    tree = release_tree(version, download=download)
    alias = alias_of(version)
    _FINDER.releases[alias] = _Registered(version, alias, tree)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    release = VllmRelease(version, alias, tree)
    _LOADED[version] = release
    return release
