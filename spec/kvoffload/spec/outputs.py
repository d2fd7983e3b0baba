"""What each operation returns besides the new state: plain frozen values."""

from __future__ import annotations

from dataclasses import dataclass

from .vocabulary import Key, Ticket


@dataclass(frozen=True)
class StorePlan:
    """``prepare_store`` accepted: write ``keys`` into ``slots`` (pairwise); ``evicted`` made room.

    ``ticket`` names this plan's job (all its keys) for the ticket completion form; it is
    fresh, never issued before. ``epoch`` is the reset epoch the job starts in (D7).
    """

    keys: tuple[Key, ...]
    slots: tuple[int, ...]
    evicted: tuple[Key, ...]
    epoch: int
    ticket: Ticket


@dataclass(frozen=True)
class StoreRejected:
    """``prepare_store`` rejected the whole call: fewer than ``needed`` slots could be had."""

    needed: int
    available: int


@dataclass(frozen=True)
class LoadPlan:
    """``prepare_load`` pinned ``keys``: read them from ``slots`` (pairwise).

    ``ticket`` names this plan's job (all its keys), fresh as a store plan's (D7).
    """

    keys: tuple[Key, ...]
    slots: tuple[int, ...]
    epoch: int
    ticket: Ticket


@dataclass(frozen=True)
class Completion:
    """What a ``complete_store`` / ``complete_load`` did, key by key.

    ``applied``: live blocks whose running job it finished; ``released``: copies a
    reset left running that it finished (a store's slot is free again, a load's once its
    last job is done); ``ignored``: keys with no matching job, left as they were (a store
    completion for a key not STORING in vLLM's form; any completion whose ticket names no
    running job of the key in the ticket form, D5, D7).
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
