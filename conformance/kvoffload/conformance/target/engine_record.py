"""The engine calls an adapter makes, written down as lines of the engine's own Python.

An adapter of an engine (LMCache's backends, vLLM's managers) builds its engine objects
with :meth:`Recorder.new` and wraps them with :meth:`Recorder.wrap`: each method called
on a wrapped object is made as before and also written down, with the engine's answer,
as one line of Python over the engine's API (``v1 = backend.allocate(...)``). From such
a record :mod:`kvoffload.conformance.command.engine_script` writes a standalone reproducer. Where an
adapter does something that is not a call (holds LMCache's disk writes), it writes the equivalent
source with :meth:`Recorder.source`.

Recording is off unless the host was asked for it (``new`` with ``record``: the
protocol's one optional field for it, docs/protocol.md): then :func:`active` is a
:class:`Recorder` and the host sends each call's entries back with its answer. Off, the
adapters get :data:`OFF`, whose ``wrap`` and ``new`` add nothing to a call.

An entry is a JSON object: ``{"call": text}`` (an operation of the spec's API begins),
``{"import": line}``, ``{"note": text}`` (for the script's header), ``{"carry": text}``
(helper source, at the script's top level), ``{"source": text}`` (lines of the script's
``main`` copied as they are), or
``{"code": line, "answer": plain}`` / ``{"code": line, "raises": name}`` (an engine call
and what it answered, in :func:`.engine_prelude.plain`'s form).
"""

from __future__ import annotations

import enum
import inspect
import re
from collections.abc import Callable
from typing import Any

from .engine_prelude import plain

_LITERALS = (type(None), bool, int, float, str, bytes)


class Unrenderable(Exception):
    """An argument the record cannot write as Python (the script would not run)."""


