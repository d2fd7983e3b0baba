"""The interface between the manager's lifecycle and an eviction order (LRU, ARC).

The manager decides *who may* be evicted (READY, no readers, not named in the call);
an eviction order decides *who is*, and keeps its own recency bookkeeping. The
manager tells it which keys changed in a way the order cares about: a key that
becomes evictable or is pinned through the order's :attr:`~EvictionOrder.evictable`
mapping (one dict operation per key, no method call: these are the hot paths), the
rest with one method call per API call (never one per block). The verbs follow the
spec's recency vocabulary (``kvoffload.spec.recency``); the code does not. Each
order's rules live in its own module (:mod:`.lru`, :mod:`.arc`); the manager has no
branch for either.

Both orders keep the evictable keys in insertion-ordered dicts of their own, so
choosing a victim never walks past a pinned or in-flight block: only past keys named
in the current call, which that call's own length bounds.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Protocol

from kvoffload.spec.vocabulary import Key

if TYPE_CHECKING:  # only for the annotation of view(); arc imports nothing from here
    from .arc import ArcView


class EvictionOrder(Protocol):
    """What the manager asks of an eviction policy."""

    @property
    def evictable(self) -> MutableMapping[Key, None]:
        """The evictable keys. The manager sets a key (to None) when it becomes
        evictable (store completed, or last reader left) and deletes it when it gets
        its first reader; the order decides where in its order that puts the key.
        Stays the same object for the order's life (the manager holds on to it)."""

    def stored(self, keys: Sequence[Key], free: int, protected: Collection[Key]
               ) -> Sequence[Key]:
        """``prepare_store`` accepted these new (distinct) keys with ``free`` slots free:
        update the order for each in call order and remove and return the victims that
        make room for the rest, none in ``protected``. The manager has checked that
        enough exist."""

    def removed(self, keys: Sequence[Key]) -> None:
        """These STORING keys failed their store: forget them, leave no ghost."""

    def touched(self, keys: Sequence[Key], ready: Collection[Key]) -> None:
        """The scheduler marked these keys as used, in call order (a key may repeat: its
        first occurrence counts)."""

    def evict(self, count: int, protected: Collection[Key]) -> Sequence[Key]:
        """Remove and return ``count`` evictable keys not in ``protected``, in order.

        The manager has checked beforehand that enough such keys exist.
        """

    def cleared(self) -> None:
        """Forget everything (reset)."""

    def evictable_keys(self) -> Collection[Key]:
        """The keys it holds as evictable (for self-checks and views)."""

    def view(self) -> tuple[Key, ...] | ArcView:
        """A snapshot of the order (for tests and reports)."""

    def check(self, live: Mapping[Key, object], evictable: Collection[Key]) -> None:
        """Raise ``InvariantViolation`` unless the order agrees with the lifecycle."""
