"""TARGET strings: what to check, how to build one instance, and which adapter drives it.

``module:attr`` or ``path/to/file.py:attr``; ``attr`` (dotted names allowed) is a manager
class, a factory taking the capacity as its one positional argument (optionally a
``policy`` keyword), or a vLLM manager class of any era, which its adapter constructs.
``vllm==X`` is vLLM release X's own CPU manager, loaded from its PyPI wheel by
:mod:`.vllm_wheels` (0.18's ``LRUOffloadingManager`` or ``ARCOffloadingManager``, after
``--policy``).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .adapter_api import Adapter, Capabilities
from .config import CheckConfig
from .errors import TargetLoadError, UsageError
from .lmcache_loader import is_lmcache_target, lmcache_factory
from .native import NATIVE_METHODS, NativeAdapter
from .vllm_adapters import era_of
from .vllm_adapters import factory as vllm_factory
from .vllm_adapters import why as era_reason

DEFAULT_TARGET = "kvoffload.impl:OffloadManager"
ADAPTERS = ("auto", "native", "vllm-int", "vllm-bool", "vllm-enum", "lmcache-cpu",
            "lmcache-disk")
"""``vllm-int``: ``lookup(hashes) -> int`` (<= 0.18); ``vllm-bool``: ``lookup(key, ctx) ->
bool | None`` (0.19-0.24); ``vllm-enum``: ``LookupResult`` (0.25 on); ``lmcache-cpu`` /
``lmcache-disk``: LMCache's backends, for ``lmcache==X`` (:mod:`.lmcache_loader`)."""


@dataclass(frozen=True)
class Prepared:
    """A loaded target, ready to be instantiated once per example."""

    text: str
    adapter: str
    why: str
    """How ``--adapter auto`` decided (or "given")."""
    capabilities: Capabilities
    make_adapter: Callable[[int], Adapter]
    """Builds one adapted instance with the given capacity (one per example)."""


def load_object(text: str, policy: str = "lru") -> Any:
    """Import ``module:attr`` or ``path/to/file.py:attr`` and return the attribute (or
    vLLM release X's manager class for ``vllm==X``)."""
    if text.startswith("vllm=="):
        return _vllm_release(text.removeprefix("vllm=="), policy)
    where, sep, attr = text.rpartition(":")
    if not sep or not where or not attr:
        raise UsageError(f"TARGET {text!r} must be module:attr or path/to/file.py:attr")
    if where.endswith(".py") or "/" in where or "\\" in where:
        module = _load_file(Path(where))
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as error:
            raise TargetLoadError(f"cannot import module {where!r} for TARGET {text!r}: "
                                  f"{error}") from error
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as error:
            raise TargetLoadError(f"module {where!r} has no attribute {attr!r}") from error
    if not callable(obj):
        raise TargetLoadError(f"TARGET {text!r} is {obj!r}: not a class or factory")
    return obj


def _vllm_release(version: str, policy: str) -> Any:
    from .vllm_wheels import VllmReleaseUnavailable, load_release

    try:
        return load_release(version).manager_class(policy)
    except (VllmReleaseUnavailable, ImportError) as error:
        raise TargetLoadError(f"cannot load vLLM {version}'s manager: {error}") from error


def _load_file(path: Path) -> Any:
    if not path.is_file():
        raise TargetLoadError(f"TARGET file {str(path)!r} does not exist")
    name = "kvoffload_target_" + "".join(c if c.isalnum() else "_" for c in str(path.resolve()))
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TargetLoadError(f"cannot load {str(path)!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        del sys.modules[name]
        raise TargetLoadError(f"importing {str(path)!r} failed: {type(error).__name__}: "
                              f"{error}") from error
    return module


def prepare(text: str, config: CheckConfig, obj: Any = None) -> Prepared:
    """Load TARGET, pick its adapter and check the configuration suits it.

    ``obj`` skips the import (the self-test and the pytest plugin pass objects).
    """
    if obj is None and is_lmcache_target(text):
        return _prepare_lmcache(text, config)
    if obj is None:
        obj = load_object(text, config.policy.value)
    if config.adapter not in ADAPTERS:
        raise UsageError(f"unknown adapter {config.adapter!r}; known: {list(ADAPTERS)}")
    era = era_of(obj)
    if config.adapter == "auto":
        if era is not None:
            name, reason = era, f"vLLM manager class: {era_reason(obj, era)}"
        else:
            name, reason = "native", "not a vLLM class: kvoffload's native API"
    else:
        name, reason = config.adapter, "given"
    if name == "native":
        make = _native_factory(text, obj, config)
    else:
        make = vllm_factory(obj, name, config)
    sample = _build(text, make, config.capacity)
    caps = sample.capabilities
    if not caps.strict_lookup and config.profile.value == "strict":
        raise UsageError(
            f"the {name} adapter's lookup cannot report PENDING (it answers a hit-prefix "
            "length), so only --profile safe can be checked")
    return Prepared(text, name, reason, caps, make)


def _prepare_lmcache(text: str, config: CheckConfig) -> Prepared:
    """``lmcache==X``: one of LMCache's backends, after ``--adapter``."""
    name, reason, make = lmcache_factory(text, config)
    sample = _build(text, make, config.capacity)
    return Prepared(text, name, reason, sample.capabilities, make)


def _build(text: str, make: Callable[[int], Adapter], capacity: int) -> Adapter:
    try:
        adapter = make(capacity)
    except UsageError:
        raise
    except Exception as error:
        raise TargetLoadError(f"constructing TARGET {text!r} failed: "
                              f"{type(error).__name__}: {error}") from error
    return adapter


def _native_factory(text: str, obj: Any, config: CheckConfig) -> Callable[[int], Adapter]:
    takes_policy = _accepts_keyword(obj, "policy")
    if not takes_policy and config.policy.value != "lru":
        raise UsageError(f"TARGET {text!r} takes no policy= argument, so --policy "
                         f"{config.policy.value} cannot be passed to it")

    policy = {"policy": config.policy.value} if takes_policy else {}

    def make(capacity: int) -> Adapter:
        manager = obj(capacity, **policy)
        missing = [m for m in NATIVE_METHODS if not callable(getattr(manager, m, None))]
        if missing:
            raise TargetLoadError(f"TARGET {text!r} built {type(manager).__name__}, which "
                                  f"lacks {missing} of the native API (docs/native-api.md)")
        return NativeAdapter(manager)

    return make


def _accepts_keyword(obj: Any, name: str) -> bool:
    try:
        params = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return True  # builtins and C types: let the call decide
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in params)
