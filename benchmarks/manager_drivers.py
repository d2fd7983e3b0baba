"""Timed drivers: play a trace's requests on a manager, as a scheduler would.

Per request: look its keys up in order until the first key that is not a hit; load
the hit prefix (``prepare_load`` now, ``complete_load`` ``delay`` requests later);
store the rest (``prepare_store`` now, ``complete_store`` later, failing for the
requests the trace marks); drain ``take_events``. A *block operation* is one key in
one of those calls (a lookup of one key is one). The driver code is the same for every
manager of an API family, so its own overhead is in every figure alike.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from kvoffload.spec.outputs import StorePlan
from kvoffload.spec.vocabulary import LookupResult
from manager_trace import Request, TraceShape

_HIT = LookupResult.HIT


def _api(manager: Any) -> tuple[Callable[..., Any], ...]:
    """The manager's six calls as bound methods, looked up once per run (not per call):
    lookup, prepare_load, complete_load, prepare_store, complete_store, take_events."""
    return (manager.lookup, manager.prepare_load, manager.complete_load,
            manager.prepare_store, manager.complete_store, manager.take_events)


def _native_event_keys(events: Any) -> int:
    """How many keys an ``Events`` drain names."""
    return len(events.stored) + len(events.removed)


def _bare_event_keys(events: Any) -> int:
    """How many keys a ``BareLru`` drain (``(removed, keys)`` pairs) names."""
    seen = 0
    for _, keys in events:  # a plain loop: sum() over a generator costs more per call
        seen += len(keys)
    return seen


def drive_native(manager: Any, requests: Sequence[Request], shape: TraceShape,
                 bare: bool = False) -> tuple[int, int]:
    """Run the trace on a native-API manager (``OffloadManager``, or ``BareLru`` when
    ``bare``); returns the number of block operations and of event keys drained."""
    lookup, prepare_load, complete_load, prepare_store, complete_store, take_events = (
        _api(manager))
    count = _bare_event_keys if bare else _native_event_keys
    jobs: deque[tuple[int, bool, Sequence[bytes], bool]] = deque()
    delay, every, ops, seen = shape.delay, shape.events_every, 0, 0
    for step, request in enumerate(requests):
        keys = request.keys
        hits = 0
        for key in keys:
            if lookup(key) is not _HIT:
                break
            hits += 1
        ops += hits + (hits < len(keys))
        if hits:
            loaded = keys[:hits]
            prepare_load(loaded)
            ops += hits
            jobs.append((step + delay, True, loaded, True))
        rest = keys[hits:]
        if rest:
            out = prepare_store(rest)
            ops += len(rest)
            if bare:
                stored = out[0] if out is not None else None
            else:
                stored = out.keys if out.__class__ is StorePlan else None
            if stored:
                jobs.append((step + delay, False, stored, not request.store_fails))
        while jobs and jobs[0][0] <= step:
            ops += _complete_native(jobs.popleft(), complete_load, complete_store)
        if step % every == 0:
            seen += count(take_events())
    for job in jobs:
        ops += _complete_native(job, complete_load, complete_store)
    take_events()
    return ops, seen


def drive_vllm(manager: Any, requests: Sequence[Request], shape: TraceShape,
               contexts: Sequence[Any], hit: object) -> tuple[int, int]:
    """Run the trace through vLLM's manager API (a vLLM manager or ``VllmFacade``).

    ``hit`` is the lookup answer meaning HIT (``True``, or ``LookupResult.HIT``);
    ``contexts`` holds one ``ReqContext`` per request, built beforehand. The request
    hooks (``on_new_request``, ``on_request_finished``) are called as vLLM's scheduler
    does; they count in the time, not as block operations.
    """
    lookup, prepare_load, complete_load, prepare_store, complete_store, take_events = (
        _api(manager))
    on_new_request, on_request_finished = manager.on_new_request, manager.on_request_finished
    jobs: deque[tuple[int, bool, Sequence[bytes], bool, Any, bool]] = deque()
    delay, every, ops, seen = shape.delay, shape.events_every, 0, 0
    for step, request in enumerate(requests):
        context = contexts[step]
        on_new_request(context)
        keys = request.keys
        hits = 0
        for key in keys:
            if lookup(key, context) is not hit:
                break
            hits += 1
        ops += hits + (hits < len(keys))
        loaded = keys[:hits]
        if hits:
            prepare_load(loaded, context)
            ops += hits
        rest = keys[hits:]
        stored = None
        if rest:
            out = prepare_store(rest, context)
            ops += len(rest)
            stored = out.keys_to_store if out is not None else None
        if hits:
            jobs.append((step + delay, True, loaded, True, context, not stored))
        if stored:
            jobs.append((step + delay, False, stored, not request.store_fails, context, True))
        elif not hits:
            on_request_finished(context)
        while jobs and jobs[0][0] <= step:
            ops += _complete(jobs.popleft(), complete_load, complete_store, on_request_finished)
        if step % every == 0:
            for event in take_events():
                seen += len(event.keys)
    for job in jobs:
        ops += _complete(job, complete_load, complete_store, on_request_finished)
    for _ in take_events():
        pass
    return ops, seen


def _complete_native(job: tuple[int, bool, Sequence[bytes], bool],
                     complete_load: Callable[..., Any],
                     complete_store: Callable[..., Any]) -> int:
    _, is_load, keys, success = job
    if is_load:
        complete_load(keys)
    else:
        complete_store(keys, success)
    return len(keys)


def _complete(job: tuple[int, bool, Sequence[bytes], bool, Any, bool],
              complete_load: Callable[..., Any], complete_store: Callable[..., Any],
              on_request_finished: Callable[[Any], Any]) -> int:
    _, is_load, keys, success, context, last = job
    if is_load:
        complete_load(keys, context)
    else:
        complete_store(keys, context, success)
    if last:
        on_request_finished(context)
    return len(keys)


def decode_native(manager: Any, batches: Sequence[Sequence[bytes]],
                  bare: bool = False) -> tuple[int, int]:
    """Decode rounds on a native-API manager: per batch, store its keys, complete the
    store, look each key up, load them, complete the load, drain the events. Returns
    the block operations (five per key) and the event keys drained."""
    lookup, prepare_load, complete_load, prepare_store, complete_store, take_events = (
        _api(manager))
    count = _bare_event_keys if bare else _native_event_keys
    ops = seen = 0
    for keys in batches:
        prepare_store(keys)
        complete_store(keys)
        for key in keys:
            lookup(key)
        prepare_load(keys)
        complete_load(keys)
        seen += count(take_events())
        ops += 5 * len(keys)
    return ops, seen


def decode_vllm(manager: Any, batches: Sequence[Sequence[bytes]],
                context: Any) -> tuple[int, int]:
    """The same decode rounds through vLLM's manager API (``context`` on every call)."""
    lookup, prepare_load, complete_load, prepare_store, complete_store, take_events = (
        _api(manager))
    ops = seen = 0
    for keys in batches:
        prepare_store(keys, context)
        complete_store(keys, context)
        for key in keys:
            lookup(key, context)
        prepare_load(keys, context)
        complete_load(keys, context)
        for event in take_events():
            seen += len(event.keys)
        ops += 5 * len(keys)
    return ops, seen


