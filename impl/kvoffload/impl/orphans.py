"""Copies a reset left running: their slots stay held until their completions arrive.

``reset_cache`` drops every block, but a store still writing a slot, or a load still
reading one, would be corrupted (or would corrupt a new block) if that slot were
handed out again. So each such copy is kept here, by key, with the epoch it started
in, its slot and the tickets of its jobs still running, oldest first (one for a store;
one per reader for a load). The last job to finish frees the slot.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvoffload.spec.vocabulary import Key, Ticket


class _Copy:
    """One running copy of one key (mutable: its jobs finish one by one)."""

    __slots__ = ("epoch", "slot", "tickets")

    def __init__(self, epoch: int, slot: int, tickets: list[Ticket]) -> None:
        self.epoch = epoch
        self.slot = slot
        self.tickets = tickets


@dataclass(frozen=True)
class OrphanView:
    """A running copy, as :meth:`Orphans.view` shows it."""

    key: Key
    epoch: int
    slot: int
    tickets: tuple[Ticket, ...]

    @property
    def due(self) -> int:
        """How many completions are still due."""
        return len(self.tickets)


class Orphans:
    """The copies of one kind (stores or loads) a reset left running, oldest first per key."""

    __slots__ = ("_by_key",)

    def __init__(self) -> None:
        self._by_key: dict[Key, list[_Copy]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_key)

    def add(self, key: Key, epoch: int, slot: int, tickets: list[Ticket]) -> None:
        """Record a copy; epochs only grow, so appending keeps each key's list oldest first."""
        self._by_key.setdefault(key, []).append(_Copy(epoch, slot, tickets))

    def has(self, key: Key, ticket: Ticket | None) -> bool:
        """Is a copy of ``key`` running job ``ticket`` (any job when it is None)?"""
        return self._find(key, ticket) is not None

    def release(self, key: Key, ticket: Ticket | None) -> tuple[bool, int | None]:
        """Job ``ticket`` of ``key``'s copy finished (None: the oldest copy's oldest job).

        Returns whether such a job was running, and the copy's slot when this was its
        last job (the slot is free again), else None.
        """
        found = self._find(key, ticket)
        if found is None:
            return False, None
        copies = self._by_key[key]
        copy = copies[found]
        if ticket is None:
            del copy.tickets[0]
        else:
            copy.tickets.remove(ticket)
        if copy.tickets:
            return True, None
        del copies[found]
        if not copies:
            del self._by_key[key]
        return True, copy.slot

    def clear(self) -> None:
        self._by_key.clear()

    def slots(self) -> set[int]:
        """The slots the running copies hold."""
        return {copy.slot for copies in self._by_key.values() for copy in copies}

    def view(self) -> tuple[OrphanView, ...]:
        return tuple(OrphanView(key, c.epoch, c.slot, tuple(c.tickets))
                     for key, copies in self._by_key.items() for c in copies)

    def _find(self, key: Key, ticket: Ticket | None) -> int | None:
        """The index of ``key``'s copy running job ``ticket`` (None: the oldest copy)."""
        copies = self._by_key.get(key)
        if not copies:
            return None
        if ticket is None:
            return 0
        return next((i for i, c in enumerate(copies) if ticket in c.tickets), None)
