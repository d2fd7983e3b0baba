"""The call protocol between the judge and a target's host (docs/protocol.md).

One JSON object per line (UTF-8, ``\\n``-terminated), on the host's standard input
(requests, from the judge) and standard output (answers, from the host); one answer per
request, in order. Calls and answers use the corpus's vocabulary (docs/corpus.md): a
call is ``{"op": ..., "keys": [...], "success": ..., "ticket": ...}`` with the target's
own ticket (an int) where the corpus has a name; an answer is the adapter's reading of
what the target returned, with concrete slots, tickets and epochs.

This module holds the vocabulary and its reading, nothing that runs a process:
:func:`call_message` and :func:`read_call` (judge to host), :func:`value_message` and
:func:`read_value` (host to judge). :func:`read_value` is strict: a field of the wrong
type in an otherwise well-formed answer is the target's answer being wrong
(:class:`~kvoffload.conformance.errors.Untranslatable`, naming the property it breaks); a message
that is not one of the protocol's is :class:`ProtocolError` (the judge ends the host: garbage on the
channel is a ``crash``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kvoffload.spec import Call, Completion, Key, LookupResult, Op

from ..adapter_api import RETRY, Capabilities, EventBatch, LoadOutcome, Reported, StoreOutcome
from ..errors import Untranslatable

PROTOCOL_VERSION = 1
"""Sent in ``hello`` and answered back; a host speaking another version is refused."""

SCRATCH = "KVOFFLOAD_SCRATCH"
"""The environment variable naming a host's scratch folder, its ``TMPDIR`` too: the
judge makes it for each host and removes it once the host's group has ended; a Python
host whose judge is gone removes it before it ends its group (no judge is left to)."""

CAPABILITY_FIELDS = ("touch", "reset", "events", "completion_tickets", "typed_misuse",
                     "strict_lookup")
"""The :class:`~kvoffload.conformance.adapter_api.Capabilities` a host announces in its ``hello``
answer."""


class ProtocolError(Exception):
    """A line from the host that is not a message of the protocol (or not the answer
    to the request made): the channel cannot be trusted any more."""


@dataclass(frozen=True)
class Opaque:
    """A key in an answer that the protocol cannot carry as itself (not a string or an
    int): sent as its ``repr``, read back as this, which equals no key the suite sends."""

    text: str

    def __repr__(self) -> str:
        return self.text


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_DECODER = json.JSONDecoder()


def dumps(message: Mapping[str, Any]) -> bytes:
    """One message as one line of compact JSON."""
    return (_ENCODER.encode(message) + "\n").encode()


class LineCache(dict[Any, Any]):
    """What was made of a line before (its call, its answer, its encoding): a session
    repeats few distinct lines (a lookup of the same key, the same completion), so each
    side reads or writes most of them once. Only what a line alone determines is kept,
    and only immutable values (a Call, a reading of an answer, bytes), so a line read
    from the cache is the line read again, validation included. Bounded: when full, it
    starts again empty."""

    LIMIT = 4096
    """Entries kept; lines longer than :data:`LONGEST` are not kept at all."""
    LONGEST = 512

    def keep(self, key: Any, value: Any) -> None:
        if len(self) >= self.LIMIT:
            self.clear()
        self[key] = value


def loads(line: bytes) -> dict[str, Any]:
    """One line as a message object; raises ProtocolError if it is none."""
    try:
        message = _DECODER.decode(line.decode())
    except (ValueError, UnicodeDecodeError) as error:
        raise ProtocolError(f"not a line of JSON: {_clip(line)}") from error
    if not isinstance(message, dict):
        raise ProtocolError(f"not a JSON object: {_clip(line)}")
    return message


def _clip(line: bytes, limit: int = 120) -> str:
    text = repr(line[:limit])
    return text + (f" ... ({len(line) - limit} more bytes)" if len(line) > limit else "")


# --- requests: the judge to the host ------------------------------------------------


def hello_message(target: str, config: Mapping[str, Any],
                  python: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The first request: which target, under which configuration. ``python`` (for
    the suite's own Python host only): the judge's ``sys.path``."""
    message: dict[str, Any] = {"request": "hello", "protocol": PROTOCOL_VERSION,
                               "target": target, "config": dict(config)}
    if python is not None:
        message["python"] = dict(python)
    return message


