"""The host block pool: the offloaded tier's memory, one block per slot.

One tensor of ``num_blocks`` rows, each a whole KV block (:class:`BlockLayout`). Slot
``s`` of the manager is row ``s`` here. The pool is pinned (page-locked) when CUDA is
present, so device copies from and to it run asynchronously at full speed; CPU-only
torch refuses ``pin_memory=True``, so there it is ordinary memory.
"""

from __future__ import annotations

import torch

from kvoffload.spec.errors import BadCapacity

from .layout import BlockLayout
from .rows import Rows


class HostBlockPool:
    """``num_blocks`` KV blocks in host memory.

    ``pin``: ``None`` (default) pins exactly when CUDA is available; ``True`` demands
    pinned memory (and fails without CUDA, as torch does); ``False`` never pins.

    raises: BadCapacity
    """

    __slots__ = ("_blocks", "_layout", "_rows")

    def __init__(self, num_blocks: int, layout: BlockLayout, *, pin: bool | None = None) -> None:
        if isinstance(num_blocks, bool) or not isinstance(num_blocks, int) or num_blocks < 1:
            raise BadCapacity(f"a pool needs an int number of blocks, at least one; "
                              f"got num_blocks={num_blocks!r}")
        pinned = torch.cuda.is_available() if pin is None else pin
        self._layout = layout
        self._blocks = torch.empty((num_blocks, *layout.shape), dtype=layout.dtype,
                                   pin_memory=pinned)
        self._rows = Rows(self._blocks)

    @property
    def layout(self) -> BlockLayout:
        return self._layout

    @property
    def num_blocks(self) -> int:
        return self._blocks.shape[0]

    @property
    def pinned(self) -> bool:
        return self._blocks.is_pinned()

    @property
    def blocks(self) -> torch.Tensor:
        """The whole pool, ``[num_blocks, *layout.shape]``."""
        return self._blocks

    @property
    def rows(self) -> Rows:
        """The pool as wide-integer rows, with one view per row (what copies work on)."""
        return self._rows

    def block(self, slot: int) -> torch.Tensor:
        """Slot ``slot`` as one KV block (a view)."""
        return self._blocks[slot]
