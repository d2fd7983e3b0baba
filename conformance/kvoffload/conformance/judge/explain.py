"""Explaining a divergence: renderings and the spec-side rows of violation tables.

Everything here reads the spec's state and builds text; nothing decides a verdict
(that is :mod:`.compare`) or calls the target (that is :mod:`.lockstep`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from heapq import nsmallest

from kvoffload.spec import (
    CacheState,
    Call,
    Events,
    Key,
    LookupResult,
    LruOrder,
    Phase,
)

from ..adapter_api import RETRY
from ..config import CheckConfig, Level

Row = tuple[str, str, str]
"""(aspect, spec, target): one line of a violation's table."""


SHOWN_ITEMS = 64
"""Items of one collection a message shows; a hostile target's answer of millions of
slots costs no more to explain than a short one (the rest is counted, not rendered)."""


def show(value: object) -> str:
    """A short, stable rendering of outputs and keys for tables (at most
    :data:`SHOWN_ITEMS` items of a collection, then how many more)."""
    if isinstance(value, LookupResult):
        return value.name
    if value is RETRY:
        return "RETRY"
    if isinstance(value, frozenset | set):
        items = nsmallest(SHOWN_ITEMS, map(repr, value))
        return "{" + _items(items, len(value)) + "}"
    if isinstance(value, list):
        return "[" + _items(list(map(repr, value[:SHOWN_ITEMS])), len(value)) + "]"
    if isinstance(value, tuple) and value:
        head = value[:SHOWN_ITEMS]
        flat = all(not isinstance(v, tuple) for v in head)
        if flat or len(value) > SHOWN_ITEMS:  # short tuples of tuples: repr below
            return ("(" + _items(list(map(repr, head)), len(value))
                    + ("," if len(value) == 1 else "") + ")")
    return repr(value)


def _items(shown: list[str], total: int) -> str:
    more = total - len(shown)
    return ", ".join(shown) + (f", ... ({more:,} more)" if more > 0 else "")


def call_row(call: Call) -> Row:
    return ("call", str(call), str(call))


def slots_text(count: int) -> str:
    return f"{count} slot{'' if count == 1 else 's'}"


def context(state: CacheState, keys: Iterable[Key]) -> list[Row]:
    """The spec's state of each key (phase, slot, readers), one row per key."""
    rows = []
    for key in dict.fromkeys(keys):
        block = state.table.get(key)
        if block is None:
            text = "ABSENT"
        else:
            text = f"{block.phase.name}, slot {block.slot}"
            if block.readers:
                text += f", {block.readers} reader(s)"
        rows.append((f"spec state of {key!r}", text, ""))
    return rows


def room(state: CacheState, call: Call) -> int:
    """Free slots plus blocks a store of ``call.keys`` may evict."""
    return len(state.free_slots()) + len(state.evictable() - frozenset(call.keys))


def state_rows(state: CacheState, call: Call) -> list[Row]:
    return [("free slots", show(state.free_slots()), ""),
            ("evictable, not in call", show(state.evictable() - frozenset(call.keys)), ""),
            *context(state, call.keys)]


def recency_rows(state: CacheState, config: CheckConfig) -> list[Row]:
    """The eviction order's model (only at --level exact, where it decides)."""
    recency = state.recency
    if config.level is not Level.EXACT:
        return []
    if isinstance(recency, LruOrder):
        return [("LRU order (least recent first)", show(recency.order), "")]
    return [("ARC t1 / t2 (least recent first)", f"{show(recency.t1)} / {show(recency.t2)}", ""),
            ("ARC ghosts b1 / b2 (oldest first)", f"{show(recency.b1)} / {show(recency.b2)}",
             ""),
            ("ARC p", str(recency.p), "")]


def why_not_evictable(state: CacheState, key: Key) -> str:
    block = state.table.get(key)
    if block is None:
        return "it is not in the cache"
    if block.phase is Phase.STORING:
        return "its store is still in flight"
    if block.readers:
        return f"it is being read ({block.readers} reader(s))"
    return "it is named in the call"


def holder(state: CacheState, slot: int) -> str:
    """Who still uses ``slot`` (a live block or a copy a reset left running)."""
    for block in state.blocks:
        if block.slot == slot:
            return f"still held by {block.key!r} ({block.phase.value})"
    for orphan in state.orphans:
        if orphan.slot == slot:
            return (f"still used by a {orphan.kind.value} of {orphan.key!r} that "
                    f"reset_cache left running (epoch {orphan.epoch})")
    return "not free"


def show_events(expected: object) -> str:
    if not isinstance(expected, Events):
        return repr(expected)
    return f"stored {show(expected.stored)}, removed {show(expected.removed)}"


def show_batch(items: Sequence[tuple[bool, tuple[Key, ...]]]) -> str:
    parts = [f"{'removed' if removed else 'stored'} {show(frozenset(keys))}"
             for removed, keys in items if keys]
    return "; ".join(parts) or "none"


def error_parts(error: BaseException) -> tuple[object, str]:
    """An error's class-level ``code`` (None if its class has none, or reading it raises)
    and its message, read so that a target's exception that fails to describe itself
    is still described (the judge's :func:`error_text`, the host's ``raised`` answer)."""
    try:
        code = getattr(type(error), "code", None)
    except Exception:  # a metaclass of the target's that raises
        code = None
    try:
        message = str(error)
    except Exception:
        message = "<exception str() failed>"
    return code, message


def error_text(error: BaseException) -> str:
    """An error as reports show it: its class, its misuse code when its class has one
    (a ``code`` string, as the spec's errors have) that its message does not already
    give (the spec's errors start with theirs), its message. A message that fails to
    print is shown as tracebacks show it. (``SystemExit("bye").code`` is an exit
    status, not a misuse code: only the class's counts.)"""
    code, message = error_parts(error)
    if isinstance(code, str) and not message.startswith(f"[{code}]"):
        return f"{type(error).__name__} [{code}]: {message}"
    return f"{type(error).__name__}: {message}"
