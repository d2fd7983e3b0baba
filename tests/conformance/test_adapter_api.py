"""Unit tests of ``kvoffload.conformance.adapter_api``: the rules every adapter shares."""

from __future__ import annotations

import pytest

from kvoffload.conformance.adapter_api import Capabilities, read_int
from kvoffload.conformance.errors import Untranslatable
from kvoffload.spec import NotReadable, UnmatchedCompleteLoad


def test_a_typed_api_must_reject_with_the_specs_code() -> None:
    typed = Capabilities()
    assert typed.rejects_with(NotReadable("x", keys=("a",)), NotReadable.code)
    assert not typed.rejects_with(UnmatchedCompleteLoad("x", keys=("a",)), NotReadable.code)
    assert not typed.rejects_with(AssertionError("x"), NotReadable.code)


def test_an_untyped_api_may_reject_with_any_error() -> None:
    untyped = Capabilities(typed_misuse=False)
    assert untyped.rejects_with(AssertionError("x"), NotReadable.code)
    assert untyped.rejects_with(UnmatchedCompleteLoad("x", keys=("a",)), NotReadable.code)


@pytest.mark.parametrize("value", [1.0, True, "1", None])
def test_read_int_takes_only_an_int(value: object) -> None:
    with pytest.raises(Untranslatable):
        read_int(value, "slots", "a slot")
    assert read_int(3, "slots", "a slot") == 3
