"""Megiddo and Modha's ARC, written from the paper for the tests (FAST 2003, Fig. 4).

Independent of ``kvoffload.spec.recency`` and ``kvoffload.impl.arc``: one request at a
time, the paper's four cases in the paper's order (the case IV deletions before
REPLACE), on plain lists. ``p`` is the spec's integer target by default (each
adaptation step rounded down, ``docs/spec.md`` D10); ``fractional=True`` keeps the
paper's exact steps (``Fraction``), the published rule.
"""

from __future__ import annotations

import random
from collections.abc import Hashable
from dataclasses import dataclass, field
from fractions import Fraction

Key = Hashable


@dataclass
class PaperArc:
    """ARC(c): ``t1``, ``t2`` cached, ``b1``, ``b2`` ghosts, each least recent first."""

    c: int
    fractional: bool = False
    t1: list[Key] = field(default_factory=list)
    t2: list[Key] = field(default_factory=list)
    b1: list[Key] = field(default_factory=list)
    b2: list[Key] = field(default_factory=list)
    p: Fraction = Fraction(0)

    def _delta(self, mine: int, other: int) -> Fraction:
        """The paper's step: 1 if ``|mine| >= |other|``, else ``|other| / |mine|``."""
        if mine >= other:
            return Fraction(1)
        step = Fraction(other, mine)
        return step if self.fractional else Fraction(other // mine)

    def _replace(self, x: Key) -> Key:
        """REPLACE(x, p): the victim leaves the cache and becomes a ghost."""
        if self.t1 and (len(self.t1) > self.p or (x in self.b2 and len(self.t1) == self.p)):
            victim = self.t1.pop(0)
            self.b1.append(victim)
        else:
            victim = self.t2.pop(0)
            self.b2.append(victim)
        return victim

    def request(self, x: Key) -> tuple[bool, Key | None]:
        """Serve one request: (was it a hit, the key that left the cache if any)."""
        if x in self.t1 or x in self.t2:  # case I: a hit
            (self.t1 if x in self.t1 else self.t2).remove(x)
            self.t2.append(x)
            return True, None
        if x in self.b1:  # case II
            self.p = min(Fraction(self.c), self.p + self._delta(len(self.b1), len(self.b2)))
            victim = self._replace(x)
            self.b1.remove(x)
            self.t2.append(x)
            return False, victim
        if x in self.b2:  # case III
            self.p = max(Fraction(0), self.p - self._delta(len(self.b2), len(self.b1)))
            victim = self._replace(x)
            self.b2.remove(x)
            self.t2.append(x)
            return False, victim
        dropped: Key | None = None  # case IV
        l1, l2 = len(self.t1) + len(self.b1), len(self.t2) + len(self.b2)
        if l1 == self.c:
            if len(self.t1) < self.c:
                self.b1.pop(0)
                dropped = self._replace(x)
            else:  # B1 is empty: the LRU page of T1 leaves the cache without a ghost
                dropped = self.t1.pop(0)
        elif l1 + l2 >= self.c:
            if l1 + l2 == 2 * self.c:
                self.b2.pop(0)
            dropped = self._replace(x)
        self.t1.append(x)
        return False, dropped

    def lists(self) -> tuple[tuple[Key, ...], ...]:
        return tuple(self.t1), tuple(self.t2), tuple(self.b1), tuple(self.b2)


SHORTEST_DIFFERENCE = (0, 0, 1, 1, 2, 2, 3, 3, 4, 5, 4, 6, 7, 8, 9, 5, 6, 0)
"""The shortest request sequence on which integer and fractional p part ways: capacity 5,
found by the exhaustive search of ``tests/spec/test_arc_paper.py``. On its last request
the integer p evicts key 8, the fractional p key 4."""


def random_traces(count: int, seed: int) -> list[tuple[int, list[int]]]:
    """``(capacity, requests)``: capacities 1 to 8, universes of c+1 to 3c keys, a skew
    so that hits, ghost hits in b1 and b2, and cold misses all occur."""
    rng = random.Random(seed)
    traces = []
    for _ in range(count):
        c = rng.randint(1, 8)
        universe = rng.randint(c + 1, 3 * c)
        weights = [1.0 / (1 + k) ** rng.choice((0.0, 0.5, 1.0)) for k in range(universe)]
        traces.append((c, rng.choices(range(universe), weights, k=rng.randint(20, 80))))
    return traces
