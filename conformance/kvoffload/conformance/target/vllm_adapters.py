"""Adapters for vLLM's offloading managers (``vllm/v1/kv_offload``), three API eras.

=============  ==========================================  =========================
adapter        lookup                                      releases
=============  ==========================================  =========================
``vllm-int``   ``lookup(block_hashes) -> int`` hit prefix  up to 0.18 (safe only)
``vllm-bool``  ``lookup(key, req_context) -> bool | None``  0.19 to 0.24
``vllm-enum``  ``lookup(key, req_context) -> LookupResult``  0.25 on
=============  ==========================================  =========================

The adapter constructs the class itself when given one: 0.18's managers take a
backend object (a ``CPUBackend`` of ``capacity`` blocks) and implement one policy
each; later ones take the capacity first (``num_blocks``, ``num_chunks`` in 0.34),
``cache_policy`` and ``enable_events=True`` (events are off by default). Methods get a
``req_context`` only where their signature has one (0.20 passes it to lookup,
prepare_load and prepare_store only). Keys become bytes (vLLM's ``OffloadKey``: the
key's text plus a 4-byte group index 0); answers are translated back.

vLLM rejects misuse with ``assert``: an :class:`AssertionError` counts as the
rejection, after which the driver checks by lookups that nothing changed. Nothing here
imports vLLM, numpy or torch: the target's own modules are already loaded.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Sequence
from typing import Any

from kvoffload.spec import Key, LookupResult

from ..adapter_api import (
    RETRY,
    Adapter,
    Capabilities,
    EventBatch,
    LoadOutcome,
    Reported,
    StoreOutcome,
    read_int,
)
from ..config import CheckConfig
from ..errors import TargetLoadError, Untranslatable, UsageError
from . import engine_record

ERAS = ("vllm-int", "vllm-bool", "vllm-enum")
ERA_SIGNATURES = {"vllm-int": "lookup(block_hashes) -> int",
                  "vllm-bool": "lookup(key, req_context) -> bool | None",
                  "vllm-enum": "lookup(key, req_context) -> LookupResult"}
"""What ``--adapter auto`` looks for in each era's ``lookup``."""

_ENUM_NAMES: dict[str, Reported] = {"MISS": LookupResult.MISS, "HIT": LookupResult.HIT,
                                    "HIT_PENDING": LookupResult.PENDING, "RETRY": RETRY}


def _lookup_of(obj: Any) -> Any:
    return getattr(obj, "lookup", None) if isinstance(obj, type) else None


def _params(function: Any) -> list[inspect.Parameter]:
    try:
        params = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return []
    return [p for p in params if p.name != "self"]


def era_of(obj: Any) -> str | None:
    """The vLLM era of a manager class, from its ``lookup`` signature; None if not vLLM's."""
    lookup = _lookup_of(obj)
    if lookup is None:
        return None
    params = _params(lookup)
    returns = str(inspect.signature(lookup).return_annotation)
    if len(params) == 1:
        name = params[0].name
        return "vllm-int" if "hash" in name or "int" in returns else None
    if len(params) == 2 and params[1].name == "req_context":
        if "LookupResult" in returns:
            return "vllm-enum"
        if "bool" in returns:
            return "vllm-bool"
        return "vllm-enum" if _vllm_name(obj, "LookupResult") is not None else "vllm-bool"
    return None


def why(obj: Any, era: str) -> str:
    """Say which signature made ``--adapter auto`` pick ``era``."""
    lookup = _lookup_of(obj)
    return f"{era} ({obj.__qualname__}.lookup{inspect.signature(lookup)})"


def _vllm_name(cls: type, name: str) -> Any:
    """A name from the vLLM package the class comes from (its module, then the base one)."""
    for module_name in (cls.__module__, *(c.__module__ for c in cls.__mro__)):
        module = sys.modules.get(module_name)
        if module is not None and hasattr(module, name):
            return getattr(module, name)
    return None


def _offers(cls: type, name: str) -> bool:
    """Does the class offer ``name`` for real (not missing, not abstract)?"""
    method = getattr(cls, name, None)
    return callable(method) and not getattr(method, "__isabstractmethod__", False)


def factory(obj: Any, era: str, config: CheckConfig) -> Callable[[int], Adapter]:
    """A function building one adapted target instance (of a given capacity) per call."""
    if era not in ERAS:
        raise UsageError(f"unknown vLLM adapter {era!r}; known: {list(ERAS)}")
    if not isinstance(obj, type):
        kwargs = factory_keywords(obj, config)
        if not any(name in kwargs for name in ("cache_policy", "policy")):
            if _params_of(obj, kind=inspect.Parameter.VAR_KEYWORD):
                kwargs["cache_policy"] = config.policy.value  # vLLM's spelling
            elif config.policy.value != "lru":
                raise UsageError(f"{getattr(obj, '__qualname__', obj)} takes neither "
                                 f"cache_policy= nor policy=; --policy "
                                 f"{config.policy.value} cannot be honoured")

        def from_factory(capacity: int) -> Adapter:
            return VllmAdapter(obj(capacity, **kwargs), era)
        return from_factory
    build = _backend_builder(obj, config) if era == "vllm-int" else _capacity_builder(obj, config)
    return lambda capacity: VllmAdapter(build(capacity), era)


