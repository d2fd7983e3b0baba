"""A bare dict-and-OrderedDict LRU manager: the floor for any Python manager.

No deduplication, no checks, no reset, events as a plain log: only what the
benchmark traces need (unique keys, no misuse). It speaks the native API's shape
(``lookup`` answers the spec's ``LookupResult``) so the native driver can run it.
Not a product: a yardstick.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from kvoffload.spec.vocabulary import LookupResult

_MISS, _PENDING, _HIT = LookupResult.MISS, LookupResult.PENDING, LookupResult.HIT


class BareLru:
    """Slots in a dict, evictable keys in an OrderedDict, in-flight keys in a set."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.slot: dict[bytes, int] = {}
        self.storing: set[bytes] = set()
        self.readers: dict[bytes, int] = {}
        self.lru: OrderedDict[bytes, None] = OrderedDict()
        self.free = list(range(capacity - 1, -1, -1))
        self.events: list[tuple[bool, list[bytes]]] = []

    def lookup(self, key: bytes) -> LookupResult:
        if key in self.slot:
            return _PENDING if key in self.storing else _HIT
        return _MISS

    def prepare_load(self, keys: Sequence[bytes]) -> list[int]:
        readers, lru = self.readers, self.lru
        for key in keys:
            count = readers.get(key, 0)
            if not count:
                del lru[key]
            readers[key] = count + 1
        return [self.slot[k] for k in keys]

    def complete_load(self, keys: Sequence[bytes]) -> None:
        readers, lru = self.readers, self.lru
        for key in keys:
            count = readers[key] - 1
            if count:
                readers[key] = count
            else:
                del readers[key]
                lru[key] = None

    def prepare_store(self, keys: Sequence[bytes]) -> tuple[list[bytes], list[int],
                                                             list[bytes]] | None:
        slot = self.slot
        new = [k for k in keys if k not in slot]
        needed = len(new) - len(self.free)
        evicted: list[bytes] = []
        if needed > 0:
            protected = set(keys)
            for key in self.lru:
                if key not in protected:
                    evicted.append(key)
                    if len(evicted) == needed:
                        break
            if len(evicted) < needed:
                return None
            for key in evicted:
                del self.lru[key]
                self.free.append(slot.pop(key))
            self.events.append((True, evicted))
        slots = [self.free.pop() for _ in new]
        for key, s in zip(new, slots, strict=True):
            slot[key] = s
            self.storing.add(key)
        return new, slots, evicted

    def complete_store(self, keys: Sequence[bytes], success: bool = True) -> None:
        storing, lru = self.storing, self.lru
        done = [k for k in keys if k in storing]
        for key in done:
            storing.remove(key)
            if success:
                lru[key] = None
            else:
                self.free.append(self.slot.pop(key))
        if success and done:
            self.events.append((False, done))

    def touch(self, keys: Sequence[bytes]) -> None:
        """vLLM 0.24's order: walked backwards, so the first key ends most recent."""
        lru = self.lru
        for key in reversed(keys):
            if key in lru:
                lru.move_to_end(key)

    def take_events(self) -> list[tuple[bool, list[bytes]]]:
        events, self.events = self.events, []
        return events
