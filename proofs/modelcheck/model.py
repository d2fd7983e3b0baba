"""Which transitions are checked: the spec's, or the spec's with some operations replaced.

A :class:`Model` runs a :class:`~kvoffload.spec.Call` through the spec's own dispatcher
(:func:`kvoffload.spec.apply`), except for the operations a mutant (:mod:`.mutants`)
replaces; the spec itself is never edited. Every transition takes the whole call, so a
replacement sees exactly what the spec's transition would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kvoffload.spec import CacheState, Call, Op, Output, apply

Slots = Sequence[int] | None
"""The free slots a ``prepare_store`` hands out (None: the lowest free ones)."""

Transition = Callable[[CacheState, Call, Slots], tuple[CacheState, Output]]
"""``(state, call, slots) -> (new state, output)``; raises a MisuseError like the spec."""


def spec_transition(state: CacheState, call: Call, slots: Slots = None
                    ) -> tuple[CacheState, Output]:
    """The spec's transition for ``call``, with ``slots`` as the free-slot choice."""
    return apply(state, call, slots=slots)


@dataclass(frozen=True)
class Model:
    """The transitions one check explores: the spec's, but for ``replaced`` operations."""

    name: str
    about: str
    replaced: Mapping[Op, Transition] = field(default_factory=dict)

    def apply(self, state: CacheState, call: Call, slots: Slots = None
              ) -> tuple[CacheState, Output]:
        """Run ``call``: the replacement for its operation if there is one, else the spec.

        raises: MisuseError
        """
        replacement = self.replaced.get(call.op) if self.replaced else None
        if replacement is None:  # the spec's (no dictionary look-up for the spec itself)
            return apply(state, call, None, slots)
        return replacement(state, call, slots)

    def __hash__(self) -> int:
        return hash((self.name, tuple(self.replaced)))


SPEC = Model(name="spec", about="the spec's transitions, unchanged")
