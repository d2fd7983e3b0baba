"""How the blocks of one copy job move: planned once at submit, run by a backend.

A job copies rows ``src_ids`` of one tensor of blocks to rows ``dst_ids`` of another.
The plan picks one of four ways to move them, each one torch call so that a worker
thread hands the whole job to torch (which releases the GIL) instead of looping in
Python (measured on this kind of machine, ``docs/datapath.md``):

* ``slice``: one run (one block, or both sides consecutive): a single ``copy_`` of a
  contiguous range;
* ``gather``: the destination is one contiguous range and the sources are scattered:
  ``index_select`` straight into it (one row copy per block);
* ``scatter``: the sources are one contiguous range and the destinations are
  scattered: ``index_copy_`` from it, over 16-byte elements (``index_copy_`` moves
  one element at a time, so the widest element type halves its work);
* ``each``: anything else: one ``copy_`` per run of pairs consecutive on both sides,
  issued by ``torch._foreach_copy_`` where both sides are on one device (a C++ loop
  over views built once), else by a Python loop of non-blocking copies (host <-> CUDA,
  where each is an async memcpy, or a torch without ``_foreach_copy_``).

Planning runs on the submitting thread for every job, so it is kept to a few C-speed
steps: the common shapes (consecutive ids on one side or both, in order) are
recognised without sorting or merging pairs, index tensors are built from an
``array`` buffer (``torch.tensor`` on a list of ints costs about three times as
much), and the views of single rows come from :attr:`Rows.views`. Pairs whose
destinations, or sources, cover one range in another order are sorted by destination
and merged into runs (:func:`runs`) before the way is picked; for ``each``, pairs are
merged where they continue one another in the order given.
"""

from __future__ import annotations

import enum
from array import array
from collections.abc import Sequence
from itertools import compress, pairwise, repeat
from operator import add, floordiv, itemgetter, mod, mul, ne, sub

import torch

