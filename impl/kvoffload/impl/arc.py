"""ARC eviction (Megiddo and Modha), adapted to blocks that cannot always be evicted.

The model (``docs/spec.md`` D10, ``kvoffload.spec.recency.ArcLists``): ``t1`` holds
live keys used once, ``t2`` live keys used again, each least recent first; ``b1`` /
``b2`` are ghosts of keys evicted from them; ``p`` is the target size of ``t1``.
``prepare_store`` treats each new key ``x`` of its call as one request of Megiddo and
Modha's algorithm, in call order (:meth:`ArcEviction.stored`): adapt (``x`` in ``b1``
raises ``p`` by ``max(1, |b2| // |b1|)``, in ``b2`` lowers it by
``max(1, |b1| // |b2|)``); then, only when no slot is free for ``x``, REPLACE: the
victim is the least recent evictable key of ``t1`` when ``|t1| > p`` or when ``x`` is
in ``b2`` and ``|t1| == p``, else of ``t2``, falling back to the other list; then
insert (``x`` from a ghost list enters ``t2``, any other ``t1``) and trim the ghosts,
oldest first, to ``|t1| + |b1| <= c`` and ``|t1| + |t2| + |b1| + |b2| <= 2c``. A
``touch`` moves a READY key to the most-recent end of ``t2``; a block that becomes
evictable moves to the most-recent end of its list.

How it is kept in O(1) per key: a list's victims are always its least recent
*evictable* keys, and every event that moves a key within or between lists either
concerns an evictable key (moved in the evictable order too) or a non-evictable one
(which reaches the most-recent end of its list again when it becomes evictable). So
each list is kept as its size plus an ``OrderedDict`` of its evictable keys in list
order: never a walk past a pinned or in-flight block.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Container, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from itertools import chain, filterfalse

from kvoffload.spec.errors import InvariantViolation
from kvoffload.spec.vocabulary import Key

_NOTHING = object()


@dataclass(frozen=True)
class ArcView:
    """What :meth:`ArcEviction.view` shows: the evictable order of each list, the
    list sizes (evictable or not), the ghosts (least recent first) and ``p``."""

    t1_evictable: tuple[Key, ...]
    t2_evictable: tuple[Key, ...]
    t1_size: int
    t2_size: int
    b1: tuple[Key, ...]
    b2: tuple[Key, ...]
    p: int


class _Evictable(MutableMapping[Key, None]):
    """ARC's evictable keys as one mapping (what the manager updates): setting a key puts
    it at the most-recent end of its own list's evictable order, deleting it takes it out."""

    __slots__ = ("arc",)

    def __init__(self, arc: ArcEviction) -> None:
        self.arc = arc

    def __setitem__(self, key: Key, value: None) -> None:
        self.arc.home[key][key] = None

    def __delitem__(self, key: Key) -> None:
        del self.arc.home[key][key]

    def __getitem__(self, key: Key) -> None:
        where = self.arc.home.get(key)
        if where is None or key not in where:
            raise KeyError(key)
        return None

    def __iter__(self) -> Iterator[Key]:
        return chain(self.arc.t1, self.arc.t2)

    def __len__(self) -> int:
        return len(self.arc.t1) + len(self.arc.t2)


