"""``send``: the one dispatcher from a Call to the native API's method of the same name."""

from __future__ import annotations

from typing import Any

import pytest

from kvoffload.spec import API_OPS, ENVIRONMENT_OPS, FAULTS, Call, MalformedCall, Op, send


class Recorder:
    """Answers every native method with its own name and arguments."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: (name, args, kwargs)


@pytest.mark.parametrize(("call", "expected"), [
    (Call(Op.LOOKUP, ("a",)), ("lookup", ("a",), {})),
    (Call(Op.PREPARE_LOAD, ("a", "b")), ("prepare_load", (("a", "b"),), {})),
    (Call(Op.COMPLETE_LOAD, ("a",), ticket=2), ("complete_load", (("a",),), {"ticket": 2})),
    (Call(Op.COMPLETE_LOAD, ("a",), job=2), ("complete_load", (("a",),), {"ticket": None})),
    (Call(Op.TOUCH, ("a",)), ("touch", (("a",),), {})),
    (Call(Op.PREPARE_STORE, ("a",)), ("prepare_store", (("a",),), {})),
    (Call(Op.COMPLETE_STORE, ("a",), success=False),
     ("complete_store", (("a",),), {"success": False, "ticket": None})),
    (Call(Op.COMPLETE_STORE, ("a",), ticket=7, job=3),
     ("complete_store", (("a",),), {"success": True, "ticket": 7})),
    (Call(Op.RESET_CACHE), ("reset_cache", (), {})),
    (Call(Op.TAKE_EVENTS), ("take_events", (), {})),
])
def test_send_names_the_method_of_the_op(call: Call, expected: tuple[Any, ...]) -> None:
    assert send(Recorder(), call) == expected


def test_every_op_is_dispatched() -> None:
    seen = {send(Recorder(), Call(op, () if op in (Op.RESET_CACHE, Op.TAKE_EVENTS) else ("k",)))[0]
            for op in API_OPS}
    assert seen == {op.value for op in API_OPS}


def test_an_environment_transition_is_never_sent() -> None:
    """Background eviction is the tier's own doing (D14): no API method is called for it."""
    recorder = Recorder()
    for op in ENVIRONMENT_OPS - FAULTS:
        with pytest.raises(MalformedCall, match="environment"):
            send(recorder, Call(op, ("k",)))
    assert {Op.EVICT_IN_BACKGROUND, Op.FAIL_NODE} == ENVIRONMENT_OPS
    assert set(Op) == API_OPS | ENVIRONMENT_OPS


def test_a_fault_is_made_on_the_targets_fault_hook() -> None:
    """A node's failure is injected by a test (D15): send makes it on ``fail_node()``, a
    hook of the target's adapter, never on a method of the manager's API."""
    assert {Op.FAIL_NODE} == FAULTS
    assert send(Recorder(), Call(Op.FAIL_NODE)) == ("fail_node", (), {})