from .errors import BadBlockIds
from .rows import Rows

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
    are consecutive. Ids are not negative (:func:`check_pairs`)."""
    if not dst_ids:
        return []
    if _is_range(src_ids) and _is_range(dst_ids):
        return [(src_ids[0], dst_ids[0], len(dst_ids))]  # the common case, at C speed
    src, dst, starts = _by_destination(src_ids, dst_ids)
    return [(src[a], dst[a], b - a) for a, b in pairwise([*starts, len(dst)])]


def _by_destination(src_ids: Sequence[int], dst_ids: Sequence[int]
                    ) -> tuple[list[int], list[int], list[int]]:
    """The pairs sorted by destination, as sources and destinations, and the positions
    where a run starts (:func:`_run_starts`)."""
    big = max(src_ids) + 2
    keys = sorted(_pair_keys(src_ids, dst_ids, big))
    src = list(map(mod, keys, repeat(big)))
    dst = list(map(floordiv, keys, repeat(big)))
    return src, dst, _run_starts(keys, big)


def _pair_keys(src_ids: Sequence[int], dst_ids: Sequence[int], big: int) -> list[int]:
    """Each pair as one int, ``dst * big + src``, with ``big`` at least two above every
    source, so that sorting and comparing pairs run on ints at C speed (a loop over
    tuples costs several times as much for a big job)."""
    return list(map(add, map(mul, dst_ids, repeat(big)), src_ids))


def _run_starts(keys: list[int], big: int) -> list[int]:
    """The positions in ``keys`` (:func:`_pair_keys`) where a run starts: where the
    pair before is not one row before on both sides.

    Two keys differ by ``big + 1`` exactly when the second pair continues the first:
    any other destination step (destinations never repeat) would need a source step of
    ``1 - big`` or less, or ``big + 1`` or more, and no two sources are that far apart.
    """
    steps = map(sub, keys[1:], keys)
    return [0, *compress(range(1, len(keys)), map(ne, steps, repeat(big + 1)))]


class BlockCopy:
    """A planned copy of rows ``src_ids`` of ``src`` to rows ``dst_ids`` of ``dst``.

    The caller has checked the ids (:func:`check_pairs`).
    """

    __slots__ = ("_dst_ids", "_index", "_source", "_sources", "_target", "_targets", "blocks",
                 "dst", "nbytes", "src", "way")

    def __init__(self, src: Rows, src_ids: Sequence[int], dst: Rows,
                 dst_ids: Sequence[int]) -> None:
        self.src, self.dst = src, dst
        count = self.blocks = len(dst_ids)
        self.nbytes = count * dst.row_bytes
        self._dst_ids = tuple(dst_ids)  # for poison; the caller's list may change later
        self._target = self._source = self._index = _NO_INDEX  # SLICE of nothing: a no-op
        self._targets: Sequence[torch.Tensor] = ()
        self._sources: Sequence[torch.Tensor] = ()
        self.way = Way.SLICE
        if count == 1:
            self._target, self._source = dst.views[dst_ids[0]], src.views[src_ids[0]]
            return
        if not count:
            return
        same_device = src.torch_device == dst.torch_device
        src_range, dst_range = _is_range(src_ids), _is_range(dst_ids)
        if src_range and dst_range:
            self._slice(src_ids[0], dst_ids[0], count)
        elif same_device and dst_range:
            self._gather(src_ids, dst_ids[0], count)
        elif same_device and src_range:
            self._scatter(src_ids[0], dst_ids, count)
        else:
            self._plan_any_order(src_ids, dst_ids, same_device)

    def _slice(self, s: int, d: int, n: int) -> None:
        self.way = Way.SLICE
        self._target, self._source = self.dst.tensor[d:d + n], self.src.tensor[s:s + n]

    def _gather(self, src_ids: Sequence[int], d: int, n: int) -> None:
        """Rows ``src_ids`` (in destination order) into rows ``d .. d + n - 1``."""
        self.way = Way.GATHER
        self._index = _index(src_ids, self.src.torch_device)
        self._target = self.dst.tensor[d:d + n]

    def _scatter(self, s: int, dst_ids: Sequence[int], n: int) -> None:
        """Rows ``s .. s + n - 1`` into rows ``dst_ids`` (in source order)."""
        self.way = Way.SCATTER
        self._index = _index(dst_ids, self.dst.torch_device)
        self._source = self.src.wide[s:s + n]

    def _plan_any_order(self, src_ids: Sequence[int], dst_ids: Sequence[int],
                        same_device: bool) -> None:
        """The way for two or more pairs in no simple order.

        Where the destinations, or the sources (once each), cover one range, the pairs
        are sorted and moved by one slice (one run), one gather or one scatter.
        Otherwise each run is copied on its own, merging the pairs that continue one
        another in the order given: sorting random pairs to find runs listed apart
        cost about as much planning as the copy calls it could save.
        """
        count = self.blocks
        highest_src = max(src_ids)
        one_dst_range = max(dst_ids) - min(dst_ids) == count - 1  # destinations never repeat
        if one_dst_range or (highest_src - min(src_ids) == count - 1
                             and len(set(src_ids)) == count):
            src, dst, starts = _by_destination(src_ids, dst_ids)
            if len(starts) == 1:
                self._slice(src[0], dst[0], count)
            elif same_device and one_dst_range:
                self._gather(src, dst[0], count)
            elif same_device:
                by_source, _, _ = _by_destination(dst, src)  # sorted by source: destinations
                self._scatter(min(src), by_source, count)
            else:
                self._each(src, dst, starts)
            return
        self._each(src_ids, dst_ids, _run_starts(_pair_keys(src_ids, dst_ids, highest_src + 2),
                                                 highest_src + 2))

    def _each(self, src_ids: Sequence[int], dst_ids: Sequence[int], starts: list[int]) -> None:
        """One copy per run (runs start at ``starts``)."""
        self.way = Way.EACH
        count = self.blocks
        if len(starts) == count:  # nothing merged: one view per row, at C speed
            self._sources = _pick(self.src.views, src_ids)
            self._targets = _pick(self.dst.views, dst_ids)
        else:
            bounds = list(pairwise([*starts, count]))
            self._sources = [_rows(self.src, src_ids[a], b - a) for a, b in bounds]
            self._targets = [_rows(self.dst, dst_ids[a], b - a) for a, b in bounds]

    @property
    def copies(self) -> int:
        """How many torch copies :meth:`run` issues (one per run for ``each``)."""
        if self.way is Way.EACH:
            return len(self._targets)
        return 1 if self.blocks else 0

    def run(self, non_blocking: bool = False) -> None:
        """Move the bytes (on the calling thread; torch releases the GIL meanwhile)."""
        way = self.way
        if way is Way.SLICE:
            self._target.copy_(self._source, non_blocking=non_blocking)
        elif way is Way.GATHER:
            torch.index_select(self.src.tensor, 0, self._index, out=self._target)
        elif way is Way.SCATTER:
            self.dst.wide.index_copy_(0, self._index, self._source)
        elif self.src.torch_device == self.dst.torch_device and _FOREACH_COPY is not None:
            if self._targets:
                _FOREACH_COPY(self._targets, self._sources, non_blocking=non_blocking)
        else:
            for target, source in zip(self._targets, self._sources, strict=True):
                target.copy_(source, non_blocking=non_blocking)

    def poison(self, torn: bool = False) -> None:
        """Overwrite the destination as a copy that never finished would leave it.

        ``torn``: only the second half of each block (a copy that stopped midway);
        otherwise all of it. The pattern matches no block the tests store.
        """
        poison = _poison_for(self.dst.tensor.dtype)
        for _, d, n in runs(self._dst_ids, self._dst_ids):  # its ranges, in order
            target = self.dst.tensor[d:d + n]
            if torn:
                target = target[:, target.shape[1] // 2:]
            target.fill_(poison)


_NO_INDEX = torch.empty(0, dtype=torch.int64)


def _is_range(ids: Sequence[int]) -> bool:
    """Are ``ids`` (at least one) consecutive and increasing?"""
    first = ids[0]
    return ids[-1] - first == len(ids) - 1 and list(ids) == list(range(first, first + len(ids)))


def _index(ids: Sequence[int], device: torch.device) -> torch.Tensor:
    """``ids`` as an int64 index tensor on ``device``.

    Built on an ``array`` (a buffer the tensor keeps alive): a third of the cost of
    ``torch.tensor`` on a list of ints.
    """
    index = torch.frombuffer(array("q", ids), dtype=torch.int64)
    return index if device.type == "cpu" else index.to(device)


def _pick(views: tuple[torch.Tensor, ...], ids: Sequence[int]) -> Sequence[torch.Tensor]:
    """``views[i]`` for each id (two or more), at C speed."""
    picked: tuple[torch.Tensor, ...] = itemgetter(*ids)(views)
    return picked


def _rows(rows: Rows, start: int, count: int) -> torch.Tensor:
    return rows.views[start] if count == 1 else rows.tensor[start:start + count]


def _poison_for(dtype: torch.dtype) -> int:
    bits = torch.iinfo(dtype).bits
    value = POISON & ((1 << bits) - 1)
    return value - (1 << bits) if dtype.is_signed and value >= 1 << (bits - 1) else value
