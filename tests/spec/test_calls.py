"""Calls as data: a malformed Call is a typed error; job_ticket; the printed form."""

from __future__ import annotations

from typing import Any

import pytest

from kvoffload.spec import Call, MalformedCall, MisuseError, Op


@pytest.mark.parametrize(("kwargs", "rule"), [
    ({"op": Op.LOOKUP, "keys": ()}, "lookup takes exactly one key"),
    ({"op": Op.LOOKUP, "keys": ("a", "b")}, "lookup takes exactly one key"),
    ({"op": Op.RESET_CACHE, "keys": ("a",)}, "reset_cache takes no keys"),
    ({"op": Op.TAKE_EVENTS, "keys": ("a",)}, "take_events takes no keys"),
    ({"op": Op.COMPLETE_LOAD, "keys": ("a",), "success": False}, "only complete_store"),
    ({"op": Op.PREPARE_STORE, "keys": ("a",), "ticket": 1}, "only completions"),
    ({"op": Op.TOUCH, "keys": ("a",), "job": 1}, "only completions"),
    ({"op": Op.TOUCH, "keys": ["a"]}, "keys must be a tuple"),
    ({"op": "lookup", "keys": ("a",)}, "op must be an Op"),
    ({"op": Op.COMPLETE_STORE, "keys": ("a",), "success": 0}, "success must be a bool"),
])
def test_malformed_calls_raise_a_typed_error(kwargs: dict[str, Any], rule: str) -> None:
    with pytest.raises(MalformedCall, match=rule) as caught:
        Call(**kwargs)
    assert caught.value.code == "malformed-call"
    assert isinstance(caught.value, MisuseError)


def test_job_ticket_is_the_real_job_else_what_the_manager_is_told() -> None:
    assert Call(Op.COMPLETE_STORE, ("a",)).job_ticket is None
    assert Call(Op.COMPLETE_STORE, ("a",), ticket=3).job_ticket == 3
    assert Call(Op.COMPLETE_STORE, ("a",), job=1).job_ticket == 1
    assert Call(Op.COMPLETE_LOAD, ("a",), ticket=3, job=1).job_ticket == 1


@pytest.mark.parametrize(("call", "text"), [
    (Call(Op.LOOKUP, ("a",)), "lookup('a')"),
    (Call(Op.RESET_CACHE), "reset_cache()"),
    (Call(Op.COMPLETE_STORE, ("a",), success=False, ticket=2),
     "complete_store(['a'], success=False, ticket=2)"),
    (Call(Op.COMPLETE_LOAD, ("a",), job=1), "complete_load(['a'])  # job 1"),
    (Call(Op.COMPLETE_LOAD, ("a",), ticket=1, job=1), "complete_load(['a'], ticket=1)"),
])
def test_calls_print_as_the_api_call(call: Call, text: str) -> None:
    assert str(call) == text
