"""What each operation returns besides the new state: plain frozen values."""

from __future__ import annotations

from dataclasses import dataclass

from .vocabulary import Key


@dataclass(frozen=True)
class StorePlan:
    """``prepare_store`` accepted: write ``keys`` into ``slots`` (pairwise); ``evicted`` made room.

    ``epoch`` identifies the jobs of this plan for the reset-safe completion form.
    """

    keys: tuple[Key, ...]
    slots: tuple[int, ...]
    evicted: tuple[Key, ...]
    epoch: int


@dataclass(frozen=True)
class StoreRejected:
    """``prepare_store`` rejected the whole call: fewer than ``needed`` slots could be had."""

    needed: int
    available: int


@dataclass(frozen=True)
class LoadPlan:
    """``prepare_load`` pinned ``keys``: read them from ``slots`` (pairwise)."""

    keys: tuple[Key, ...]
    slots: tuple[int, ...]
    epoch: int


@dataclass(frozen=True)
class Completion:
    """What a ``complete_store`` / ``complete_load`` did, key by key.

    ``applied``: live blocks of the current epoch it finished; ``released``: copies a
    reset left running, whose slots are now free again; ``ignored``: keys with no
    matching store (stores only: a completion for a key that is not STORING is ignored).
    """

    applied: tuple[Key, ...] = ()
    released: tuple[Key, ...] = ()
    ignored: tuple[Key, ...] = ()


@dataclass(frozen=True)
class Events:
    """What ``take_events`` delivers: keys that became READY, and keys no longer READY,
    since the last call. Replayed from the start they give exactly the READY set."""

    stored: frozenset[Key] = frozenset()
    removed: frozenset[Key] = frozenset()
