"""Copy jobs as engines see them, and what they report when they end."""

from __future__ import annotations

from dataclasses import dataclass

from kvoffload.spec.vocabulary import CopyKind

from .copyplan import BlockCopy


@dataclass(frozen=True)
class JobResult:
    """A copy job ended: ``success``, or failure with the reason in ``error``.

    A failed job's destination holds undefined bytes (the engines overwrite part of
    it, as a copy that stopped midway would): a failed store must never be read.
    """

    job_id: int
    kind: CopyKind
    success: bool
    error: str | None = None


@dataclass(frozen=True)
class Job:
    """One submitted copy: a store (device blocks -> host slots) or a load (back).

    ``host_slots[i]`` pairs with ``device_blocks[i]``.
    """

    job_id: int
    kind: CopyKind
    host_slots: tuple[int, ...]
    device_blocks: tuple[int, ...]
    copy: BlockCopy

    @property
    def nbytes(self) -> int:
        return self.copy.nbytes