def new_message(capacity: int, record: bool = False) -> dict[str, Any]:
    """Build a fresh target of ``capacity`` slots (it replaces the previous one).
    ``record`` (optional, for engine targets): the host writes down the engine calls the
    adapter makes and sends them back as ``engine`` in each answer (docs/protocol.md)."""
    message: dict[str, Any] = {"request": "new", "capacity": capacity}
    if record:
        message["record"] = True
    return message


def call_message(call: Call) -> dict[str, Any]:
    """A call on the current target, in the corpus's vocabulary (the ticket is the
    target's own, an int)."""
    body: dict[str, Any] = {"op": call.op.value}
    if call.op is not Op.RESET_CACHE and call.op is not Op.TAKE_EVENTS:
        body["keys"] = list(call.keys)
    if call.op is Op.COMPLETE_STORE:
        body["success"] = call.success
    if call.ticket is not None:
        body["ticket"] = call.ticket
    return {"request": "call", "call": body}


_CALL_LINES = LineCache()


def call_line(call: Call) -> bytes:
    """:func:`call_message` as its line (the same bytes; a call sent before is not
    encoded again)."""
    line = _CALL_LINES.get(call)
    if line is None:
        line = dumps(call_message(call))
        if len(line) <= LineCache.LONGEST:
            _CALL_LINES.keep(call, line)
    return line


BYE = {"request": "bye"}
"""The last request: the host ends (it is not answered)."""

_OPS = {op.value: op for op in Op}


def read_call(body: object) -> Call:
    """A call object as the host reads it; raises ProtocolError if it is not one."""
    if not isinstance(body, dict) or body.get("op") not in _OPS:
        raise ProtocolError(f"not a call: {body!r}")
    keys = body.get("keys", [])
    ticket = body.get("ticket")
    success = body.get("success", True)
    if (not isinstance(keys, list) or not all(_is_key(k) for k in keys)
            or not (ticket is None or _is_int(ticket)) or not isinstance(success, bool)):
        raise ProtocolError(f"malformed call: {body!r}")
    try:
        return Call(_OPS[body["op"]], tuple(keys), success=success, ticket=ticket)
    except ValueError as error:  # MalformedCall: not a call of the API
        raise ProtocolError(f"malformed call {body!r}: {error}") from error


_CALLS = LineCache()


def read_call_line(line: bytes) -> Call | None:
    """The call a ``call`` request line carries, or None if the line is not a ``call``
    request (any other request, or not JSON); raises ProtocolError for a ``call`` request
    whose call is malformed. The host's reading of the judge's lines: a line read before
    is not parsed again."""
    call: Call | None = _CALLS.get(line)
    if call is not None:
        return call
    message = loads(line)
    if message.get("request") != "call":
        return None
    call = read_call(message.get("call"))
    if len(line) <= LineCache.LONGEST:
        _CALLS.keep(line, call)
    return call


def _is_key(value: object) -> bool:
    return isinstance(value, str) or _is_int(value)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --- answers: the host to the judge -------------------------------------------------


def hello_answer(adapter: str, why: str, capabilities: Capabilities) -> dict[str, Any]:
    return {"answer": "hello", "protocol": PROTOCOL_VERSION, "adapter": adapter, "why": why,
            "capabilities": {name: getattr(capabilities, name) for name in CAPABILITY_FIELDS}}


