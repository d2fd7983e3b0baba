"""One short call sequence, run on the spec and on the reference manager.

``crosshair diffbehavior`` explores ``ops`` symbolically and looks for a list on which
:func:`spec_outputs` and :func:`manager_outputs` differ. Each int decodes into one call
on a two-slot LRU tier over keys 0, 1, 2 (``decode``); outputs are rendered without
slot numbers, which the spec leaves free (D12: the suite compares them up to renaming).
:func:`buggy_manager_outputs` runs a manager whose lookup answers MISS for a block
being written (the bug vLLM PR #41795 fixed): the check must tell it apart.
"""

from __future__ import annotations

from kvoffload.impl import OffloadManager
from kvoffload.spec import (
    Call,
    Completion,
    Events,
    LoadPlan,
    LookupResult,
    MisuseError,
    Op,
    Output,
    StorePlan,
    apply,
    initial_state,
)
from proofs.modelcheck.refinement import call_manager

CAPACITY = 2
MAX_CALLS = 6
_OPS = (Op.LOOKUP, Op.PREPARE_STORE, Op.COMPLETE_STORE, Op.PREPARE_LOAD,
        Op.COMPLETE_LOAD, Op.TOUCH, Op.RESET_CACHE, Op.TAKE_EVENTS)


def _digit(value: int, base: int) -> int:
    """``value % base`` as a plain int, found by comparison so that CrossHair forks a
    path per digit instead of letting a symbolic int into the spec and the manager."""
    digit = value % base
    return next((d for d in range(base) if digit == d), 0)


def decode(code: int) -> Call:
    """Call number ``code``: operation, key and store outcome from its digits.

    A symbolic key flowing into the manager's dicts once made CrossHair report a
    difference that no concrete replay reproduced; the digits are therefore plain ints.
    """
    code = abs(code)
    op, key = _OPS[_digit(code, 8)], _digit(code // 8, 3)
    success = _digit(code // 24, 2) == 0
    if op in (Op.RESET_CACHE, Op.TAKE_EVENTS):
        return Call(op)
    if op is not Op.COMPLETE_STORE:  # only complete_store takes success= (MalformedCall)
        return Call(op, (key,))
    return Call(op, (key,), success=success)


def render(output: Output) -> str:
    """An output without slot numbers."""
    if isinstance(output, StorePlan):
        return f"store {output.keys} evict {output.evicted}"
    if isinstance(output, LoadPlan):
        return f"load {output.keys}"
    if isinstance(output, Completion):
        return f"done {output.applied} {output.released} {output.ignored}"
    if isinstance(output, Events):
        return f"events {sorted(map(repr, output.stored))} {sorted(map(repr, output.removed))}"
    return repr(output)


def spec_outputs(ops: list[int]) -> list[str]:
    """The spec's outputs for the first ``MAX_CALLS`` calls of ``ops``."""
    state, shown = initial_state(CAPACITY), []
    for code in ops[:MAX_CALLS]:
        try:
            state, output = apply(state, decode(code))
            shown.append(render(output))
        except MisuseError as error:
            shown.append(error.code)
    return shown


def _run(manager: OffloadManager, ops: list[int]) -> list[str]:
    shown = []
    for code in ops[:MAX_CALLS]:
        try:
            shown.append(render(call_manager(manager, decode(code))))
        except MisuseError as error:
            shown.append(error.code)
    return shown


def manager_outputs(ops: list[int]) -> list[str]:
    """The reference manager's outputs for the same calls."""
    return _run(OffloadManager(CAPACITY), ops)


class _MissWhileStoring(OffloadManager):
    def lookup(self, key: object) -> LookupResult:
        found = super().lookup(key)
        return LookupResult.MISS if found is LookupResult.PENDING else found


def buggy_manager_outputs(ops: list[int]) -> list[str]:
    """A manager with the pre-PR-#41795 lookup: the check must find the difference."""
    return _run(_MissWhileStoring(CAPACITY), ops)
