"""Unit tests of ``kvoffload.impl.records``: quick constructors for the spec's records."""

from __future__ import annotations

from dataclasses import dataclass

from kvoffload.impl.records import completion, events, load_plan, quick_constructor, store_plan
from kvoffload.spec import Completion, Events, LoadPlan, StorePlan


def test_quick_records_are_the_specs_records() -> None:
    pairs = [(store_plan(("a",), (0,), ("b",), 2, 5), StorePlan(("a",), (0,), ("b",), 2, 5)),
             (load_plan(("a",), (0,), 1, 6), LoadPlan(("a",), (0,), 1, 6)),
             (completion(("a",), (), ("z",)), Completion(applied=("a",), ignored=("z",))),
             (events(frozenset("a"), frozenset()), Events(stored=frozenset("a")))]
    for quick, normal in pairs:
        assert type(quick) is type(normal)
        assert quick == normal
        assert hash(quick) == hash(normal)
        assert repr(quick) == repr(normal)


def test_records_that_cannot_be_built_quickly_fall_back_to_the_class() -> None:
    @dataclass(frozen=True, slots=True)
    class Slotted:
        x: int

    @dataclass(frozen=True)
    class Checked:
        x: int

        def __post_init__(self) -> None:
            if self.x < 0:
                raise ValueError("negative")

    assert quick_constructor(Slotted) is Slotted
    assert quick_constructor(Checked) is Checked
