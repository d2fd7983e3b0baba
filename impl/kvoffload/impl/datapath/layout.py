"""The shape of one KV block and the flat row views the copies work on.

A block holds every layer's keys and values for ``block_size`` tokens:
``[layers, 2, block_size, kv_heads, head_dim]`` elements of one dtype, stored
contiguously. A tensor of blocks (the host pool, or the device KV cache the tier
copies from and to) is ``[num_blocks, *block_shape]``, one block per row.

Copies never look inside a block, so they see each tensor as ``[num_blocks, width]``
rows of the widest integer type that divides the block's bytes: torch's indexing
kernels move one element at a time, and eight bytes per element run several times
faster than one (measured, ``DESIGN.md`` "The torch data path").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .errors import LayoutMismatch

_WIDE_TYPES = (torch.int64, torch.int32, torch.int16, torch.uint8)


@dataclass(frozen=True)
class BlockLayout:
    """The shape and dtype of one KV block.

    raises: LayoutMismatch
    """

    layers: int
    block_size: int
    kv_heads: int
    head_dim: int
    dtype: torch.dtype = torch.float16

    def __post_init__(self) -> None:
        sizes = (self.layers, self.block_size, self.kv_heads, self.head_dim)
        if any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in sizes):
            raise LayoutMismatch(f"every dimension of a block must be a positive int; got {self}")

    @property
    def shape(self) -> tuple[int, int, int, int, int]:
        """``(layers, 2, block_size, kv_heads, head_dim)``: 2 for keys and values."""
        return (self.layers, 2, self.block_size, self.kv_heads, self.head_dim)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes in one block."""
        return self.numel * _itemsize(self.dtype)

    def check(self, blocks: torch.Tensor, what: str) -> None:
        """Raise unless ``blocks`` is a contiguous ``[n, *shape]`` tensor of this dtype.

        raises: LayoutMismatch
        """
        if blocks.dim() != 6 or tuple(blocks.shape[1:]) != self.shape:
            raise LayoutMismatch(
                f"{what} must be shaped [num_blocks, *{self.shape}]; got {tuple(blocks.shape)}")
        if blocks.dtype != self.dtype:
            raise LayoutMismatch(f"{what} must hold {self.dtype}; got {blocks.dtype}")
        if not blocks.is_contiguous():
            raise LayoutMismatch(f"{what} must be contiguous, so that each block is one run "
                                 "of bytes a copy can move whole")


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def row_dtype(nbytes: int) -> torch.dtype:
    """The widest integer type whose size divides a block of ``nbytes`` bytes."""
    for dtype in _WIDE_TYPES:
        if nbytes % _itemsize(dtype) == 0:
            return dtype
    return torch.uint8


def as_rows(blocks: torch.Tensor) -> torch.Tensor:
    """``blocks`` (contiguous, ``[n, ...]``) as ``[n, width]`` rows of a wide integer type.

    A view: writing the rows writes the blocks. Any dtype works, since the rows are
    reinterpreted bytes.
    """
    count = blocks.shape[0]
    nbytes = (blocks.numel() // count if count else 1) * blocks.element_size()
    return blocks.reshape(count, -1).view(torch.uint8).view(row_dtype(nbytes))


def layout_of(blocks: torch.Tensor) -> BlockLayout:
    """The layout of a ``[n, layers, 2, block_size, kv_heads, head_dim]`` tensor of blocks.

    raises: LayoutMismatch
    """
    if blocks.dim() != 6 or blocks.shape[2] != 2:
        raise LayoutMismatch("a tensor of KV blocks is shaped [num_blocks, layers, 2, "
                             f"block_size, kv_heads, head_dim]; got {tuple(blocks.shape)}")
    _, layers, _, block_size, kv_heads, head_dim = blocks.shape
    return BlockLayout(layers, block_size, kv_heads, head_dim, blocks.dtype)


def as_wide_rows(rows: torch.Tensor) -> torch.Tensor:
    """``rows`` (from :func:`as_rows`) as 16-byte elements where the row size allows.

    Only the bytes matter: the copies that use this view move elements unchanged,
    whatever they would mean as complex numbers.
    """
    if rows.dtype == torch.int64 and rows.shape[1] % 2 == 0:
        return rows.view(torch.complex128)
    return rows
