"""TARGET strings: what to check, how to build one instance, and which adapter drives it.

``module:attr`` or ``path/to/file.py:attr``; ``attr`` (dotted names allowed) is a manager
class or a factory building one: the native API's (taking the capacity as its one
positional argument, optionally a ``policy`` keyword), or a vLLM manager of any era (a
class its adapter constructs, or a factory in vLLM's style taking ``num_blocks`` and
``cache_policy``). ``vllm==X`` is vLLM release X's own CPU manager, loaded from its PyPI
wheel by :mod:`.vllm_wheels` (0.18's ``LRUOffloadingManager`` or ``ARCOffloadingManager``,
after ``--policy``).

``--adapter auto`` reads a class's ``lookup`` signature; for a factory it reads the
class its return annotation names, else the class of one probe instance. When no
adapter fits, the run stops (exit 2) naming the adapters tried.

Whatever a target raises while it is imported or constructed (``SystemExit`` included:
it is the target's behaviour, not the suite's) stops the run as a
:class:`~kvoffload.conformance.errors.TargetLoadError` that names it.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..adapter_api import Adapter, Capabilities
from ..config import ADAPTERS, CheckConfig
from ..errors import TargetLoadError, UsageError
from ..judge.explain import error_text
from ..options import OPTIONS
from .lmcache_loader import DEFAULTS as LMCACHE_DEFAULTS
from .lmcache_loader import is_lmcache_target, lmcache_factory
from .mooncake_adapter import DEFAULTS as MOONCAKE_DEFAULTS
from .mooncake_adapter import is_mooncake_target, mooncake_factory
from .native import NATIVE_METHODS, NativeAdapter
from .vllm_adapters import ERA_SIGNATURES, era_of, factory_keywords
from .vllm_adapters import factory as vllm_factory
from .vllm_adapters import why as era_reason

DEFAULT_TARGET = "kvoffload.impl:OffloadManager"
__all__ = ["ADAPTERS", "DEFAULT_TARGET", "Prepared", "absolute_target", "load_object",
           "prepare", "target_defaults", "with_target_defaults"]

GENERAL_DEFAULTS: dict[str, object] = {option.name: option.default for option in OPTIONS
                                       if option.by_target}
"""Options whose default depends on the kind of target (the table marks them
``by_target``): their table default, for any target whose kind sets none
(:func:`target_defaults`)."""


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
    sample: Adapter | None = None
    """The instance built to read the capabilities (``config.capacity`` slots): a host
    hands it out as its first target instead of building another."""


def absolute_target(target: str) -> str:
    """``path/to/file.py:attr`` with an absolute path, so reproducers run from anywhere."""
    where, sep, attr = target.rpartition(":")
    if sep and (where.endswith(".py") or "/" in where) and Path(where).is_file():
        return f"{Path(where).resolve()}:{attr}"
    return target


def target_defaults(text: str) -> dict[str, tuple[object, str]]:
    """Options this kind of TARGET sets when the user gives none: name -> (value, why).
    Only options the table marks ``by_target`` may be named (a test keeps it so)."""
    if is_mooncake_target(text):
        return dict(MOONCAKE_DEFAULTS)
    return dict(LMCACHE_DEFAULTS) if is_lmcache_target(text) else {}


def with_target_defaults(text: str, config: CheckConfig) -> CheckConfig:
    """``config`` with each option left unset (None) given its value: the kind of
    target's (named in ``config.target_defaults``, so the header can say so), else the
    general one (:data:`GENERAL_DEFAULTS`). An option this kind of target cannot take
    is refused here, before any host starts (``--fault``: :func:`refuse_faults`).

    raises: UsageError
    """
    if config.injects_faults:
        refuse_faults(text, config)
    chosen = {name: value for name, (value, _) in target_defaults(text).items()
              if getattr(config, name) is None}
    values = {name: value for name, value in GENERAL_DEFAULTS.items()
              if getattr(config, name) is None}
    if not values:
        return config
    values.update(chosen)
    named = tuple(dict.fromkeys((*config.target_defaults, *chosen)))
    return replace(config, **values, target_defaults=named)  # type: ignore[arg-type]  # values are the fields' own types (GENERAL_DEFAULTS, DEFAULTS)


def refuse_faults(text: str, config: CheckConfig) -> None:
    """``--fault`` (D15) needs a target with nodes of its own (``mooncake==``) and
    random calls; the judge refuses it otherwise (an ``exec:`` host is not the suite's,
    so the check :func:`prepare` makes in a Python host would never run for one).

    raises: UsageError
    """
    if config.trace is not None:
        raise UsageError(f"--fault {config.fault} is injected among random calls; a "
                         f"--trace run makes none")
    if not is_mooncake_target(text):
        raise UsageError(f"--fault {config.fault}: only a target with nodes of its own to "
                         f"fail (mooncake==) takes a fault, not {text!r}")


def load_object(text: str, policy: str = "lru") -> Any:
    """Import ``module:attr`` or ``path/to/file.py:attr`` and return the attribute (or
    vLLM release X's manager class for ``vllm==X``).

    raises: UsageError (malformed TARGET), TargetLoadError (anything the import raised)
    """
    if not text.strip():
        raise UsageError("TARGET is empty (an unset variable?): give module:attr, "
                         "path/to/file.py:attr or vllm==X, or no TARGET for the reference")
    if text.startswith("vllm=="):
        return _vllm_release(text.removeprefix("vllm=="), policy)
    if is_mooncake_target(text):
        return None  # a running service, not an object: prepare() starts it
    where, sep, attr = text.rpartition(":")
    if not sep or not where or not attr:
        raise UsageError(f"TARGET {text!r} must be module:attr or path/to/file.py:attr")
    if where.endswith(".py") or "/" in where or "\\" in where:
        module = _load_file(Path(where))
    else:
        module = _import_module(where, text)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as error:
            raise TargetLoadError(f"module {where!r} has no attribute {attr!r}") from error
        except Exception as error:
            raise TargetLoadError(f"reading {attr!r} of {where!r} raised "
                                  f"{_named(error)}") from error
    if not callable(obj):
        raise TargetLoadError(f"TARGET {text!r} is {obj!r}: not a class or factory")
    return obj


def _named(error: BaseException) -> str:
    """``SystemExit: 0``, ``ValueError: bad``: the exception as a reader needs it (its
    class alone when it has no message)."""
    text = error_text(error)
    return type(error).__name__ if text == f"{type(error).__name__}: " else text


def _import_module(where: str, text: str) -> Any:
    try:
        return importlib.import_module(where)
    except KeyboardInterrupt:
        raise
    except ImportError as error:
        raise TargetLoadError(f"cannot import module {where!r} for TARGET {text!r}: "
                              f"{error}") from error
    except BaseException as error:  # SystemExit too: the target's doing, reported as such
        raise TargetLoadError(f"importing module {where!r} for TARGET {text!r} raised "
                              f"{_named(error)}") from error


def _vllm_release(version: str, policy: str) -> Any:
    from .vllm_wheels import VllmReleaseUnavailable, load_release

    try:
        return load_release(version).manager_class(policy)
    except (VllmReleaseUnavailable, ImportError) as error:
        raise TargetLoadError(f"cannot load vLLM {version}'s manager: {error}") from error


@contextmanager
def _on_sys_path(folder: Path) -> Iterator[None]:
    """``folder`` first on sys.path while a file target loads (its sibling modules)."""
    entry = str(folder)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        if entry in sys.path:
            sys.path.remove(entry)


def _load_file(path: Path) -> Any:
    if path.is_dir():
        raise TargetLoadError(f"TARGET {str(path)!r} is a directory; give a Python file "
                              "(path/to/file.py:attr) or a module (package.module:attr)")
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
        with _on_sys_path(path.resolve().parent):
            spec.loader.exec_module(module)
    except KeyboardInterrupt:
        del sys.modules[name]
        raise
    except BaseException as error:  # SystemExit too: the target's doing, reported as such
        del sys.modules[name]
        raise TargetLoadError(f"importing {str(path)!r} raised {_named(error)}") from error
    return module


def prepare(text: str, config: CheckConfig, obj: Any = None) -> Prepared:
    """Load TARGET, pick its adapter and check the configuration suits it.

    ``obj`` skips the import (the self-test and the pytest plugin pass objects).
    """
    if config.injects_faults and (obj is not None or not is_mooncake_target(text)):
        raise UsageError(f"--fault {config.fault}: only a target with nodes of its own to "
                         f"fail (mooncake==) takes a fault, not {text!r}")
    if obj is None and is_lmcache_target(text):
        return _prepare_lmcache(text, config)
    if obj is None and is_mooncake_target(text):
        name, reason, make = mooncake_factory(text, config)
        sample = _build(text, make, config.capacity)
        return Prepared(text, name, reason, sample.capabilities, make, sample)
    if obj is None:
        obj = load_object(text, config.policy.value)
    if config.adapter not in ADAPTERS:
        raise UsageError(f"unknown adapter {config.adapter!r}; known: {list(ADAPTERS)}")
    if config.adapter == "mooncake":
        raise UsageError(f"--adapter mooncake drives mooncake== targets only, not {text!r}")
    if config.adapter == "auto":
        name, reason = _detect(text, obj, config)
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
    return Prepared(text, name, reason, caps, lambda capacity: _build(text, make, capacity),
                    sample)


def _prepare_lmcache(text: str, config: CheckConfig) -> Prepared:
    """``lmcache==X``: one of LMCache's backends, after ``--adapter``."""
    name, reason, make = lmcache_factory(text, config)
    sample = _build(text, make, config.capacity)
    return Prepared(text, name, reason, sample.capabilities, make, sample)


def _detect(text: str, obj: Any, config: CheckConfig) -> tuple[str, str]:
    """``--adapter auto``: (adapter, why), from the class, or the class a factory builds
    (its return annotation, else one probe instance)."""
    annotated = None if isinstance(obj, type) else _annotated_class(obj)
    if isinstance(obj, type):
        cls, how = obj, "class"
    elif annotated is not None:
        cls, how = annotated, "factory returning (its annotation)"
    else:
        cls, how = type(_probe(text, obj, config)), "factory building (one probe instance)"
    era = era_of(cls)
    if era is not None:
        return era, f"{how} {cls.__qualname__}, a vLLM manager: {era_reason(cls, era)}"
    missing = [m for m in NATIVE_METHODS if not callable(getattr(cls, m, None))]
    if missing and isinstance(obj, type) and hasattr(cls, "__getattr__"):
        probe = _probe(text, obj, config)  # a proxy: its methods show on instances only
        missing = [m for m in NATIVE_METHODS if not callable(getattr(probe, m, None))]
    if not missing:
        return "native", f"{how} {cls.__qualname__}: kvoffload's native API"
    lookup = getattr(cls, "lookup", None)
    shown = (f"{cls.__qualname__}.lookup{_signature(lookup)}" if callable(lookup)
             else f"{cls.__qualname__} has no lookup")
    raise TargetLoadError(
        f"no adapter fits TARGET {text!r} ({how} {cls.__qualname__}): tried native (lacks "
        f"{', '.join(missing)}; docs/native-api.md) and "
        + ", ".join(f"{era} ({sig})" for era, sig in ERA_SIGNATURES.items())
        + f", but {shown}; pass --adapter NAME "
        f"({', '.join(a for a in ADAPTERS if a != 'auto')}) if one of them drives it")


def _signature(function: Any) -> str:
    try:
        return str(inspect.signature(function))
    except (TypeError, ValueError):
        return "(...)"


def _annotated_class(factory: Any) -> type | None:
    """The class a factory's return annotation names, if it resolves to one."""
    try:
        hints = typing.get_type_hints(factory)
    except Exception:  # unresolvable annotations (names under TYPE_CHECKING): probe instead
        return None
    returned = hints.get("return")
    return returned if isinstance(returned, type) and returned is not type(None) else None


def _probe(text: str, factory: Any, config: CheckConfig) -> Any:
    """One instance built by ``factory``, to see what it builds."""
    keywords = factory_keywords(factory, config)
    try:
        return factory(config.capacity, **keywords)
    except KeyboardInterrupt:
        raise
    except BaseException as error:
        raise TargetLoadError(f"constructing TARGET {text!r} (to see which adapter fits) "
                              f"raised {_named(error)}") from error


def _build(text: str, make: Callable[[int], Adapter], capacity: int) -> Adapter:
    try:
        adapter = make(capacity)
    except (UsageError, KeyboardInterrupt):
        raise
    except BaseException as error:  # SystemExit too: the target's doing
        raise TargetLoadError(f"constructing TARGET {text!r} raised "
                              f"{_named(error)}") from error
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
