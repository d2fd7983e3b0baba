"""Which blocks running copies read and write, so that no two copies race on one block.

A store reads device blocks and writes host slots; a load reads host slots and
writes device blocks. A new job may not write a block that a running job reads or
writes, nor read one that a running job writes. The manager is what keeps slots
apart (DESIGN.md point 7: a reset holds a running copy's slot until its completion);
this guard is the engine's own check that it did, so a bookkeeping bug becomes an
error before the copy starts instead of silently corrupted bytes.
"""

from __future__ import annotations

from kvoffload.spec.vocabulary import CopyKind

from .errors import BusyBlock


class _Space:
    """Readers and writers of the blocks of one tensor (host pool or device cache)."""

    __slots__ = ("name", "readers", "writers")

    def __init__(self, name: str) -> None:
        self.name = name
        self.readers: dict[int, int] = {}
        """Block -> number of running copies reading it."""
        self.writers: dict[int, int] = {}
        """Block -> the job writing it."""

    def conflicts(self, reads: tuple[int, ...], writes: tuple[int, ...]) -> list[int]:
        writers, readers = self.writers, self.readers
        busy = [b for b in writes if b in writers or b in readers]
        return busy + [b for b in reads if b in writers]

    def add(self, job_id: int, reads: tuple[int, ...], writes: tuple[int, ...]) -> None:
        readers = self.readers
        for block in reads:
            readers[block] = readers.get(block, 0) + 1
        self.writers.update(dict.fromkeys(writes, job_id))

    def remove(self, reads: tuple[int, ...], writes: tuple[int, ...]) -> None:
        readers = self.readers
        for block in reads:
            left = readers[block] - 1
            if left:
                readers[block] = left
            else:
                del readers[block]
        writers = self.writers
        for block in writes:
            writers.pop(block, None)


class BlockGuard:
    """The blocks of the running copies of one engine (not thread-safe: lock around it)."""

    __slots__ = ("_device", "_host")

    def __init__(self) -> None:
        self._host = _Space("host slots")
        self._device = _Space("device blocks")

    def check(self, kind: CopyKind, host_slots: tuple[int, ...],
              device_blocks: tuple[int, ...]) -> None:
        """Raise if a copy of ``kind`` over these blocks would race a running copy.

        raises: BusyBlock
        """
        self.check_device(kind, device_blocks)
        busy = self._host.conflicts(*_host_access(kind, host_slots))
        if busy:
            raise BusyBlock(f"a {kind.value} may not touch host slots a running copy writes, "
                            f"nor write ones it reads; busy: {sorted(set(busy))}")

    def check_device(self, kind: CopyKind, device_blocks: tuple[int, ...]) -> None:
        """Raise if a copy of ``kind`` would race a running copy on these device blocks.

        raises: BusyBlock
        """
        reads, writes = (device_blocks, ()) if kind is CopyKind.STORE else ((), device_blocks)
        busy = self._device.conflicts(reads, writes)
        if busy:
            raise BusyBlock(f"a {kind.value} may not touch device blocks a running copy "
                            f"writes, nor write ones it reads; busy: {sorted(set(busy))}")

    def acquire(self, job_id: int, kind: CopyKind, host_slots: tuple[int, ...],
                device_blocks: tuple[int, ...]) -> None:
        """Record a starting copy, after :meth:`check` passed."""
        if kind is CopyKind.STORE:
            self._device.add(job_id, device_blocks, ())
            self._host.add(job_id, (), host_slots)
        else:
            self._host.add(job_id, host_slots, ())
            self._device.add(job_id, (), device_blocks)

    def release(self, kind: CopyKind, host_slots: tuple[int, ...],
                device_blocks: tuple[int, ...]) -> None:
        """Forget a copy that has ended (its bytes no longer move)."""
        if kind is CopyKind.STORE:
            self._device.remove(device_blocks, ())
            self._host.remove((), host_slots)
        else:
            self._host.remove(host_slots, ())
            self._device.remove((), device_blocks)

    def busy(self) -> bool:
        return bool(self._host.readers or self._host.writers or self._device.readers
                    or self._device.writers)


def _host_access(kind: CopyKind,
                 host_slots: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(reads, writes) of a copy on the host pool."""
    return ((), host_slots) if kind is CopyKind.STORE else (host_slots, ())