def read_hello(message: Mapping[str, Any]) -> tuple[str, str, Capabilities]:
    """(adapter, why, capabilities) from a ``hello`` answer; raises ProtocolError."""
    if message.get("protocol") != PROTOCOL_VERSION:
        raise ProtocolError(f"the host speaks protocol version {message.get('protocol')!r}; "
                            f"this judge speaks {PROTOCOL_VERSION}")
    adapter, why, caps = message.get("adapter"), message.get("why", ""), message.get("capabilities")
    if not isinstance(adapter, str) or not isinstance(why, str) or not isinstance(caps, dict):
        raise ProtocolError(f"malformed hello answer: {message!r}")
    unknown = set(caps) - set(CAPABILITY_FIELDS)
    if unknown or not all(isinstance(v, bool) for v in caps.values()):
        raise ProtocolError(f"malformed capabilities in the hello answer: {caps!r}")
    return adapter, why, Capabilities(**caps)


def refused_message(kind: str, message: str) -> dict[str, Any]:
    """``hello`` or ``new`` could not be done: ``kind`` is ``usage`` (the run cannot be
    made as asked) or ``load`` (the target could not be imported or built)."""
    return {"answer": "refused", "kind": kind, "message": message}


BUILT = {"answer": "built"}


def raised_message(type_name: str, code: object, message: str, rejection: bool) -> dict[str, Any]:
    """The call raised: the exception's class name, its misuse ``code`` (a string, or
    null), its message, and whether the adapter reads it as the target's rejection of
    misuse (else a crash)."""
    return {"answer": "raised", "type": type_name,
            "code": code if isinstance(code, str) else None, "message": message,
            "rejection": rejection}


def untranslatable_message(prop: str, message: str) -> dict[str, Any]:
    """The adapter could not read the target's answer (the property it breaks)."""
    return {"answer": "untranslatable", "prop": prop, "message": message}


def value_message(op: Op, value: object) -> dict[str, Any]:
    """The adapter's reading of a call's answer (what an Adapter method returned)."""
    return {"answer": "returned", "value": _value(op, value)}


def _keys(keys: Iterable[Key] | None) -> list[object] | None:
    if keys is None:
        return None
    return [k if _is_key(k) else {"opaque": repr(k)} for k in keys]


def _value(op: Op, value: object) -> dict[str, Any]:
    if op is Op.LOOKUP:
        name = "RETRY" if value is RETRY else value.name if isinstance(value, LookupResult) \
            else repr(value)
        return {"kind": "lookup", "result": name}
    if isinstance(value, StoreOutcome):
        if not value.accepted:
            return {"kind": "rejected", "needed": value.needed, "available": value.available}
        return {"kind": "store_plan", "keys": _keys(value.keys), "slots": list(value.slots),
                "evicted": _keys(value.evicted), "epoch": value.epoch, "ticket": value.ticket}
    if isinstance(value, LoadOutcome):
        return {"kind": "load_plan", "keys": _keys(value.keys), "slots": list(value.slots),
                "epoch": value.epoch, "ticket": value.ticket}
    if isinstance(value, Completion):
        return {"kind": "completion", "applied": _keys(value.applied),
                "released": _keys(value.released), "ignored": _keys(value.ignored)}
    if isinstance(value, EventBatch):
        return {"kind": "events", "net": value.net,
                "batches": [{"removed": removed, "keys": _keys(keys)}
                            for removed, keys in value.items]}
    if op is Op.RESET_CACHE:
        return {"kind": "reset", "epoch": value}
    return {"kind": "none"}


_SHARED_LINES: dict[object, bytes] = {
    result: dumps(value_message(Op.LOOKUP, result)) for result in (*LookupResult, RETRY)}
_NONE_LINE = dumps(value_message(Op.TOUCH, None))
_NONE_OPS = frozenset(Op) - {Op.LOOKUP, Op.RESET_CACHE}


