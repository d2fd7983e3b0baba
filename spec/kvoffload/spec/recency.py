"""Exact eviction-order models: LRU (as vLLM 0.24 and 0.25) and ARC (Megiddo and Modha's).

A recency model only orders keys; the lifecycle (who may be evicted at all) is decided
by the transitions, which hand the model the candidates. Every method is pure and
returns a new model. The transitions call, in this vocabulary:

``adapted(key)``             prepare_store accepted this new key (ARC adapts ``p``)
``inserted(key)``            prepare_store allocated a slot for a new key (STORING)
``evictable(keys)``          keys became evictable: store completed, or last reader left
``pinned(key)``              a READY key got its first reader
``touched(keys, ready)``     the scheduler marked keys as used (``touch``)
``removed(key)``             a STORING key's store failed: forget it, no ghost
``evicted(key)``             the key was chosen as a victim
``victim(candidates, key)``  the exact victim among the allowed candidates, to make room for ``key``
``cleared()``                reset
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from .errors import InvariantViolation
from .vocabulary import Key


def _without(seq: tuple[Key, ...], key: Key) -> tuple[Key, ...]:
    """``seq`` less every occurrence of ``key`` (slices, not a loop: thousands of keys
    on a production-size tier)."""
    if key not in seq:
        return seq
    at = seq.index(key)
    return seq[:at] + _without(seq[at + 1:], key)


def _moved_to_end(seq: tuple[Key, ...], key: Key) -> tuple[Key, ...]:
    """``seq`` with ``key`` moved to its most-recent end: ``seq`` itself if it is there
    already (a model checker touches the most recent key of a state over and over)."""
    if seq[-1:] == (key,) and key not in seq[:-1]:
        return seq
    return (*_without(seq, key), key)


def _first_in(seq: tuple[Key, ...], candidates: AbstractSet[Key]) -> Key | None:
    return next((k for k in seq if k in candidates), None)


@dataclass(frozen=True)
class LruOrder:
    """vLLM 0.24's LRU: one queue of the evictable keys, least recent first.

    A key enters at the most-recent end when it becomes evictable (its store completes,
    or its last reader leaves), leaves when it is pinned or evicted, and moves to the
    most-recent end on ``touch`` if it is evictable. ``touch`` walks its keys backwards,
    so the call's first key ends most recent. Lookup and ``prepare_store`` are not uses.
    """

    order: tuple[Key, ...] = ()

    def adapted(self, key: Key) -> LruOrder:
        return self

    def inserted(self, key: Key) -> LruOrder:
        return self  # a STORING block is not evictable, so it is not queued yet

    def evictable(self, keys: tuple[Key, ...]) -> LruOrder:
        return LruOrder(self.order + keys)

    def pinned(self, key: Key) -> LruOrder:
        return LruOrder(_without(self.order, key))

    def touched(self, keys: tuple[Key, ...], ready: frozenset[Key]) -> LruOrder:
        order = self.order
        for key in reversed(keys):
            if key in order:
                order = (*_without(order, key), key)
        return LruOrder(order)

    def removed(self, key: Key) -> LruOrder:
        return LruOrder(_without(self.order, key))

    def evicted(self, key: Key) -> LruOrder:
        return LruOrder(_without(self.order, key))

    def victim(self, candidates: AbstractSet[Key], key: Key) -> Key:
        found = _first_in(self.order, candidates)
        if found is None:
            raise InvariantViolation("lru_queues_evictable_blocks", "a candidate is not queued")
        return found

    def cleared(self) -> LruOrder:
        return LruOrder()


@dataclass(frozen=True)
class ArcLists:
    """Megiddo and Modha's ARC (FAST 2003), adapted to blocks that cannot always be
    evicted.

    ``t1`` holds live keys used once, ``t2`` live keys used again (each least recent
    first); ``b1`` / ``b2`` are ghosts of keys evicted from them; ``p`` is the target
    size of ``t1``. ``prepare_store`` treats each new key ``x`` of its call as one request
    of the paper, in call order (the transitions do this):

    1. *adapt* (``adapted``): ``x`` in ``b1`` raises ``p`` to
       ``min(c, p + max(1, |b2| // |b1|))``; ``x`` in ``b2`` lowers it to
       ``max(0, p - max(1, |b1| // |b2|))`` (the paper's deltas, rounded down);
    2. *REPLACE(x, p)* (``victim``), only when no slot is free for ``x``: the preferred
       list is ``t1`` when ``|t1| > p``, or when ``x`` is in ``b2`` and ``|t1| == p``;
       else ``t2``. The victim is the least recent *evictable* key of the preferred list
       (READY, no readers, not named in the call: the candidates the transition hands
       in). **Adaptation to blocks:** if the preferred list holds no evictable key, the
       victim is the least recent evictable key of the other list; so ARC rejects a store
       only when nothing at all is evictable (D3). ``|t1|`` counts every key of ``t1``,
       evictable or not. The victim's key moves to the most-recent end of ``b1`` (from
       ``t1``) or ``b2`` (from ``t2``) (``evicted``);
    3. *insert* (``inserted``): ``x`` found in ``b1`` or ``b2`` leaves the ghost and
       enters the most-recent end of ``t2``; any other ``x`` enters ``t1``. Then the
       ghosts are trimmed, oldest first: ``b1`` while ``|t1| + |b1| > c``, then ``b2``
       (``b1`` once ``b2`` is empty) while ``|t1| + |t2| + |b1| + |b2| > 2c``. This is
       the paper's case IV deletions, done after the insertion instead of before.

    With no block pinned or STORING, and a hit of the paper being a ``touch``, this is
    the paper's algorithm (which never has a free slot once warm; the spec's slots free
    up on failed stores and resets, and then no eviction is needed). The adaptation acts
    only when the preferred list's keys are all pinned, STORING or named in the call.
    Uses:
    ``touch`` of a READY key moves it to the most-recent end of ``t2``; a STORING key in
    ``t1`` stays in ``t1``, moved to its most-recent end. As under LRU, a block that
    becomes evictable (its store completes, its last reader leaves) moves to the
    most-recent end of the list that holds it, in call order. A failed store forgets its
    key (no ghost); a reset clears everything, ``p`` included.
    """

    capacity: int
    t1: tuple[Key, ...] = ()
    t2: tuple[Key, ...] = ()
    b1: tuple[Key, ...] = ()
    b2: tuple[Key, ...] = ()
    p: int = 0

    def _with(self, *, t1: tuple[Key, ...] | None = None, t2: tuple[Key, ...] | None = None,
              b1: tuple[Key, ...] | None = None, b2: tuple[Key, ...] | None = None,
              p: int | None = None) -> ArcLists:
        """These lists with the fields given (None: as they are), a new value: what
        ``dataclasses.replace`` returns, built as the constructor builds it (its
        ``__dict__`` set at once, as :func:`~kvoffload.spec.state.changed` builds a
        state); these lists themselves if every field given is the one they have."""
        if ((t1 is None or t1 is self.t1) and (t2 is None or t2 is self.t2)
                and (b1 is None or b1 is self.b1) and (b2 is None or b2 is self.b2)
                and (p is None or p == self.p)):
            return self
        new = object.__new__(ArcLists)
        new.__dict__.update(capacity=self.capacity, t1=self.t1 if t1 is None else t1,
                            t2=self.t2 if t2 is None else t2, b1=self.b1 if b1 is None else b1,
                            b2=self.b2 if b2 is None else b2, p=self.p if p is None else p)
        return new

    def adapted(self, key: Key) -> ArcLists:
        b1, b2 = len(self.b1), len(self.b2)
        if key in self.b1:
            return self._with(p=min(self.capacity, self.p + max(1, b2 // b1)))
        if key in self.b2:
            return self._with(p=max(0, self.p - max(1, b1 // b2)))
        return self

    def inserted(self, key: Key) -> ArcLists:
        if key in self.b1 or key in self.b2:
            arc = self._with(b1=_without(self.b1, key), b2=_without(self.b2, key),
                           t2=(*self.t2, key))
        else:
            arc = self._with(t1=(*self.t1, key))
        return arc._trimmed()

    def _trimmed(self) -> ArcLists:
        b1, b2 = self.b1, self.b2
        while b1 and len(self.t1) + len(b1) > self.capacity:
            b1 = b1[1:]
        while len(self.t1) + len(self.t2) + len(b1) + len(b2) > 2 * self.capacity:
            if b2:
                b2 = b2[1:]
            else:
                b1 = b1[1:]
        if b1 is self.b1 and b2 is self.b2:
            return self  # no ghost trimmed
        return self._with(b1=b1, b2=b2)

    def evictable(self, keys: tuple[Key, ...]) -> ArcLists:
        arc = self
        for key in keys:
            if key in arc.t1:
                arc = arc._with(t1=_moved_to_end(arc.t1, key))
            else:
                arc = arc._with(t2=_moved_to_end(arc.t2, key))
        return arc

    def pinned(self, key: Key) -> ArcLists:
        return self

    def touched(self, keys: tuple[Key, ...], ready: frozenset[Key]) -> ArcLists:
        arc = self
        for key in reversed(keys):
            if key in arc.t1 and key not in ready:
                arc = arc._with(t1=_moved_to_end(arc.t1, key))
            elif key in arc.t1 or key in arc.t2:
                arc = arc._with(t1=_without(arc.t1, key), t2=_moved_to_end(arc.t2, key))
        return arc

    def removed(self, key: Key) -> ArcLists:
        return self._with(t1=_without(self.t1, key), t2=_without(self.t2, key))

    def evicted(self, key: Key) -> ArcLists:
        if key in self.t1:
            return self._with(t1=_without(self.t1, key), b1=(*self.b1, key))
        return self._with(t2=_without(self.t2, key), b2=(*self.b2, key))

    def victim(self, candidates: AbstractSet[Key], key: Key) -> Key:
        """REPLACE(key, p): step 2 of the class docstring."""
        from_t1, from_t2 = _first_in(self.t1, candidates), _first_in(self.t2, candidates)
        t1_first = len(self.t1) > self.p or (key in self.b2 and len(self.t1) == self.p)
        preferred, other = (from_t1, from_t2) if t1_first else (from_t2, from_t1)
        found = preferred if preferred is not None else other
        if found is None:
            raise InvariantViolation("arc_lists_hold_live_blocks", "a candidate is in no list")
        return found

    def cleared(self) -> ArcLists:
        return ArcLists(self.capacity)