class Recorder:
    """The record of one target instance: entries, and the names of the objects in it."""

    enabled = True

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self.sent = 0
        """Entries already sent back to the judge (:meth:`take`)."""
        self.names: dict[int, str] = {}
        self.objects: dict[str, Any] = {}
        """Named objects, kept alive (so their ids stay theirs)."""
        self.modules: dict[str, str] = {}
        """Module renames: a loaded package's alias -> the name a user imports it by."""
        self.counter = 0
        self.homes: dict[int, str] = {}
        self.carried: set[str] = set()
        """Modules whose source the script carries (:meth:`carry`)."""

    # --- what adapters call ----------------------------------------------------------

    def wrap(self, obj: Any, name: str, reads: bool = False) -> Any:
        """``obj`` with its method calls written down, as ``name`` in the script;
        ``reads``: its attribute reads too (and those of the objects its calls return),
        as answers (vLLM's outputs: ``keys_to_store``, ``block_ids``)."""
        self._name(obj, name)
        return Recorded(obj, name, self, reads)

    def new(self, make: Callable[..., Any], *args: Any, name: str | None = None,
            method: str | None = None, **kwargs: Any) -> Any:
        """``make(*args, **kwargs)`` (a class or function of the engine; ``method``: that
        class's classmethod), written down with the import it needs; the object made,
        named ``name``. What a construction returns is not an answer: not compared."""
        text = self._importable(make)
        if method is not None:
            make, text = getattr(make, method), f"{text}.{method}"
        return self._made(text, make, args, kwargs, name, wrap=False, answer=False)

    def source(self, text: str) -> None:
        """Lines the script carries as they are (what the adapter does that is not a call)."""
        self.entries.append({"source": text})

    def setup(self, text: str) -> None:
        """A statement the script runs before it imports the engine (loading it)."""
        if {"setup": text} not in self.entries:
            self.entries.append({"setup": text})

    def note(self, text: str) -> None:
        """A paragraph for the script's header (what the adapter does that a reader must
        know: a write held, a module loaded from a cache)."""
        if {"note": text} not in self.entries:
            self.entries.append({"note": text})

    def carry(self, module: Any, marker: str) -> None:
        """Copy ``module``'s source, from the line starting with ``marker`` on, into the
        script (standard-library code the adapter shares with its reproducers); what
        the record names from it needs no import."""
        source = inspect.getsource(module)
        self.carried.add(module.__name__)
        entry = {"carry": source[source.index(marker):]}
        if entry not in self.entries:
            self.entries.append(entry)

    def made(self, obj: Any, name: str, code: str) -> str:
        """``obj``, made by the adapter outside the record, is made in the script by
        ``code`` (which binds ``name``); the record names it so from here on."""
        bound = self._name(obj, name)
        self.source(code)
        return bound

    def home(self, cls: Any, module: str) -> None:
        """Import ``cls`` from ``module`` (a class made at run time names no module of its
        own: LMCache's config class says ``types``)."""
        self.homes[id(cls)] = module

    def import_line(self, line: str) -> None:
        if {"import": line} not in self.entries:
            self.entries.append({"import": line})

    def rename_module(self, alias: str, name: str) -> None:
        self.modules[alias] = name

    def seen(self, expression: str, value: Any) -> None:
        """The adapter read ``value`` off the engine's state, as the script reads it with
        ``expression`` (no call: LMCache's disk backend lists its chunks in ``dict``)."""
        self.entries.append({"code": f"answer = {expression}", "answer": repr(self.plain(value))})

    def mark(self, text: str) -> None:
        """An operation of the spec's API begins (the host marks each call)."""
        self.entries.append({"call": text})

    def take(self) -> list[dict[str, Any]]:
        """The entries made since the last take."""
        new = self.entries[self.sent:]
        self.sent = len(self.entries)
        return new

    def plain(self, value: Any) -> Any:
        return plain(value, self.objects)

    # --- rendering -------------------------------------------------------------------

    def _name(self, obj: Any, name: str) -> str:
        if name in self.objects and self.objects[name] is not obj:
            self.counter += 1
            name = f"{name}_{self.counter}"
        self.names[id(obj)] = name
        self.objects[name] = obj
        return name

    def _fresh(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    def _importable(self, make: Callable[..., Any]) -> str:
        """The text that names ``make`` in the script, its import written down."""
        owner = getattr(make, "__self__", None)
        if isinstance(owner, type):  # a classmethod: import its class
            return f"{self._importable(owner)}.{make.__name__}"
        module = self.homes.get(id(make)) or str(getattr(make, "__module__", ""))
        qualname = str(getattr(make, "__qualname__", make.__name__))
        if module in self.carried:
            return qualname
        top, dot, rest = module.partition(".")
        module = self.modules.get(top, top) + dot + rest
        head = qualname.split(".", 1)[0]
        self.import_line(f"from {module} import {head}")
        return qualname

    def render(self, value: Any) -> str:
        """``value`` as Python source in the script."""
        name = self.names.get(id(value))
        if name is not None and self.objects.get(name) is value:
            return name
        if isinstance(value, Recorded):
            return str(value._kv_name)
        if isinstance(value, _Method):
            return value.text
        owner = getattr(value, "__self__", None)
        if owner is not None and callable(value) and self.names.get(id(owner)):
            return f"{self.names[id(owner)]}.{value.__name__}"  # a named object's method
        if isinstance(value, _LITERALS):
            return repr(value)
        if type(value).__module__.split(".", 1)[0] == "torch":  # torch.Size, torch.uint8
            self.import_line("import torch")
            return repr(value)
        if type(value) is list:
            return "[" + ", ".join(map(self.render, value)) + "]"
        if type(value) is tuple:
            return "(" + "".join(self.render(v) + ", " for v in value) + ")"
        if type(value) is dict:
            return "{" + ", ".join(f"{self.render(k)}: {self.render(v)}"
                                   for k, v in value.items()) + "}"
        raise Unrenderable(f"{type(value).__qualname__} {value!r:.80}")

    def _arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        parts = [self.render(a) for a in args]
        parts += [f"{k}={self.render(v)}" for k, v in kwargs.items()]
        return ", ".join(parts)

    def _made(self, text: str, function: Callable[..., Any], args: tuple[Any, ...],
              kwargs: dict[str, Any], name: str | None, wrap: bool,
              answer: bool = True, call: bool = True, reads: bool = False) -> Any:
        """Make the call (unwrapped arguments), write its line and answer down; ``call``
        False: an attribute read, written without parentheses."""
        try:
            line = f"{text}({self._arguments(args, kwargs)})" if call else text
        except Unrenderable as error:
            line = f"raise RuntimeError({f'not written down: {error}'!r})"
        real_args = tuple(_real(a) for a in args)
        real_kwargs = {k: _real(v) for k, v in kwargs.items()}
        try:
            value = function(*real_args, **real_kwargs)
        except Exception as error:
            self.entries.append({"code": line, "raises": type(error).__name__})
            raise
        entry: dict[str, Any] = {}
        if answer:  # before it is named, as the script sees it
            entry["answer"] = repr(self.plain(value))
        if name is not None or not isinstance(value, _LITERALS):
            bound = self._name(value, name or self._fresh())
            line = f"{bound} = {line}"
        self.entries.append({"code": line, **entry})
        if (wrap and type(value).__module__ != "builtins" and name is None
                and not isinstance(value, enum.Enum) and not hasattr(value, "tolist")):
            return Recorded(value, self.names[id(value)], self, reads)
        return value


class _Method:
    """A method of a recorded object: called, it is written down; passed as an argument
    (a callback), it is the real method, written as ``name.method``."""

    def __init__(self, recorder: Recorder, text: str, real: Callable[..., Any],
                 reads: bool = False) -> None:
        self.recorder, self.text, self.real, self.reads = recorder, text, real, reads

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.recorder._made(self.text, self.real, args, kwargs, None, wrap=True,
                                   reads=self.reads)


def real(value: Any) -> Any:
    """The engine's own object behind a recorded one (itself if it is not recorded)."""
    return _real(value)


def _real(value: Any) -> Any:
    if isinstance(value, Recorded):
        return value._kv_real
    if isinstance(value, _Method):
        return value.real
    if type(value) is list:  # not a subclass (torch.Size is a tuple)
        return [_real(v) for v in value]
    if type(value) is tuple:
        return tuple(_real(v) for v in value)
    return value


class Recorded:
    """An engine object whose method calls are written down; attributes that are not
    methods are read through, unrecorded (the adapter's introspection)."""

    def __init__(self, real: Any, name: str, recorder: Recorder, reads: bool = False) -> None:
        object.__setattr__(self, "_kv_real", real)
        object.__setattr__(self, "_kv_name", name)
        object.__setattr__(self, "_kv_recorder", recorder)
        object.__setattr__(self, "_kv_reads", reads)

    def __getattr__(self, attribute: str) -> Any:
        value = getattr(self._kv_real, attribute)
        recorder: Recorder = self._kv_recorder
        text = f"{self._kv_name}.{attribute}"
        if not callable(value) or isinstance(value, type):
            if not self._kv_reads:
                return value
            return recorder._made(text, lambda: value, (), {}, None, wrap=True,
                                  call=False, reads=True)
        return _Method(recorder, text, value, self._kv_reads)

    def __setattr__(self, attribute: str, value: Any) -> None:
        setattr(self._kv_real, attribute, value)

    def __eq__(self, other: object) -> bool:
        return bool(self._kv_real == _real(other))

    def __hash__(self) -> int:
        return hash(self._kv_real)


class _Off:
    """Recording off: the engine's objects as they are, no entries."""

    enabled = False

    def wrap(self, obj: Any, name: str, reads: bool = False) -> Any:
        return obj

    def new(self, make: Callable[..., Any], *args: Any, name: str | None = None,
            method: str | None = None, **kwargs: Any) -> Any:
        return (make if method is None else getattr(make, method))(*args, **kwargs)

    def source(self, text: str) -> None:
        pass

    def setup(self, text: str) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def import_line(self, line: str) -> None:
        pass

    def carry(self, module: Any, marker: str) -> None:
        pass

    def seen(self, expression: str, value: Any) -> None:
        pass

    def made(self, obj: Any, name: str, code: str) -> str:
        return name

    def home(self, cls: Any, module: str) -> None:
        pass

    def rename_module(self, alias: str, name: str) -> None:
        pass


OFF = _Off()


class _State:
    current: Recorder | None = None


def start() -> Recorder:
    """Record the next target instance built (the host, on ``new`` with ``record``)."""
    _State.current = Recorder()
    return _State.current


def stop() -> None:
    _State.current = None


def active() -> Recorder | _Off:
    """What an adapter being built records with: the recorder, or :data:`OFF`."""
    return _State.current or OFF


def identifier(text: object) -> str:
    """A Python name made of ``text`` (a key): ``key_a``."""
    return "key_" + (re.sub(r"\W", "_", str(text)) or "_")
