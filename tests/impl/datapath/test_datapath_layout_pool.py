"""Block layouts, wide row views and the host pool."""

from __future__ import annotations

import pytest
import torch

from kvoffload.impl.datapath import BlockLayout, HostBlockPool, LayoutMismatch, layout_of
from kvoffload.impl.datapath.layout import as_rows, row_dtype
from kvoffload.spec.errors import BadCapacity


def test_layout_shape_and_bytes() -> None:
    layout = BlockLayout(layers=3, block_size=16, kv_heads=4, head_dim=64, dtype=torch.bfloat16)
    assert layout.shape == (3, 2, 16, 4, 64)
    assert layout.nbytes == 3 * 2 * 16 * 4 * 64 * 2


@pytest.mark.parametrize("bad", [0, -1, True, 2.0])
def test_layout_rejects_bad_dimensions(bad: object) -> None:
    with pytest.raises(LayoutMismatch):
        BlockLayout(layers=bad, block_size=1, kv_heads=1, head_dim=1)  # type: ignore[arg-type]  # the wrong type is the test


@pytest.mark.parametrize(("nbytes", "dtype"), [(8, torch.int64), (24, torch.int64),
                                               (12, torch.int32), (6, torch.int16),
                                               (3, torch.uint8)])
def test_rows_use_the_widest_type_dividing_a_block(nbytes: int, dtype: object) -> None:
    assert row_dtype(nbytes) == dtype


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int8,
                                   torch.bool, torch.complex64, torch.float8_e4m3fn])
def test_rows_are_a_view_of_the_same_bytes(dtype: torch.dtype) -> None:
    blocks = torch.zeros((5, 1, 2, 3, 1, 3), dtype=dtype)
    rows = as_rows(blocks)
    assert rows.shape[0] == 5
    assert rows.data_ptr() == blocks.data_ptr()
    assert rows.shape[1] * rows.element_size() == blocks[0].numel() * blocks.element_size()
    rows[2].fill_(-1)  # all bits set in every byte of block 2, nothing else
    as_bytes = blocks.reshape(5, -1).view(torch.uint8)
    assert bool((as_bytes[2] == 255).all())
    assert int(as_bytes[[0, 1, 3, 4]].sum()) == 0


def test_pool_holds_num_blocks_rows_of_the_layout() -> None:
    layout = BlockLayout(2, 4, 2, 8, torch.float16)
    pool = HostBlockPool(7, layout)
    assert pool.blocks.shape == (7, *layout.shape)
    assert pool.blocks.dtype == torch.float16
    assert pool.num_blocks == 7
    assert len(pool.rows) == 7
    pool.rows.views[3].fill_(0)
    pool.block(3).fill_(1.5)
    assert bool((pool.rows.tensor[3] != 0).all())  # block 3 and row 3 are the same bytes


def test_pool_is_pinned_exactly_when_cuda_is_present() -> None:
    pool = HostBlockPool(2, BlockLayout(1, 1, 1, 8))
    assert pool.pinned == torch.cuda.is_available()


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU-only torch refuses pinning")
def test_cpu_only_torch_refuses_a_pinned_pool() -> None:
    with pytest.raises(RuntimeError):
        HostBlockPool(2, BlockLayout(1, 1, 1, 8), pin=True)


@pytest.mark.parametrize("bad", [0, -3, True, 1.0])
def test_pool_needs_a_positive_int_number_of_blocks(bad: object) -> None:
    with pytest.raises(BadCapacity):
        HostBlockPool(bad, BlockLayout(1, 1, 1, 8))  # type: ignore[arg-type]  # the wrong type is the test


def test_layout_check_names_what_is_wrong() -> None:
    layout = BlockLayout(2, 4, 2, 8, torch.float16)
    layout.check(torch.zeros((3, *layout.shape), dtype=torch.float16), "x")
    with pytest.raises(LayoutMismatch, match="shaped"):
        layout.check(torch.zeros((3, 2, 2, 4, 2, 9), dtype=torch.float16), "x")
    with pytest.raises(LayoutMismatch, match="hold"):
        layout.check(torch.zeros((3, *layout.shape), dtype=torch.float32), "x")
    with pytest.raises(LayoutMismatch, match="contiguous"):
        layout.check(torch.zeros((3, 2, 2, 4, 2, 16), dtype=torch.float16)[..., ::2], "x")


def test_layout_of_reads_a_tensor_of_blocks() -> None:
    assert layout_of(torch.zeros((5, 3, 2, 4, 2, 8), dtype=torch.bfloat16)) == BlockLayout(
        3, 4, 2, 8, torch.bfloat16)
    with pytest.raises(LayoutMismatch):
        layout_of(torch.zeros((5, 3, 3, 4, 2, 8)))
