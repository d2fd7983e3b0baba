"""LMCache imported without importing transformers, aiohttp and numba, which it takes
names from but never calls on the paths the tests run.

LMCache 0.5.6's storage backends import its CacheGen serde (``from transformers import
AutoConfig``, in two modules), which only its remote backends' CacheGen codec calls
(``CacheGenConfig.from_model_name``, for a model it does not know); its usage telemetry
imports ``lmcache.connections`` (``import aiohttp``, for ``aiohttp.ClientSession``, in an
annotation and in a coroutine that opens an asynchronous HTTP client); its platform ops
import the CacheGen kernels (``from numba import njit``, two private functions decorated
with ``@njit(cache=True)``, called by the CacheGen codec alone). Importing transformers 5
was about 1.35 s of CPU of LMCache's 2.3 s (torch already imported; it scans its
``models`` folder, over 3,000 files, to build its lazy module), aiohttp (40 modules)
about 0.2 s, numba about 0.23 s, paid once by the tests' process and once by the LMCache
zygote (tests/zygote.py).

:func:`deferred` imports LMCache with a stand-in for each in ``sys.modules`` for the time
of the imports only: a module with nothing but the names given, each a
:class:`Deferred` that imports the real module at its first use (an attribute or a
call) and hands that on, so a use, if any, behaves as with the real one; ``njit``, which
LMCache applies at its import, is a :class:`DeferredDecorator`: the function it decorates
is decorated by the real ``njit`` at its first call (numba compiles it then anyway). Once
the imports are done the stand-ins are gone from ``sys.modules`` (an ``import
transformers`` afterwards gets the real module; ``lmcache.connections`` keeps its
stand-in as its ``aiohttp``, whose ``ClientSession`` imports the real one). Checked
against LMCache 0.5.6, transformers 5.25, aiohttp 3 and numba: the imports bring in
exactly the modules they bring in without the stand-ins, less those that importing the
deferred modules alone brings in (test_deferred_import.py), so no import-time branch of
LMCache or torch took another way; and a CacheGen encoding gives the same bytes.

Standard library only: the zygote's server (``python -c``, no ``PYTHONPATH``) runs this
module's source as its own.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

DEFERRED = {"transformers": ("AutoConfig", "AutoTokenizer"), "aiohttp": ("ClientSession",),
            "numba": ("njit",)}
"""The modules LMCache's import takes names from without using them, and those names."""
DECORATORS = {("numba", "njit")}
"""Of those, the decorators LMCache applies at its import (a :class:`DeferredDecorator`)."""


class Deferred:
    """``getattr(module, name)``, imported at its first use."""

    def __init__(self, module: str, name: str) -> None:
        self._where = (module, name)

    def _target(self) -> Any:
        module, name = self._where
        if getattr(sys.modules.get(module), "__deferred__", False):  # used while importing
            del sys.modules[module]
        return getattr(importlib.import_module(module), name)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") or attr == "_where":  # not a use: copy, pickle, inspect
            raise AttributeError(attr)
        return getattr(self._target(), attr)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._target()(*args, **kwargs)


class DeferredDecorator(Deferred):
    """A decorator (``@njit`` or ``@njit(options)``) applied at import: the function it
    decorates becomes a :class:`DeferredFunction`, decorated for real at its first call."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs:  # @njit: njit(function)
            return DeferredFunction(self, None, {}, args[0])
        return lambda function: DeferredFunction(self, args, kwargs, function)


class DeferredFunction:
    """``decorator(*args, **kwargs)(function)`` (``decorator(function)`` where ``args`` is
    None), made at its first call (numba compiles an ``njit`` function at its first call
    too)."""

    def __init__(self, decorator: Deferred, args: tuple[Any, ...] | None,
                 kwargs: dict[str, Any], function: Any) -> None:
        functools.update_wrapper(self, function)
        self._how = (decorator, args, kwargs, function)
        self._made: Any = None
        self._making = threading.Lock()  # LMCache calls its kernels from a thread pool

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self._making:
            if self._made is None:
                decorator, options, keywords, function = self._how
                real = decorator._target()
                self._made = (real(function) if options is None else
                              real(*options, **keywords)(function))
        return self._made(*args, **kwargs)


@contextlib.contextmanager
def deferred(modules: dict[str, tuple[str, ...]]) -> Iterator[None]:
    """Imports made inside take each module of ``modules`` (not imported yet) as a
    stand-in holding only its listed names, each a :class:`Deferred`."""
    stand_ins = {}
    for module, names in modules.items():
        if module in sys.modules:
            continue
        stand_in = types.ModuleType(module)
        stand_in.__deferred__ = True  # type: ignore[attr-defined]  # marks the stand-in

        def named(name: str, module: str = module, names: tuple[str, ...] = names) -> Deferred:
            if (module, name) in DECORATORS:
                return DeferredDecorator(module, name)
            if name in names:
                return Deferred(module, name)
            raise AttributeError(f"module {module!r} (deferred) has no attribute {name!r}")

        stand_in.__getattr__ = named  # type: ignore[method-assign]  # a module's own
        sys.modules[module] = stand_ins[module] = stand_in
    try:
        yield
    finally:
        for module, stand_in in stand_ins.items():
            if sys.modules.get(module) is stand_in:
                del sys.modules[module]


def import_deferring(names: list[str] | tuple[str, ...]) -> None:
    """Import ``names`` in order, :data:`DEFERRED` deferred."""
    with deferred(DEFERRED):
        for name in names:
            importlib.import_module(name)
