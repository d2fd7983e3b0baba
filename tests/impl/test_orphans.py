"""Unit tests of ``kvoffload.impl.orphans``: copies a reset left running."""

from __future__ import annotations

from kvoffload.impl.orphans import Orphans, OrphanView


def test_oldest_copy_first_when_no_epoch_is_named() -> None:
    orphans = Orphans()
    orphans.add("a", 0, 5, 1)
    orphans.add("a", 2, 7, 1)
    assert orphans.has("a", None)
    assert orphans.has("a", 2)
    assert not orphans.has("a", 1)
    assert orphans.complete("a", None) == 5
    assert orphans.view() == (OrphanView("a", 2, 7, 1),)
    assert orphans.complete("a", 2) == 7
    assert not orphans


def test_a_load_copy_frees_its_slot_at_its_last_completion() -> None:
    orphans = Orphans()
    orphans.add("a", 0, 3, 2)
    assert orphans.slots() == {3}
    assert orphans.complete("a", 0) is None
    assert orphans.complete("a", None) == 3
    assert orphans.slots() == set()


def test_completing_an_unknown_copy_does_nothing() -> None:
    orphans = Orphans()
    orphans.add("a", 1, 3, 1)
    assert orphans.complete("b", None) is None
    assert orphans.complete("a", 0) is None
    assert orphans.view() == (OrphanView("a", 1, 3, 1),)
