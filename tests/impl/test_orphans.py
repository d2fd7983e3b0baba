"""Unit tests of ``kvoffload.impl.orphans``: copies a reset left running."""

from __future__ import annotations

from kvoffload.impl.orphans import Orphans, OrphanView


def test_oldest_copy_first_when_no_ticket_is_named() -> None:
    orphans = Orphans()
    orphans.add("a", 0, 5, [10])
    orphans.add("a", 2, 7, [11])
    assert orphans.has("a", None)
    assert orphans.has("a", 11)
    assert not orphans.has("a", 12)
    assert orphans.release("a", None) == (True, 5)
    assert orphans.view() == (OrphanView("a", 2, 7, (11,)),)
    assert orphans.release("a", 11) == (True, 7)
    assert not orphans


def test_a_load_copy_frees_its_slot_when_its_last_job_finishes() -> None:
    orphans = Orphans()
    orphans.add("a", 0, 3, [4, 6])
    assert orphans.slots() == {3}
    assert orphans.release("a", 6) == (True, None)
    assert orphans.view()[0].tickets == (4,)
    assert orphans.view()[0].due == 1
    assert orphans.release("a", None) == (True, 3)
    assert orphans.slots() == set()


def test_releasing_an_unknown_job_does_nothing() -> None:
    orphans = Orphans()
    orphans.add("a", 1, 3, [2])
    assert orphans.release("b", None) == (False, None)
    assert orphans.release("a", 9) == (False, None)
    assert orphans.view() == (OrphanView("a", 1, 3, (2,)),)