class ArcEviction:
    """ARC's four lists and target ``p`` for a tier of ``capacity`` slots."""

    __slots__ = ("b1", "b2", "capacity", "evictable", "home", "p", "t1", "t1_size", "t2",
                 "t2_size")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.p = 0
        self.t1: OrderedDict[Key, None] = OrderedDict()
        """The evictable keys of t1, in t1's order."""
        self.t2: OrderedDict[Key, None] = OrderedDict()
        """The evictable keys of t2, in t2's order."""
        self.t1_size = 0
        self.t2_size = 0
        self.b1: OrderedDict[Key, None] = OrderedDict()
        self.b2: OrderedDict[Key, None] = OrderedDict()
        self.home: dict[Key, OrderedDict[Key, None]] = {}
        """Each live key's list, named by that list's evictable dict (t1 or t2)."""
        self.evictable: MutableMapping[Key, None] = _Evictable(self)
        """The evictable keys of both lists: the manager sets a key that becomes
        evictable (store completed, last reader left) and deletes one that is pinned."""

    def stored(self, keys: Sequence[Key], free: int, protected: Container[Key]
               ) -> Sequence[Key]:
        """``prepare_store`` accepted these new keys with ``free`` slots free: each is one
        request, in call order (adapt, REPLACE if no slot is left for it, insert). Returns
        the victims, in order; the manager has checked that enough exist."""
        victims: list[Key] = []
        b1, b2, home, capacity = self.b1, self.b2, self.home, self.capacity
        for number, key in enumerate(keys):
            in_b2 = key in b2
            if key in b1:
                self.p = min(capacity, self.p + max(1, len(b2) // len(b1)))
            elif in_b2:
                self.p = max(0, self.p - max(1, len(b1) // len(b2)))
            if number >= free:
                victims.append(self._replace(in_b2, protected))
            if key in b1:
                del b1[key]
                home[key] = self.t2
                self.t2_size += 1
            elif in_b2:
                del b2[key]
                home[key] = self.t2
                self.t2_size += 1
            else:
                home[key] = self.t1
                self.t1_size += 1
            self._trim()
        return tuple(victims)

    def _replace(self, in_b2: bool, protected: Container[Key]) -> Key:
        """REPLACE(x, p): evict the least recent evictable key of the preferred list (of
        the other one if it has none) into its ghost list; ``in_b2``: x is in ``b2``."""
        t1, t2 = self.t1, self.t2
        t1_first = self.t1_size > self.p or (in_b2 and self.t1_size == self.p)
        first, second = (t1, t2) if t1_first else (t2, t1)
        source = first
        victim = next(filterfalse(protected.__contains__, first), _NOTHING)
        if victim is _NOTHING:
            source = second
            victim = next(filterfalse(protected.__contains__, second), _NOTHING)
            if victim is _NOTHING:
                raise InvariantViolation("arc_lists_hold_live_blocks",
                                         "asked for a victim, no evictable key is left")
        del source[victim]
        del self.home[victim]
        if source is t1:
            self.t1_size -= 1
            self.b1[victim] = None
        else:
            self.t2_size -= 1
            self.b2[victim] = None
        return victim

    def _trim(self) -> None:
        b1, b2, capacity = self.b1, self.b2, self.capacity
        while b1 and self.t1_size + len(b1) > capacity:
            b1.popitem(last=False)
        while (b1 or b2) and self.t1_size + self.t2_size + len(b1) + len(b2) > 2 * capacity:
            (b2 if b2 else b1).popitem(last=False)

    def removed(self, keys: Sequence[Key]) -> None:
        home, t1 = self.home, self.t1
        for key in keys:
            if home.pop(key) is t1:
                self.t1_size -= 1
            else:
                self.t2_size -= 1

    def touched(self, keys: Sequence[Key], ready: Collection[Key]) -> None:
        home, t1, t2 = self.home, self.t1, self.t2
        for key in reversed(dict.fromkeys(keys)):  # a repeat's first occurrence decides
            where = home.get(key)
            # A STORING key moves to the most-recent end of its own list; it is not
            # evictable, so no evictable order changes. Absent keys (ghosts too) are ignored.
            if where is None or key not in ready:
                continue
            if where is t1:
                home[key] = t2
                self.t1_size -= 1
                self.t2_size += 1
                if key in t1:
                    del t1[key]
                    t2[key] = None
            elif key in t2:
                t2.move_to_end(key)

    def evict(self, count: int, protected: Container[Key]) -> Sequence[Key]:
        """``count`` victims outside any store (REPLACE for a key in no ghost list)."""
        return tuple(self._replace(False, protected) for _ in range(count))

    def cleared(self) -> None:
        self.p = 0
        self.t1_size = self.t2_size = 0
        for ordered in (self.t1, self.t2, self.b1, self.b2):
            ordered.clear()
        self.home.clear()

    def evictable_keys(self) -> Collection[Key]:
        return [*self.t1, *self.t2]

    def view(self) -> ArcView:
        return ArcView(tuple(self.t1), tuple(self.t2), self.t1_size, self.t2_size,
                       tuple(self.b1), tuple(self.b2), self.p)

    def check(self, live: Mapping[Key, object], evictable: Collection[Key]) -> None:
        """Raise :class:`InvariantViolation` unless the lists agree with the lifecycle."""
        c = self.capacity
        problems = []
        if set(self.home) != set(live):
            problems.append("t1 and t2 do not hold exactly the live blocks")
        if sum(1 for w in self.home.values() if w is self.t1) != self.t1_size:
            problems.append("t1's size is wrong")
        if len(self.home) != self.t1_size + self.t2_size:
            problems.append("t2's size is wrong")
        if set(self.t1) | set(self.t2) != set(evictable) or set(self.t1) & set(self.t2):
            problems.append("the evictable orders do not hold exactly the evictable blocks")
        if any(self.home.get(k) is not self.t1 for k in self.t1) or any(
                self.home.get(k) is not self.t2 for k in self.t2):
            problems.append("an evictable key sits in the other list's order")
        if set(self.b1) & set(self.b2) or (set(self.b1) | set(self.b2)) & set(live):
            problems.append("ghosts overlap each other or live blocks")
        if not (0 <= self.p <= c and self.t1_size + len(self.b1) <= c
                and self.t1_size + self.t2_size + len(self.b1) + len(self.b2) <= 2 * c):
            problems.append("ARC's size bounds are broken")
        if problems:
            raise InvariantViolation("arc_lists_hold_live_blocks", "; ".join(problems))
