"""How the blocks of one copy job move: planned once at submit, run by a backend.

A job copies rows ``src_ids`` of one tensor of blocks to rows ``dst_ids`` of another.
The plan sorts the pairs by destination and merges pairs that are consecutive on
both sides into runs, then picks one of four ways to move them, each one torch call
so that a worker thread hands the whole job to torch (which releases the GIL) instead
of looping in Python (measured on this kind of machine, ``DESIGN.md``):

* ``slice``: one run: a single ``copy_`` of a contiguous range;
* ``gather``: the destination is one contiguous range and the sources are scattered:
  ``index_select`` straight into it (0.96-1.0 of a large copy);
* ``scatter``: the sources are one contiguous range and the destinations are
  scattered: ``index_copy_`` from it, over 16-byte elements (``index_copy_`` moves
  one element at a time, so the widest element type halves its work);
* ``each``: anything else: one ``copy_`` per run, issued by ``torch._foreach_copy_``
  where both sides are on one device (a C++ loop over views built once), else by a
  Python loop of non-blocking copies (host <-> CUDA, where each is an async memcpy,
  or a torch without ``_foreach_copy_``).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from itertools import pairwise
from operator import itemgetter

import torch

from .errors import BadBlockIds
from .rows import Rows

_NO_INDEX = torch.empty(0, dtype=torch.int64)

_FOREACH_COPY = getattr(torch, "_foreach_copy_", None)
"""A private torch function (present in 2.13): where a torch lacks it, ``each`` copies
run as a Python loop of ``copy_``, slower for many small blocks but the same bytes."""

POISON = -0x2152411021524111
"""What an unfinished or failed copy leaves in the bytes it should have written
(``0xDEADBEEFDEADBEEF`` in each 8 bytes, truncated for narrower rows)."""


class Way(enum.Enum):
    """How a planned copy moves its rows."""

    SLICE = "slice"
    GATHER = "gather"
    SCATTER = "scatter"
    EACH = "each"


def check_pairs(src: Rows, src_ids: Sequence[int], dst: Rows, dst_ids: Sequence[int]) -> None:
    """Raise unless the ids pair up, lie inside their tensors, and no destination repeats.

    raises: BadBlockIds
    """
    if len(src_ids) != len(dst_ids):
        raise BadBlockIds(f"a copy pairs sources with destinations one to one; got "
                          f"{len(src_ids)} sources and {len(dst_ids)} destinations")
    src.check_ids(tuple(src_ids), "source blocks")
    dst.check_ids(tuple(dst_ids), "destination blocks")
    if len(set(dst_ids)) != len(dst_ids):
        raise BadBlockIds(f"a copy may write each destination block once; got {list(dst_ids)}")


def runs(src_ids: Sequence[int], dst_ids: Sequence[int]) -> list[tuple[int, int, int]]:
    """``(src_start, dst_start, length)`` runs, by destination, merged where both sides
    are consecutive."""
    count = len(dst_ids)
    if count and _is_range(src_ids) and _is_range(dst_ids):
        return [(src_ids[0], dst_ids[0], count)]  # the common case, checked at C speed
    pairs = list(zip(src_ids, dst_ids, strict=True))
    if any(pairs[i][1] > pairs[i + 1][1] for i in range(len(pairs) - 1)):
        pairs.sort(key=itemgetter(1))
    merged: list[tuple[int, int, int]] = []
    for s, d in pairs:
        if merged:
            s0, d0, n = merged[-1]
            if s == s0 + n and d == d0 + n:
                merged[-1] = (s0, d0, n + 1)
                continue
        merged.append((s, d, 1))
    return merged


class BlockCopy:
    """A planned copy of rows ``src_ids`` of ``src`` to rows ``dst_ids`` of ``dst``.

    The caller has checked the ids (:func:`check_pairs`).
    """

    __slots__ = ("_dst_list", "_index", "_runs", "_src_list", "dst", "nbytes", "src", "way")

    def __init__(self, src: Rows, src_ids: Sequence[int], dst: Rows,
                 dst_ids: Sequence[int]) -> None:
        self.src, self.dst = src, dst
        self.nbytes = len(dst_ids) * dst.row_bytes
        self._runs = runs(src_ids, dst_ids)
        self._index = _NO_INDEX
        self._src_list: list[torch.Tensor] = []
        self._dst_list: list[torch.Tensor] = []
        same_device = src.tensor.device == dst.tensor.device
        if len(self._runs) <= 1:
            self.way = Way.SLICE
        elif same_device and _one_range(self._runs, 1):
            self.way = Way.GATHER
            self._index = _index([s for s, _, _ in self._runs], self._runs, src.tensor.device)
        elif same_device and _one_range(sorted(self._runs), 0):
            self.way = Way.SCATTER
            self._runs.sort()
            self._index = _index([d for _, d, _ in self._runs], self._runs, dst.tensor.device)
        else:
            self.way = Way.EACH
            self._src_list = [_rows(src, s, n) for s, _, n in self._runs]
            self._dst_list = [_rows(dst, d, n) for _, d, n in self._runs]

    @property
    def blocks(self) -> int:
        return sum(n for _, _, n in self._runs)

    def run(self, non_blocking: bool = False) -> None:
        """Move the bytes (on the calling thread; torch releases the GIL meanwhile)."""
        if self.way is Way.SLICE:
            for s, d, n in self._runs:
                self.dst.tensor[d:d + n].copy_(self.src.tensor[s:s + n], non_blocking=non_blocking)
        elif self.way is Way.GATHER:
            d, n = self._runs[0][1], self.blocks
            torch.index_select(self.src.tensor, 0, self._index, out=self.dst.tensor[d:d + n])
        elif self.way is Way.SCATTER:
            s, n = self._runs[0][0], self.blocks
            self.dst.wide.index_copy_(0, self._index, self.src.wide[s:s + n])
        elif self.src.tensor.device == self.dst.tensor.device and _FOREACH_COPY is not None:
            _FOREACH_COPY(self._dst_list, self._src_list, non_blocking=non_blocking)
        else:
            for target, source in zip(self._dst_list, self._src_list, strict=True):
                target.copy_(source, non_blocking=non_blocking)

    def poison(self, torn: bool = False) -> None:
        """Overwrite the destination as a copy that never finished would leave it.

        ``torn``: only the second half of each block (a copy that stopped midway);
        otherwise all of it. The pattern matches no block the tests store.
        """
        poison = _poison_for(self.dst.tensor.dtype)
        for _, d, n in self._runs:
            target = self.dst.tensor[d:d + n]
            if torn:
                target = target[:, target.shape[1] // 2:]
            target.fill_(poison)


def _is_range(ids: Sequence[int]) -> bool:
    """Are ``ids`` consecutive and increasing?"""
    first = ids[0]
    return ids[-1] - first == len(ids) - 1 and list(ids) == list(range(first, first + len(ids)))


def _one_range(merged: list[tuple[int, int, int]], side: int) -> bool:
    """Do the runs, sorted by ``side`` (0: source, 1: destination), cover one contiguous
    range on that side? (Destinations never repeat; sources may, and then do not.)"""
    return all(a[side] + a[2] == b[side] for a, b in pairwise(merged))


def _index(starts: list[int], merged: list[tuple[int, int, int]],
           device: torch.device) -> torch.Tensor:
    """The rows the runs name on one side, one by one, as an index tensor."""
    rows = [start + k for start, (_, _, n) in zip(starts, merged, strict=True) for k in range(n)]
    return torch.tensor(rows, dtype=torch.int64, device=device)


def _rows(rows: Rows, start: int, count: int) -> torch.Tensor:
    return rows.views[start] if count == 1 else rows.tensor[start:start + count]


def _poison_for(dtype: torch.dtype) -> int:
    bits = torch.iinfo(dtype).bits
    value = POISON & ((1 << bits) - 1)
    return value - (1 << bits) if dtype.is_signed and value >= 1 << (bits - 1) else value
