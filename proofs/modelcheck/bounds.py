"""The bounds that make the checked space finite, and the named presets.

The spec's state is unbounded in four ways (DESIGN.md point 11): keys come from an
unbounded universe, readers can pile up on a block, resets grow the epoch, and calls
can name any number of keys. The model checker bounds each; the subscriber view
(``announced``) is already a set of keys, so it is finite once the keys are.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product


@dataclass(frozen=True)
class Bounds:
    """One bound on every unbounded dimension of the spec and its environment."""

    name: str
    capacity: int
    """Slots in the tier."""
    keys: tuple[str, ...]
    """The key universe; keys are interchangeable (symmetry), so only their number matters."""
    resets: int
    """At most this many ``reset_cache`` calls: epochs run ``0 .. resets``."""
    readers: int
    """``prepare_load`` is not issued for a block that already has this many readers."""
    width: int
    """At most this many keys in one call (stores, loads, touches, completions)."""
    duplicates: bool = True
    """Calls may name a key twice (what the ``unique-keys`` assumption rules out)."""

    def describe(self) -> str:
        dup = ", duplicates" if self.duplicates else ""
        return (f"capacity {self.capacity}, {len(self.keys)} keys, {self.resets} reset(s), "
                f"{self.readers} reader(s), {self.width} key(s)/call{dup}")

    def sequences(self) -> tuple[tuple[str, ...], ...]:
        """Every key list a call may carry, shortest first, each in sorted key order."""
        seqs: list[tuple[str, ...]] = []
        for n in range(1, self.width + 1):
            for seq in product(self.keys, repeat=n):
                if self.duplicates or len(set(seq)) == n:
                    seqs.append(seq)
        return tuple(seqs)


TINY = Bounds("tiny", capacity=2, keys=("a", "b", "c"), resets=1, readers=1, width=2)
"""For CI: every row at this bound runs in the default test tier."""

SMALL = Bounds("small", capacity=3, keys=("a", "b", "c", "d"), resets=2, readers=2, width=2)
"""For a longer run, recorded in proofs/README.md with its time."""

PRESETS: dict[str, Bounds] = {b.name: b for b in (TINY, SMALL)}