def factory_keywords(obj: Any, config: CheckConfig) -> dict[str, Any]:
    """The keywords a factory (or class) names for the policy and events: vLLM's
    ``cache_policy=`` if it takes that, else ``policy=``; ``enable_events=True``."""
    names = {p.name for p in _params(obj)}
    kwargs: dict[str, Any] = {}
    if "cache_policy" in names:
        kwargs["cache_policy"] = config.policy.value
    elif "policy" in names:
        kwargs["policy"] = config.policy.value
    if "enable_events" in names:
        kwargs["enable_events"] = True
    return kwargs


def _params_of(obj: Any, kind: Any) -> list[inspect.Parameter]:
    return [p for p in _params(obj) if p.kind is kind]


def _backend_builder(cls: type, config: CheckConfig) -> Callable[[int], Any]:
    """0.18: ``Manager(backend, enable_events=True)``; the class fixes the policy."""
    policy = "arc" if "arc" in cls.__name__.lower() else "lru"
    if policy != config.policy.value:
        raise UsageError(f"{cls.__name__} implements {policy}; run it with --policy {policy}")
    package = cls.__module__.rsplit(".", 1)[0]
    try:
        backends = importlib.import_module(f"{package}.backends.cpu")
    except ImportError as error:
        raise TargetLoadError(f"cannot import {package}.backends.cpu for {cls.__name__}'s "
                              f"backend: {error}") from error
    backend_cls = backends.CPUBackend

    def build(capacity: int) -> Any:
        rec = _recorder(cls)
        backend = rec.new(backend_cls, block_size=16, num_blocks=capacity, name="backend")
        return rec.new(cls, backend, enable_events=True, name="manager")
    return build


def _capacity_builder(cls: type, config: CheckConfig) -> Callable[[int], Any]:
    """0.19 on: ``Manager(capacity, cache_policy=..., enable_events=True)``."""
    names = [p.name for p in _params(cls)]
    kwargs: dict[str, Any] = {}
    if "cache_policy" in names:
        kwargs["cache_policy"] = config.policy.value
    elif config.policy.value != "lru":
        raise UsageError(f"{cls.__name__} takes no cache_policy; --policy "
                         f"{config.policy.value} cannot be honoured")
    if "enable_events" in names:
        kwargs["enable_events"] = True
    return lambda capacity: _recorder(cls).new(cls, capacity, **kwargs, name="manager")


def _recorder(cls: type) -> Any:
    """The recorder of the manager being built (:mod:`.engine_record`); a release the
    suite loaded under its alias is imported as ``vllm`` in the script, which loads it
    (:func:`.vllm_stubs.load_vllm`: an installed vLLM, else the suite's cache, stubbed)."""
    rec = engine_record.active()
    top = cls.__module__.split(".", 1)[0]
    if rec.enabled and top.startswith("_kvoffload_vllm_"):
        from . import vllm_stubs
        from .vllm_wheels import release_of_alias

        version = release_of_alias(top)
        rec.rename_module(top, "vllm")
        rec.carry(vllm_stubs, "# --- the vLLM stubs")
        rec.setup(f"print('loaded', load_vllm({version!r}))")
        rec.note(f"vLLM {version}: the script imports vllm.v1.kv_offload from an installed "
                 f"vLLM {version} if there is one (pip install vllm=={version}); else from "
                 f"the wheel's vllm/v1/kv_offload files as kvoffload unpacks them, unchanged, "
                 f"in ~/.cache/kvoffload/vllm/{version} ($KVOFFLOAD_CACHE), put on sys.path "
                 f"with small stubs for the few modules outside kv_offload that it imports "
                 f"(vLLM's logger, its metrics class, BlockHash, kv_hints, the cache-hit "
                 f"source enum, cdiv and round_up: load_vllm below), as kvoffload loads "
                 f"vLLM on a machine without it. No vLLM code is copied into the script.")
    return rec


