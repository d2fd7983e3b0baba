"""The bounds: the call alphabet's key lists and the presets."""

from __future__ import annotations

from proofs.modelcheck.bounds import PRESETS, SMALL, TINY, Bounds


def test_sequences_with_duplicates() -> None:
    b = Bounds("t", capacity=1, keys=("a", "b"), resets=0, readers=1, width=2)
    assert b.sequences() == (("a",), ("b",), ("a", "a"), ("a", "b"), ("b", "a"), ("b", "b"))


def test_sequences_without_duplicates() -> None:
    b = Bounds("t", capacity=1, keys=("a", "b"), resets=0, readers=1, width=2,
               duplicates=False)
    assert b.sequences() == (("a",), ("b",), ("a", "b"), ("b", "a"))


def test_presets_are_named_and_growing() -> None:
    assert PRESETS == {"tiny": TINY, "small": SMALL}
    assert SMALL.capacity > TINY.capacity
    assert len(SMALL.keys) > len(TINY.keys)
    assert "capacity 2, 3 keys" in TINY.describe()