def traffic_native(manager: Any, requests: Sequence[tuple[Sequence[bytes], Sequence[bytes]]],
                   bare: bool = False) -> tuple[int, int]:
    """Serve a request trace (each request: its block keys in prefix order, and the same
    keys last first) on a native-API manager with zero transfer time, as
    ``kvoffload traffic`` does: look the keys up in order until the first non-hit,
    ``prepare_load`` the hit prefix (pinned, so the store cannot evict it),
    ``prepare_store`` the rest, complete the load and the store, ``touch`` every key of
    the request (passed last first, so the last block ends most recent), drain the
    events. Returns the block operations and the prefix hits."""
    lookup, prepare_load, complete_load, prepare_store, complete_store, take_events = (
        _api(manager))
    touch = manager.touch
    ops = hits_in_all = 0
    for keys, last_first in requests:
        hits = 0
        for key in keys:
            if lookup(key) is not _HIT:
                break
            hits += 1
        ops += hits + (hits < len(keys))
        if hits:
            loaded = keys[:hits]
            prepare_load(loaded)
        stored = None
        if hits < len(keys):
            rest = keys[hits:]
            out = prepare_store(rest)
            ops += len(rest)
            if bare:
                stored = out[0] if out is not None else None
            else:
                stored = out.keys if out.__class__ is StorePlan else None
        if hits:
            complete_load(loaded)
            ops += 2 * hits
            hits_in_all += hits
        if stored:
            complete_store(stored)
            ops += len(stored)
        touch(last_first)
        ops += len(keys)
        take_events()
    return ops, hits_in_all


def traffic_vllm(manager: Any, requests: Sequence[tuple[Sequence[bytes], Sequence[bytes]]],
                 contexts: Sequence[Any], hit: object, touch: bool) -> tuple[int, int]:
    """The same trace through vLLM's manager API (``contexts``: one ``ReqContext`` per
    request, built beforehand; ``hit``: the lookup answer meaning HIT). ``touch=False``
    for a release without ``touch`` (0.34 ranks keys by the positions its contexts
    carry): the call is left out, and so are its block operations."""
    lookup, prepare_load, complete_load, prepare_store, complete_store, take_events = (
        _api(manager))
    touch_keys = manager.touch if touch else None
    on_new_request, on_request_finished = manager.on_new_request, manager.on_request_finished
    ops = hits_in_all = 0
    for (keys, last_first), context in zip(requests, contexts):  # noqa: B905  # same length
        on_new_request(context)
        hits = 0
        for key in keys:
            if lookup(key, context) is not hit:
                break
            hits += 1
        ops += hits + (hits < len(keys))
        if hits:
            loaded = keys[:hits]
            prepare_load(loaded, context)
        stored = None
        if hits < len(keys):
            rest = keys[hits:]
            out = prepare_store(rest, context)
            ops += len(rest)
            stored = out.keys_to_store if out is not None else None
        if hits:
            complete_load(loaded, context)
            ops += 2 * hits
            hits_in_all += hits
        if stored:
            complete_store(stored, context, True)
            ops += len(stored)
        if touch_keys is not None:
            touch_keys(last_first, context)
            ops += len(keys)
        for _ in take_events():
            pass
        on_request_finished(context)
    return ops, hits_in_all