def value_line(op: Op, value: object) -> bytes:
    """:func:`value_message` as its line (the same bytes; the answers most calls get,
    a lookup's result and "none", are encoded once)."""
    if op is Op.LOOKUP and (value is RETRY or type(value) is LookupResult):
        return _SHARED_LINES[value]
    if value is None and op in _NONE_OPS:
        return _NONE_LINE
    return dumps(value_message(op, value))


_LOOKUPS: dict[str, Reported] = {"MISS": LookupResult.MISS, "PENDING": LookupResult.PENDING,
                                 "HIT": LookupResult.HIT, "RETRY": RETRY}
_EXPECTED_KIND = {Op.LOOKUP: ("lookup",), Op.PREPARE_STORE: ("store_plan", "rejected"),
                  Op.PREPARE_LOAD: ("load_plan",), Op.COMPLETE_LOAD: ("completion", "none"),
                  Op.COMPLETE_STORE: ("completion", "none"), Op.TOUCH: ("none",),
                  Op.RESET_CACHE: ("reset",), Op.TAKE_EVENTS: ("events",),
                  Op.FAIL_NODE: ("none",)}
_PROP_OF = {Op.LOOKUP: "lookup", Op.PREPARE_STORE: "store-plan", Op.PREPARE_LOAD: "load-plan",
            Op.COMPLETE_LOAD: "completion", Op.COMPLETE_STORE: "completion", Op.TOUCH: "crash",
            Op.RESET_CACHE: "epochs", Op.TAKE_EVENTS: "events", Op.FAIL_NODE: "crash"}


_VALUES = LineCache()


def read_returned_line(op: Op, line: bytes) -> object:
    """The judge's reading of a ``returned`` answer line to a call of ``op`` (what
    :func:`read_value` makes of its value), or :data:`NOT_RETURNED` if the line is some
    other answer (then read it with :func:`loads`). Raises as :func:`read_value` does;
    ProtocolError if the line is not JSON. A line read before is not parsed again (what
    it was read as is immutable: enums, frozen dataclasses of tuples, ints)."""
    key = (op, line)
    value = _VALUES.get(key, NOT_RETURNED)
    if value is not NOT_RETURNED:
        return value
    message = loads(line)
    if message.get("answer") != "returned":
        return NOT_RETURNED
    value = read_value(op, message.get("value"))
    if len(line) <= LineCache.LONGEST:
        _VALUES.keep(key, value)
    return value


NOT_RETURNED: Any = object()
"""What :func:`read_returned_line` gives for an answer that is not ``returned``."""


def read_value(op: Op, value: object) -> object:
    """The judge's reading of a ``returned`` answer to a call of ``op``: what the
    adapter method would have returned in-process. A wrong field raises Untranslatable
    (the property it breaks); a value that is not an answer object, ProtocolError."""
    if not isinstance(value, dict) or not isinstance(value.get("kind"), str):
        raise ProtocolError(f"not an answer object: {value!r}")
    kind = value["kind"]
    if kind not in _EXPECTED_KIND[op]:
        raise Untranslatable(_PROP_OF[op], f"{op.value} answered a {kind!r} answer; expected "
                             f"{' or '.join(map(repr, _EXPECTED_KIND[op]))}")
    return _READERS[kind](value)


def _int(value: Mapping[str, Any], name: str, prop: str, optional: bool = True) -> int | None:
    got = value.get(name)
    if got is None and optional:
        return None
    if not isinstance(got, int) or isinstance(got, bool):
        raise Untranslatable(prop, f"the {name} {got!r} is not an int")
    return got


def _key_list(value: Mapping[str, Any], name: str, prop: str,
              optional: bool = False) -> tuple[Key, ...] | None:
    got = value.get(name)
    if got is None and optional:
        return None
    if not isinstance(got, list):
        raise Untranslatable(prop, f"the {name} {got!r} are not a list of keys")
    if set(map(type, got)) <= {str, int}:  # the common case, read at once
        return tuple(got)
    keys: list[Key] = []
    for item in got:
        if _is_key(item):
            keys.append(item)
        elif isinstance(item, dict) and isinstance(item.get("opaque"), str):
            keys.append(Opaque(item["opaque"]))
        else:
            raise Untranslatable(prop, f"{item!r} in {name} is not a key (a string or an int)")
    return tuple(keys)


