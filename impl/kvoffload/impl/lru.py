"""LRU eviction as vLLM 0.21-0.24 orders it, in O(1) per key.

One queue (an ``OrderedDict``, least recent first) holds exactly the evictable keys:
a key enters at the most-recent end when it becomes evictable (its store completes,
or its last reader leaves), leaves when it is pinned or evicted, and moves to the
most-recent end on ``touch`` if it is evictable; ``touch`` walks its keys backwards,
so the call's first key ends most recent. Lookup and ``prepare_store`` are not uses.
Pinned and in-flight blocks are not in the queue, so eviction never walks past them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Container, Iterable, Mapping, Sequence
from itertools import filterfalse, islice

from kvoffload.spec.errors import InvariantViolation
from kvoffload.spec.vocabulary import Key


class LruEviction:
    """The evictable keys, least recently used first."""

    __slots__ = ("queue",)

    def __init__(self) -> None:
        self.queue: OrderedDict[Key, None] = OrderedDict()

    def stored(self, keys: Sequence[Key], free: int, protected: Container[Key]) -> list[Key]:
        """``prepare_store`` accepted these new keys with ``free`` slots free: evict the
        missing ones, least recent first; STORING blocks are not queued."""
        return self.evict(len(keys) - free, protected) if len(keys) > free else []

    def evictable(self, keys: Iterable[Key]) -> None:
        queue = self.queue
        for key in keys:
            queue[key] = None

    def pinned(self, keys: Iterable[Key]) -> None:
        queue = self.queue
        for key in keys:
            del queue[key]

    def removed(self, keys: Iterable[Key]) -> None:
        """A failed store was never queued."""

    def touched(self, keys: Sequence[Key], ready: Container[Key]) -> None:
        queue = self.queue
        for key in reversed(keys):
            if key in queue:
                queue.move_to_end(key)

    def evict(self, count: int, protected: Container[Key]) -> list[Key]:
        queue = self.queue
        victims = list(islice(filterfalse(protected.__contains__, queue), count))
        if len(victims) != count:
            raise InvariantViolation(
                "lru_queues_evictable_blocks",
                f"asked for {count} victims, the queue holds {len(victims)} unprotected keys")
        for key in victims:
            del queue[key]
        return victims

    def cleared(self) -> None:
        self.queue.clear()

    def evictable_keys(self) -> Collection[Key]:
        return self.queue.keys()

    def view(self) -> tuple[Key, ...]:
        """The queue, least recent first."""
        return tuple(self.queue)

    def check(self, live: Mapping[Key, object], evictable: Collection[Key]) -> None:
        """Raise :class:`InvariantViolation` unless the queue holds exactly ``evictable``."""
        if set(self.queue) != set(evictable):
            raise InvariantViolation(
                "lru_queues_evictable_blocks",
                f"queue {list(self.queue)!r} is not the evictable set "
                f"{sorted(map(repr, evictable))}")