class VllmAdapter:
    """One vLLM manager instance seen through the spec's vocabulary.

    ``raw_keys``: the keys given are vLLM ``OffloadKey`` bytes already, passed as they
    are (the benchmark's trace); otherwise each key's text plus group index 0.
    :attr:`req_context`, when set, is the ``ReqContext`` every call gets (a scheduler's
    per-request context); left None, each call gets a fresh one.
    """

    def __init__(self, manager: Any, era: str, *, raw_keys: bool = False) -> None:
        self.rec = engine_record.active()
        self.manager = self.rec.wrap(manager, "manager", reads=True)
        self.name = era
        self.era = era
        self.raw_keys = raw_keys
        self.req_context: Any = None
        cls = type(engine_record.real(manager))
        self._context_cls = _vllm_name(cls, "ReqContext") if era != "vllm-int" else None
        self._takes_context = {name: any(p.name == "req_context" for p in
                                         _params(getattr(cls, name, None)))
                               for name in ("lookup", "prepare_load", "complete_load", "touch",
                                            "prepare_store", "complete_store")}
        if self._context_cls is None and any(self._takes_context.values()):
            takes = [name for name, takes in self._takes_context.items() if takes]
            raise TargetLoadError(
                f"the {era} adapter cannot drive {cls.__qualname__}: its {', '.join(takes)} "
                f"take a req_context, and no ReqContext class was found in its modules "
                f"({cls.__module__} or its bases'); define ReqContext there, or pass another "
                f"--adapter")
        self._context_kwargs: dict[str, str] | None = None
        """What :meth:`_context` gives ``ReqContext``, read off its signature once."""
        self._raw: dict[Key, bytes] = {}
        self._keys: dict[bytes, Key] = {}
        self.capabilities = Capabilities(
            touch=_offers(cls, "touch"), reset=_offers(cls, "reset_cache"),
            events=_offers(cls, "take_events"), completion_tickets=False, typed_misuse=False,
            strict_lookup=era != "vllm-int")

    # --- translation ---------------------------------------------------------------

    def _encode(self, key: Key) -> bytes:
        if self.raw_keys and isinstance(key, bytes):
            return key
        raw = self._raw.get(key)
        if raw is None:
            raw = str(key).encode() + (b"" if self.era == "vllm-int" else bytes(4))
            self._raw[key], self._keys[raw] = raw, key
        return raw

    def _decode(self, raw: Any) -> Key:
        key: Key = self._keys.get(bytes(raw), raw)
        return key

    def _encode_all(self, keys: Sequence[Key]) -> list[bytes]:
        return [self._encode(k) for k in keys]

    def _context(self) -> Any:
        if self.req_context is not None:
            return self.req_context
        cls = self._context_cls
        if cls is None:
            raise TargetLoadError("this vLLM manager's package has no ReqContext class")
        if self._context_kwargs is None:  # a signature costs more than the call it makes
            names = [p.name for p in _params(cls)]
            self._context_kwargs = {"req_id": "kvoffload-check"} if "req_id" in names else {}
        return self.rec.new(cls, **self._context_kwargs, name="context")

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self._takes_context[name]:
            kwargs["req_context"] = self._context()
        return getattr(self.manager, name)(*args, **kwargs)

    # --- the API -------------------------------------------------------------------

    def lookup(self, key: Key) -> Reported:
        if self.era == "vllm-int":
            hits = self.manager.lookup([self._encode(key)])
            if hits is None:
                return RETRY
            if hits in (0, 1) and not isinstance(hits, bool):
                return LookupResult.HIT if hits else LookupResult.MISS
            raise Untranslatable("lookup", f"lookup([{key!r}]) returned {hits!r}, not 0 or 1")
        answer = self._call("lookup", self._encode(key))
        if self.era == "vllm-bool":
            if answer is None:
                return RETRY
            if isinstance(answer, bool):
                return LookupResult.HIT if answer else LookupResult.MISS
        else:
            name = getattr(answer, "name", None)
            mapped = _ENUM_NAMES.get(str(name))
            if mapped is not None:
                return mapped
        raise Untranslatable("lookup", f"lookup({key!r}) returned {answer!r}")

    def prepare_load(self, keys: Sequence[Key]) -> LoadOutcome:
        spec = self._call("prepare_load", self._encode_all(keys))
        return LoadOutcome(None, _block_ids(spec, "load-plan"))

    def complete_load(self, keys: Sequence[Key], ticket: int | None) -> None:
        self._call("complete_load", self._encode_all(keys))

    def touch(self, keys: Sequence[Key]) -> None:
        self._call("touch", self._encode_all(keys))

    def prepare_store(self, keys: Sequence[Key]) -> StoreOutcome:
        out = self._call("prepare_store", self._encode_all(keys))
        if out is None:
            return StoreOutcome(False)
        stored = getattr(out, "keys_to_store", None)
        if stored is None:
            stored = out.block_hashes_to_store
        evicted = getattr(out, "evicted_keys", None)
        if evicted is None:
            evicted = out.block_hashes_evicted
        return StoreOutcome(True, tuple(self._decode(k) for k in stored),
                            _block_ids(out.store_spec, "slots"),
                            tuple(self._decode(k) for k in evicted))

    def complete_store(self, keys: Sequence[Key], success: bool, ticket: int | None) -> None:
        self._call("complete_store", self._encode_all(keys), success=success)

    def reset_cache(self) -> None:
        self.manager.reset_cache()

    def take_events(self) -> EventBatch:
        items = []
        for event in self.manager.take_events():
            raw = getattr(event, "keys", None)
            if raw is None:
                raw = event.block_hashes
            items.append((bool(event.removed), tuple(self._decode(k) for k in raw)))
        return EventBatch(tuple(items))

    def is_rejection(self, error: BaseException) -> bool:
        return isinstance(error, AssertionError)


def _block_ids(spec: Any, prop: str) -> tuple[int, ...]:
    ids = getattr(spec, "block_ids", None)
    if ids is None:
        raise Untranslatable(prop, f"{spec!r} has no block_ids")
    return tuple(read_int(i, prop, "block id") for i in ids)
