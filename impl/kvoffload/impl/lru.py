"""LRU eviction as vLLM 0.21-0.24 orders it, in O(1) per key: the one place the LRU
order is written.

One queue (an ``OrderedDict``, least recent first) holds exactly the evictable keys,
and is the order's :attr:`~LruEviction.evictable` mapping: the manager inserts a key
when it becomes evictable (its store completes, or its last reader leaves), so it
enters at the most-recent end, and deletes it when it is pinned. ``touch`` moves an
evictable key to the most-recent end, walking its keys backwards, so the call's first
key ends most recent. Lookup and ``prepare_store`` are not uses. Eviction takes the
least recent keys. Pinned and in-flight blocks are not in the queue, so eviction never
walks past them.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Collection, Mapping, MutableMapping, Sequence
from itertools import filterfalse, islice

from kvoffload.spec.errors import InvariantViolation
from kvoffload.spec.vocabulary import Key


class LruEviction:
    """The evictable keys, least recently used first."""

    __slots__ = ("queue",)

    def __init__(self) -> None:
        self.queue: OrderedDict[Key, None] = OrderedDict()

    @property
    def evictable(self) -> MutableMapping[Key, None]:
        """The queue itself: a key set in it goes to the most-recent end; a key deleted
        from it (pinned) leaves the order."""
        return self.queue

    def stored(self, keys: Sequence[Key], free: int, protected: Collection[Key]
               ) -> Sequence[Key]:
        """``prepare_store`` accepted these new keys with ``free`` slots free: remove and
        return as many of the least recent keys not in ``protected`` as the keys beyond
        ``free`` need, least recent first (the one place LRU chooses victims). STORING
        blocks are not queued; only the number of keys matters."""
        needed = len(keys) - free
        if needed <= 0:
            return ()
        queue = self.queue
        if protected:
            victims = tuple(islice(filterfalse(protected.__contains__, queue), needed))
        elif needed == 1 and queue:  # decode's usual store
            return (queue.popitem(False)[0],)
        else:
            victims = tuple(islice(queue, needed))
        if len(victims) != needed:
            raise InvariantViolation(
                "lru_queues_evictable_blocks",
                f"asked for {needed} victims, the queue holds {len(victims)} unprotected keys")
        for key in victims:
            del queue[key]
        return victims

    def removed(self, keys: Sequence[Key]) -> None:
        """A failed store was never queued."""

    def touched(self, keys: Sequence[Key], ready: Collection[Key]) -> None:
        """Each evictable key to the most-recent end, the call walked backwards; other
        keys are skipped. A key named twice ends where its first occurrence puts it, as
        when the call is deduplicated first (the last move of a key decides)."""
        move = self.queue.move_to_end
        rest = reversed(keys)
        while True:
            try:  # the usual call: every key evictable, moved by one C loop
                deque(map(move, rest), 0)
            except KeyError:  # a key that is not evictable: skipped, the walk goes on
                continue
            return

    def evict(self, count: int, protected: Collection[Key]) -> Sequence[Key]:
        """Remove and return the ``count`` least recent keys not in ``protected``: what a
        store of ``count`` new keys with no slot free evicts."""
        return self.stored(range(count), 0, protected)

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
