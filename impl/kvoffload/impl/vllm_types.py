"""The classes the vLLM facade returns: vLLM's own inside vLLM, plain stand-ins elsewhere.

vLLM's workers and connector check ``isinstance`` against vLLM's classes
(``CPULoadStoreSpec``, ``PrepareStoreOutput``, ``OffloadingEvent``, ``LookupResult``),
so inside vLLM the facade must build exactly those. Outside vLLM (tests, benchmarks,
other engines) it builds the stand-ins below, which have the same field names.
:class:`VllmTypes` bundles one such set; nothing here imports vLLM (or torch) until
:meth:`VllmTypes.from_vllm` is called.

vLLM's ``LookupResult`` (0.25 on: MISS, HIT, HIT_PENDING, RETRY) is not the spec's
``LookupResult`` (MISS, PENDING, HIT): here it is only ever called ``VllmLookupResult``.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal

from kvoffload.spec.vocabulary import Key

ThresholdCounts = Literal["lookups", "offers"]
"""What vLLM's ``store_threshold`` counts in a release:

* ``lookups``: calls of ``lookup(key)`` (0.21's ``FilterReusedOffloadingManager``,
  0.24 and 0.25's ``CPUOffloadingManager``), in a tracker of ``max_tracker_size`` keys;
* ``offers``: offers of the key to ``prepare_store``, once per request (0.34, whose
  ``ReqContext`` carries per-request state: its ``get_state`` is how a release is
  recognised as counting offers).
"""

OrphanRelease = Literal["by-completions", "at-reset", "when-flushed"]
"""When the facade frees the slots of copies a reset left running:

* ``by-completions``: when their completions arrive (the spec's rule; outside vLLM);
* ``at-reset``: at once (vLLM before ``on_reset_flushed`` existed: its workers flush
  the jobs in flight before any new one runs, and its scheduler drops their completions);
* ``when-flushed``: at vLLM's ``on_reset_flushed()`` (0.34 on), which says exactly that.
"""


class VllmLookupResult(enum.Enum):
    """Stand-in for vLLM's ``LookupResult`` (0.25 on)."""

    MISS = enum.auto()
    HIT = enum.auto()
    HIT_PENDING = enum.auto()
    RETRY = enum.auto()


class CpuBlockIds:
    """Stand-in for vLLM's ``CPULoadStoreSpec``: the host slots of a load or store."""

    __slots__ = ("block_ids",)

    def __init__(self, block_ids: list[int]) -> None:
        self.block_ids = block_ids

    @staticmethod
    def medium() -> str:
        return "CPU"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CpuBlockIds) and self.block_ids == other.block_ids

    def __hash__(self) -> int:
        return hash(tuple(self.block_ids))

    def __repr__(self) -> str:
        return f"CpuBlockIds({self.block_ids!r})"


@dataclass
class PrepareStoreOutput:
    """Stand-in for vLLM's ``PrepareStoreOutput``."""

    keys_to_store: list[Key]
    store_spec: Any
    evicted_keys: list[Key]


@dataclass
class OffloadingEvent:
    """Stand-in for vLLM's ``OffloadingEvent``: ``removed`` False means stored."""

    keys: list[Key]
    medium: Any
    removed: bool


@dataclass
class OffloadingStats:
    """Stand-in for vLLM's ``OffloadingConnectorStats``: gauges and counters by name.

    ``reduce()`` gives every gauge's last value and every counter's sum, as vLLM's does.
    """

    gauges: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)

    def set_gauge(self, name: str, value: float) -> None:
        self.gauges[name] = value

    def increase_counter(self, name: str, value: float = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + value

    def reduce(self) -> dict[str, float]:
        return {**self.gauges, **self.counters}


class CpuOffloadingMetrics:
    """Stand-in for vLLM's ``CPUOffloadingMetrics``: the metric names (0.24 on)."""

    STORES_SKIPPED = "vllm:kv_offload_stores_skipped"
    CPU_CACHE_USAGE_PERC = "vllm:kv_offload_cpu_cache_usage_perc"


@dataclass
class ReqContext:
    """Stand-in for vLLM's ``ReqContext`` (0.21 on): the request a call is made for.

    The facade ignores it; tools that build one per call (the conformance suite's
    vLLM adapters) find it beside the facade."""

    req_id: str = ""
    kv_transfer_params: dict[str, Any] | None = None


@dataclass
class RequestOffloadingContext:
    """Stand-in for vLLM's ``RequestOffloadingContext`` (offload newly computed blocks)."""

    policy: str = "block_level"


@dataclass(frozen=True)
class VllmTypes:
    """One set of output classes for the facade, and the lookup flavour they imply.

    ``lookup_result`` is vLLM's ``LookupResult`` enum (0.25 on), or None for the
    ``bool | None`` era (0.19 to 0.24). ``offloading_manager`` is the release's
    ``OffloadingManager`` base class (None for the stand-ins): the facade built with
    these types is an instance of it. ``stats`` builds the release's stats object and
    ``metrics`` names its metrics (both None before 0.24: the manager had no stats).
    ``tracked_events``: the release's ``OffloadingEvent`` has ``removal_expected`` and
    ``metadata_only`` (0.34): stored events say a removal will follow, and a failed
    store is announced as a metadata-only removal.
    """

    load_store_spec: Callable[[list[int]], Any]
    prepare_store_output: Callable[..., Any]
    offloading_event: Callable[..., Any]
    medium: Any
    lookup_result: type[enum.Enum] | None
    request_offloading_context: Callable[[], Any]
    cache_hit_source_host: Any = None
    orphans_released: OrphanRelease = "by-completions"
    origin: str = field(default="stand-ins", compare=False)
    offloading_manager: type | None = None
    stats: Callable[[], Any] | None = OffloadingStats
    metrics: Any = CpuOffloadingMetrics
    tracked_events: bool = False
    threshold_counts: ThresholdCounts = "lookups"

    @classmethod
    def stand_ins(cls, *, enum_lookup: bool = True) -> VllmTypes:
        """The plain stand-ins; ``enum_lookup=False`` gives the ``bool | None`` flavour."""
        return cls(CpuBlockIds, PrepareStoreOutput, OffloadingEvent, "CPU",
                   VllmLookupResult if enum_lookup else None, RequestOffloadingContext)

    @classmethod
    def from_modules(cls, base: ModuleType, cpu_common: ModuleType,
                     cache_hit_source: ModuleType | None = None,
                     origin: str = "vllm", metrics: ModuleType | None = None) -> VllmTypes:
        """vLLM's classes from its ``kv_offload.base`` and ``kv_offload.cpu.common``
        modules (the real package, or a release loaded from its wheel).

        ``metrics`` is the release's module of ``OffloadingConnectorStats``; by default
        it is imported from beside ``base`` (``...distributed.kv_transfer.kv_connector.
        v1.offloading.metrics``) when the release names CPU metrics at all.
        """
        spec_cls = cpu_common.CPULoadStoreSpec
        medium_enum = getattr(base, "Medium", None)
        medium = medium_enum.CPU if medium_enum is not None else spec_cls.medium()
        context = getattr(base, "RequestOffloadingContext", RequestOffloadingContext)
        host = getattr(cache_hit_source.CacheHitSource, "HOST", None) if cache_hit_source else None
        manager = getattr(base, "OffloadingManager", None)
        flushed = hasattr(manager, "on_reset_flushed")
        names = getattr(cpu_common, "CPUOffloadingMetrics", None)
        if names is not None and metrics is None:
            root = base.__name__.split(".")[0]
            metrics = _first_module(
                f"{root}.distributed.kv_transfer.kv_connector.v1.offloading.metrics")
        stats = getattr(metrics, "OffloadingConnectorStats", None) if names else None
        event_fields = {f.name for f in dataclasses.fields(base.OffloadingEvent)}
        tracked = {"removal_expected", "metadata_only"} <= event_fields
        # Per-request state on ReqContext is what 0.34's offer counting rests on.
        offers = hasattr(getattr(base, "ReqContext", None), "get_state")
        return cls(spec_cls, base.PrepareStoreOutput, base.OffloadingEvent, medium,
                   getattr(base, "LookupResult", None), context, host,
                   "when-flushed" if flushed else "at-reset", origin,
                   manager, stats if names is not None else None, names, tracked,
                   "offers" if offers else "lookups")

    @classmethod
    def from_vllm(cls) -> VllmTypes | None:
        """vLLM's classes when vLLM is importable here, else None (imports it lazily)."""
        base = _first_module("vllm.v1.kv_offload.base", "vllm.v1.kv_offload.abstract")
        cpu_common = _first_module("vllm.v1.kv_offload.cpu.common", "vllm.v1.kv_offload.mediums")
        if base is None or cpu_common is None:
            return None
        hit_source = _first_module("vllm.v1.metrics.cache_hit_source")
        return cls.from_modules(base, cpu_common, hit_source, origin="vllm")


def _first_module(*names: str) -> ModuleType | None:
    """The first of ``names`` that imports (vLLM moved its classes between releases)."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None
