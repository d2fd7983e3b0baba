"""``lmcache==X``: LMCache's own storage backends, from the installed ``lmcache`` package.

Unlike vLLM's kv_offload (unpacked from a wheel by :mod:`.vllm_wheels`), LMCache is
installed: ``pip install -e '.[lmcache]'`` pins the release the suite was written
against (:data:`SUPPORTED`). ``lmcache==X`` checks that the installed release is X and
stops with a :class:`~kvoffload.conformance.errors.TargetLoadError` (exit 2) when
LMCache is missing or another release is installed, before importing any of it.

Which backend is driven is chosen with ``--adapter``: ``lmcache-cpu`` (the default
under ``--adapter auto``: ``LocalCPUBackend`` over a ``HostMemoryAllocator``) or
``lmcache-disk`` (``LocalDiskBackend`` in a temporary directory). The adapters are in
:mod:`.lmcache_adapters`.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..adapter_api import Adapter
from ..config import CheckConfig
from ..errors import TargetLoadError, UsageError

PREFIX = "lmcache=="
SUPPORTED = ("0.5.6",)
"""LMCache releases whose backends the adapters were written against."""
DEFAULTS: dict[str, tuple[object, str]] = {
    "max_keys_per_call": (1, "LMCache's backends store, read and evict one chunk per call"),
}
"""Options an ``lmcache==`` target sets when the user gives none: (value, why). A call
naming several chunks is not all or nothing there (the first chunks are allocated,
evicting, before a later one finds no room): a design, not a bug to report."""
BACKENDS = {"lmcache-cpu": "cpu", "lmcache-disk": "disk"}
"""``--adapter`` values for LMCache targets, and the backend each drives."""


def is_lmcache_target(text: str) -> bool:
    return text.startswith(PREFIX)


def installed_version() -> str | None:
    """The installed ``lmcache`` distribution's version, or None if it is not installed."""
    import importlib.metadata  # here: every host imports this module, few ask this

    try:
        return importlib.metadata.version("lmcache")
    except importlib.metadata.PackageNotFoundError:
        return None


def check_version(text: str) -> str:
    """The release named by ``lmcache==X``, once the installed one is known to be X."""
    wanted = text.removeprefix(PREFIX)
    if wanted not in SUPPORTED:
        raise TargetLoadError(
            f"TARGET {text!r}: the LMCache adapters were written against {list(SUPPORTED)}; "
            f"{wanted!r} is not one of them")
    have = installed_version()
    if have is None:
        raise TargetLoadError(
            f"TARGET {text!r}: LMCache is not installed; install it with "
            f"pip install -e '.[lmcache]' (it pins lmcache=={SUPPORTED[-1]})")
    if have != wanted:
        raise TargetLoadError(
            f"TARGET {text!r}: the installed LMCache is {have}, not {wanted}; install "
            f"lmcache=={wanted} (pip install -e '.[lmcache]')")
    return wanted


def backend_of(adapter: str) -> str:
    """The backend an ``--adapter`` value names for an LMCache target."""
    if adapter == "auto":
        return "cpu"
    if adapter not in BACKENDS:
        raise UsageError(f"an LMCache target is driven by --adapter {' or '.join(BACKENDS)} "
                         f"(or auto: lmcache-cpu), not {adapter!r}")
    return BACKENDS[adapter]


def lmcache_factory(text: str, config: CheckConfig) -> tuple[str, str, Callable[[int], Adapter]]:
    """(adapter name, why, a function building one adapted backend of a given capacity)."""
    check_version(text)
    backend = backend_of(config.adapter)
    if config.policy.value != "lru":
        raise UsageError(f"LMCache's backends are checked with --policy lru (its LRU cache "
                         f"policy); the spec models no other policy LMCache has, and "
                         f"{config.policy.value} is not one of LMCache's")
    # LMCache logs every allocation failure and eviction at WARNING and INFO.
    os.environ.setdefault("LMCACHE_LOG_LEVEL", "ERROR")
    try:
        from . import lmcache_adapters
    except ImportError as error:
        raise TargetLoadError(f"TARGET {text!r}: importing LMCache failed: {error}") from error
    name = f"lmcache-{backend}"
    why = ("given" if config.adapter != "auto" else
           "LMCache target: its LocalCPUBackend (--adapter lmcache-disk for LocalDiskBackend)")
    make = lmcache_adapters.CpuAdapter if backend == "cpu" else lmcache_adapters.DiskAdapter
    return name, why, make
