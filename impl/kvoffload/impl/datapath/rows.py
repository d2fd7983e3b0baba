"""A tensor of blocks seen as rows, with one view per row built once."""

from __future__ import annotations

import torch

from .errors import BadBlockIds
from .layout import as_rows, as_wide_rows


class Rows:
    """``blocks`` (``[n, *block_shape]``, contiguous) as ``[n, width]`` wide-integer rows.

    ``views[i]`` is row ``i``, built once: copying scattered rows picks views from
    this tuple instead of slicing the tensor once per block (a slice costs about a
    microsecond of Python; the copy of a 64 KiB block only a few).
    """

    __slots__ = ("blocks", "row_bytes", "tensor", "torch_device", "views", "wide")

    def __init__(self, blocks: torch.Tensor) -> None:
        self.blocks = blocks
        self.tensor = as_rows(blocks)
        self.views: tuple[torch.Tensor, ...] = tuple(self.tensor.unbind(0))
        self.wide = as_wide_rows(self.tensor)
        """The rows as 16-byte elements where they divide a row, for element-wise kernels
        (``index_copy_`` moves one element at a time: twice as fast as with 8 bytes)."""
        self.row_bytes: int = self.tensor.shape[1] * self.tensor.element_size()
        """Bytes in one row (one block)."""
        self.torch_device = self.tensor.device
        """Where the rows live (read once: each copy planned compares two of them)."""

    def __len__(self) -> int:
        return len(self.views)

    def check_ids(self, ids: tuple[int, ...], what: str) -> None:
        """Raise unless every id names a row of this tensor.

        raises: BadBlockIds
        """
        count = len(self.views)
        if not ids or ({type(i) for i in ids} == {int} and min(ids) >= 0 and max(ids) < count):
            return  # the common case, checked at C speed
        bad = [i for i in ids if type(i) is not int or not 0 <= i < count]
        raise BadBlockIds(f"{what} must be ints in 0 .. {count - 1}; got {bad!r}")