def _slot_list(value: Mapping[str, Any]) -> tuple[int, ...]:
    got = value.get("slots")
    if not isinstance(got, list) or not set(map(type, got)) <= {int}:  # bool is not int
        raise Untranslatable("slots", f"slots {got!r} are not a list of ints")
    return tuple(got)


def _lookup(value: Mapping[str, Any]) -> Reported:
    result = value.get("result")
    if result not in _LOOKUPS:
        raise Untranslatable("lookup", f"lookup returned {result!r}, not MISS, PENDING, HIT "
                             f"or RETRY")
    return _LOOKUPS[result]


def _store_plan(value: Mapping[str, Any]) -> StoreOutcome:
    return StoreOutcome(
        True, keys=_key_list(value, "keys", "store-plan") or (), slots=_slot_list(value),
        evicted=_key_list(value, "evicted", "eviction-choice") or (),
        epoch=_int(value, "epoch", "epochs"), ticket=_int(value, "ticket", "tickets"))


def _rejected(value: Mapping[str, Any]) -> StoreOutcome:
    return StoreOutcome(False, needed=_int(value, "needed", "rejection"),
                        available=_int(value, "available", "rejection"))


def _load_plan(value: Mapping[str, Any]) -> LoadOutcome:
    return LoadOutcome(_key_list(value, "keys", "load-plan", optional=True),
                       _slot_list(value), epoch=_int(value, "epoch", "epochs"),
                       ticket=_int(value, "ticket", "tickets"))


def _completion(value: Mapping[str, Any]) -> Completion:
    applied, released, ignored = (_key_list(value, name, "completion") or ()
                                  for name in ("applied", "released", "ignored"))
    return Completion(applied, released, ignored)


def _events(value: Mapping[str, Any]) -> EventBatch:
    batches, net = value.get("batches"), value.get("net", False)
    if not isinstance(batches, list) or not isinstance(net, bool):
        raise Untranslatable("events", f"events {value!r} are not a list of batches")
    items: list[tuple[bool, tuple[Key, ...]]] = []
    for batch in batches:
        if not isinstance(batch, dict) or not isinstance(batch.get("removed"), bool):
            raise Untranslatable("events", f"the event batch {batch!r} is not "
                                 "{\"removed\": bool, \"keys\": [...]}")
        items.append((batch["removed"], _key_list(batch, "keys", "events") or ()))
    return EventBatch(tuple(items), net=net)


def _reset(value: Mapping[str, Any]) -> int | None:
    return _int(value, "epoch", "epochs")


def _none(value: Mapping[str, Any]) -> None:
    return None


_READERS: dict[str, Any] = {
    "lookup": _lookup, "store_plan": _store_plan, "rejected": _rejected,
    "load_plan": _load_plan, "completion": _completion, "events": _events, "reset": _reset,
    "none": _none}


def config_fields(config: Any) -> dict[str, Any]:
    """What a host is told of the configuration (a CheckConfig's plain values). A trace
    run's tier may be wider than a random run's largest (``--trace``): the hello names
    at most MAX_CAPACITY slots, as a host judges a random run's configuration; each
    ``new`` request names the tier it builds."""
    from ..options import MAX_CAPACITY

    return {"profile": config.profile.value, "policy": config.policy.value,
            "level": config.level.value, "assume": list(config.assume),
            "capacity": min(config.capacity, MAX_CAPACITY), "adapter": config.adapter,
            "max_keys_per_call": config.max_keys_per_call,
            "call_timeout": config.call_timeout,
            **({"fault": config.fault} if config.injects_faults else {})}


def keys_text(keys: Sequence[Key]) -> str:
    return ", ".join(map(repr, keys))
