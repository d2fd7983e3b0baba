"""The interface between the manager's lifecycle and an eviction order (LRU, ARC).

The manager decides *who may* be evicted (READY, no readers, not named in the call);
an eviction order decides *who is*, and keeps its own recency bookkeeping. The
manager tells it, one call per API call (never one per block, to keep the per-block
cost down), which keys changed in a way the order cares about. The verbs follow the
spec's recency vocabulary (``kvoffload.spec.recency``); the code does not.
``OffloadManager`` holds its order as an :class:`EvictionOrder`; for LRU its hot paths
also update the queue of :class:`~.lru.LruEviction` in place (no method call per key).

Both orders keep the evictable keys in insertion-ordered dicts of their own, so
choosing a victim never walks past a pinned or in-flight block: only past keys named
in the current call, which that call's own length bounds.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from kvoffload.spec.vocabulary import Key

if TYPE_CHECKING:  # only for the annotation of view(); arc imports nothing from here
    from .arc import ArcView


class EvictionOrder(Protocol):
    """What the manager asks of an eviction policy."""

    def stored(self, keys: Sequence[Key], free: int, protected: Container[Key]) -> list[Key]:
        """``prepare_store`` accepted these new (distinct) keys with ``free`` slots free:
        update the order for each in call order and return the victims that make room
        for the rest, none in ``protected``. The manager has checked that enough exist."""

    def evictable(self, keys: Iterable[Key]) -> None:
        """These keys became evictable (store completed, or last reader left), in order."""

    def pinned(self, keys: Iterable[Key]) -> None:
        """These evictable keys got their first reader."""

    def removed(self, keys: Iterable[Key]) -> None:
        """These STORING keys failed their store: forget them, leave no ghost."""

    def touched(self, keys: Sequence[Key], ready: Container[Key]) -> None:
        """The scheduler marked these (distinct) keys as used, in call order."""

    def evict(self, count: int, protected: Container[Key]) -> list[Key]:
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
