"""The interface between the manager's lifecycle and an eviction order (LRU, ARC).

The manager decides *who may* be evicted (READY, no readers, not named in the call);
an eviction order decides *who is*, and keeps its own recency bookkeeping. The
manager tells it, one call per API call (never one per block, to keep the per-block
cost down), which keys changed in a way the order cares about. The verbs follow the
spec's recency vocabulary (``kvoffload.spec.recency``); the code does not.

Both orders keep the evictable keys in insertion-ordered dicts of their own, so
choosing a victim never walks past a pinned or in-flight block: only past keys named
in the current call, which that call's own length bounds.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Iterable, Sequence
from typing import Protocol

from kvoffload.spec.vocabulary import Key


class EvictionOrder(Protocol):
    """What the manager asks of an eviction policy."""

    def adapted(self, keys: Sequence[Key]) -> None:
        """``prepare_store`` accepted these new keys (before its evictions)."""

    def inserted(self, keys: Sequence[Key]) -> None:
        """``prepare_store`` gave these new keys slots (after its evictions): STORING."""

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
