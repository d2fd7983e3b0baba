"""Copies a reset left running: their slots stay held until their completions arrive.

``reset_cache`` drops every block, but a store still writing a slot, or a load still
reading one, would be corrupted (or would corrupt a new block) if that slot were
handed out again. So each such copy is kept here, by key, with the epoch it started
in, its slot and the number of completions still due (1 for a store; the number of
readers for a load). The last completion frees the slot.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvoffload.spec.vocabulary import Key


class _Copy:
    """One running copy of one key (mutable: its due count goes down)."""

    __slots__ = ("due", "epoch", "slot")

    def __init__(self, epoch: int, slot: int, due: int) -> None:
        self.epoch = epoch
        self.slot = slot
        self.due = due


@dataclass(frozen=True)
class OrphanView:
    """A running copy, as :meth:`Orphans.view` shows it."""

    key: Key
    epoch: int
    slot: int
    due: int


class Orphans:
    """The copies of one kind (stores or loads) a reset left running, oldest first per key."""

    __slots__ = ("_by_key",)

    def __init__(self) -> None:
        self._by_key: dict[Key, list[_Copy]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_key)

    def add(self, key: Key, epoch: int, slot: int, due: int) -> None:
        """Record a copy; epochs only grow, so appending keeps each key's list oldest first."""
        self._by_key.setdefault(key, []).append(_Copy(epoch, slot, due))

    def has(self, key: Key, epoch: int | None) -> bool:
        """Is a copy of ``key`` running: of ``epoch``, or of any epoch when it is None?"""
        return self._index(key, epoch) is not None

    def complete(self, key: Key, epoch: int | None) -> int | None:
        """One completion arrived for ``key`` (the oldest copy when ``epoch`` is None).

        Returns the copy's slot when this was its last completion (the slot is free
        again), else None. The caller has checked :meth:`has`.
        """
        index = self._index(key, epoch)
        if index is None:
            return None
        copies = self._by_key[key]
        copy = copies[index]
        copy.due -= 1
        if copy.due:
            return None
        del copies[index]
        if not copies:
            del self._by_key[key]
        return copy.slot

    def clear(self) -> None:
        self._by_key.clear()

    def slots(self) -> set[int]:
        """The slots the running copies hold."""
        return {copy.slot for copies in self._by_key.values() for copy in copies}

    def view(self) -> tuple[OrphanView, ...]:
        return tuple(OrphanView(key, c.epoch, c.slot, c.due)
                     for key, copies in self._by_key.items() for c in copies)

    def _index(self, key: Key, epoch: int | None) -> int | None:
        copies = self._by_key.get(key)
        if not copies:
            return None
        if epoch is None:
            return 0
        return next((i for i, c in enumerate(copies) if c.epoch == epoch), None)
