"""Stubs for the few modules outside ``vllm/v1/kv_offload`` that its manager code imports.

The suite loads a release's ``vllm/v1/kv_offload`` from its wheel without the rest of
vLLM (:mod:`.vllm_wheels`): vLLM's logger, its metrics class, the ``BlockHash`` type,
``vllm.v1.kv_hints``, the cache-hit-source enum and two math helpers get these stubs.
An engine-native reproducer of a vLLM failure (:mod:`kvoffload.conformance.command.engine_script`)
does the same where no vLLM is installed, so this module's source, from the marker line on, is
copied into it as it is: standard library only.
"""

# --- the vLLM stubs (copied into reproducers from here on) ---
import enum
import logging
import os
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, NewType


class StubLogger:
    """vLLM's logger interface (``warning_once`` and friends) over the logging module."""

    def __init__(self, name: str) -> None:
        self._logger = logging.getLogger(name)
        self._said: set[tuple[str, str]] = set()

    def __getattr__(self, name: str) -> Any:
        if name.endswith("_once"):
            level = name.removesuffix("_once")

            def once(message: str, *args: Any, **kwargs: Any) -> None:
                if (level, message) not in self._said:
                    self._said.add((level, message))
                    getattr(self._logger, level)(message, *args)
            return once
        return getattr(self._logger, name)


class StubStats:
    """Stand-in for vLLM's ``OffloadingConnectorStats``: records, never exports."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.values: dict[str, Any] = {}

    def set_gauge(self, name: str, value: float, *args: Any) -> None:
        self.values[name] = value

    def increase_counter(self, name: str, value: float = 1, *args: Any) -> None:
        self.values[name] = self.values.get(name, 0) + value

    def observe_histogram(self, name: str, value: float, *args: Any) -> None:
        self.values.setdefault(name, []).append(value)

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


class StubCacheHitSource(str, enum.Enum):
    DEVICE = "device"
    HOST = "host"
    P2P = "p2p"
    DISK = "disk"
    EXTERNAL_UNSPECIFIED = "external_unspecified"


class StubKvHintsEnvelope:
    """Stand-in for vLLM's request hints envelope (never built by the managers)."""


def not_loaded(name: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{name} is stubbed: only vLLM's manager code is loaded")
    return call


def cdiv(a: int, b: int) -> int:
    return -(a // -b)


def round_up(x: int, y: int) -> int:
    return cdiv(x, y) * y


STUBS: dict[str, dict[str, Any]] = {
    "logger": {"init_logger": StubLogger},
    "v1.core.kv_cache_utils": {
        "BlockHash": NewType("BlockHash", bytes),
        "resolve_kv_cache_block_sizes": not_loaded("resolve_kv_cache_block_sizes"),
    },
    "distributed.kv_transfer.kv_connector.v1.offloading.metrics": {
        "OffloadingConnectorStats": StubStats,
    },
    "v1.kv_hints": {"KvHintsEnvelope": StubKvHintsEnvelope},
    "v1.metrics.cache_hit_source": {"CacheHitSource": StubCacheHitSource},
    "utils.math_utils": {"cdiv": cdiv, "round_up": round_up},
}
"""Outside module (relative to ``vllm``) -> the names its stub provides."""


def load_vllm(version: str) -> str:
    """Make ``import vllm.v1.kv_offload...`` work: an installed vLLM of ``version`` as it
    is; else release ``version``'s ``vllm/v1/kv_offload`` as kvoffload caches it
    (``$KVOFFLOAD_CACHE`` or ``~/.cache/kvoffload``, ``vllm/<version>``: the wheel's
    files, unchanged) on ``sys.path``, with :data:`STUBS` for its outside imports.
    Says which."""
    try:  # an installed vLLM, if any
        from importlib import import_module
        from importlib.metadata import version as installed

        if installed("vllm") == version:
            import_module("vllm.v1.kv_offload")
            return "the installed vLLM " + version
    except Exception:
        pass
    cache = os.environ.get("KVOFFLOAD_CACHE") or str(Path.home() / ".cache" / "kvoffload")
    root = Path(cache).expanduser() / "vllm" / version
    if not (root / "vllm" / "v1" / "kv_offload").is_dir():
        raise SystemExit("vLLM " + version + " is neither installed nor unpacked in " + str(root)
                         + ": pip install vllm==" + version + ", or unzip its wheel's "
                         "vllm/v1/kv_offload there")
    for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
        del sys.modules[name]
    sys.path.insert(0, str(root))
    for relative, names in STUBS.items():
        parts = relative.split(".")
        for depth in range(1, len(parts) + 1):
            name = "vllm." + ".".join(parts[:depth])
            folder = root / "vllm" / Path(*parts[:depth])
            if name in sys.modules or folder.is_dir():
                continue
            module = types.ModuleType(name)
            if depth < len(parts):
                module.__path__ = []
            sys.modules[name] = module
        sys.modules["vllm." + relative].__dict__.update(names)
    return "vLLM " + version + "'s vllm/v1/kv_offload from " + str(root) + ", with stubs"
