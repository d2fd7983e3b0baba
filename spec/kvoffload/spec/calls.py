"""Operations as data: a :class:`Call` names one API call, :func:`apply` runs it.

Traces, counterexamples, scenario vectors and the model checker's edges are lists of
calls, so a report can print them and a reproducer can replay them.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import transitions as t
from .outputs import Completion, Events, LoadPlan, StorePlan, StoreRejected
from .state import CacheState
from .vocabulary import Key, LookupResult


class Op(enum.Enum):
    """The operations, by vLLM's names."""

    LOOKUP = "lookup"
    PREPARE_LOAD = "prepare_load"
    COMPLETE_LOAD = "complete_load"
    TOUCH = "touch"
    PREPARE_STORE = "prepare_store"
    COMPLETE_STORE = "complete_store"
    RESET_CACHE = "reset_cache"
    TAKE_EVENTS = "take_events"


COMPLETIONS = frozenset({Op.COMPLETE_LOAD, Op.COMPLETE_STORE})

Output = LookupResult | LoadPlan | Completion | StorePlan | StoreRejected | Events | int | None


@dataclass(frozen=True)
class Call:
    """One call. ``keys`` holds the single key of ``lookup`` too.

    For completions, ``epoch`` is what the manager is told (None: vLLM's form, no job
    identity) and ``origin`` is the epoch the completed job really started in, which
    the environment knows even when the manager is not told (None: the current one).
    """

    op: Op
    keys: tuple[Key, ...] = ()
    success: bool = True
    epoch: int | None = None
    origin: int | None = None

    @property
    def job_epoch(self) -> int | None:
        """The epoch of the job a completion finishes, as far as anyone knows."""
        return self.origin if self.origin is not None else self.epoch

    def __str__(self) -> str:
        args = [] if self.op is Op.RESET_CACHE or self.op is Op.TAKE_EVENTS else (
            [repr(self.keys[0])] if self.op is Op.LOOKUP else [repr(list(self.keys))])
        if self.op is Op.COMPLETE_STORE and not self.success:
            args.append("success=False")
        if self.epoch is not None:
            args.append(f"epoch={self.epoch}")
        text = f"{self.op.value}({', '.join(args)})"
        return text if self.origin is None else f"{text}  # job of epoch {self.origin}"


def apply(
    state: CacheState,
    call: Call,
    victims: Sequence[Key] | None = None,
    slots: Sequence[int] | None = None,
) -> tuple[CacheState, Output]:
    """Run ``call`` on ``state`` with the spec's transition of the same name.

    raises: MisuseError
    """
    op = call.op
    if op is Op.LOOKUP:
        return t.lookup(state, call.keys[0])
    if op is Op.PREPARE_LOAD:
        return t.prepare_load(state, call.keys)
    if op is Op.COMPLETE_LOAD:
        return t.complete_load(state, call.keys, call.epoch)
    if op is Op.TOUCH:
        return t.touch(state, call.keys)
    if op is Op.PREPARE_STORE:
        return t.prepare_store(state, call.keys, victims, slots)
    if op is Op.COMPLETE_STORE:
        return t.complete_store(state, call.keys, call.success, call.epoch)
    if op is Op.RESET_CACHE:
        return t.reset_cache(state)
    return t.take_events(state)


def send(api: Any, call: Call) -> Any:
    """Make ``call`` on ``api``, any object offering the native API's method names
    (``docs/native-api.md``): a manager, an adapter, a wrapper. Returns what it returns.

    The one place outside the spec's :func:`apply` that maps an :class:`Op` to a method;
    the epoch is passed by keyword (omitted in vLLM's form), the keys as a tuple.
    """
    op = call.op
    if op is Op.LOOKUP:
        return api.lookup(call.keys[0])
    if op is Op.PREPARE_LOAD:
        return api.prepare_load(call.keys)
    if op is Op.COMPLETE_LOAD:
        return api.complete_load(call.keys, epoch=call.epoch)
    if op is Op.TOUCH:
        return api.touch(call.keys)
    if op is Op.PREPARE_STORE:
        return api.prepare_store(call.keys)
    if op is Op.COMPLETE_STORE:
        return api.complete_store(call.keys, success=call.success, epoch=call.epoch)
    if op is Op.RESET_CACHE:
        return api.reset_cache()
    return api.take_events()


def replay(state: CacheState, calls: Sequence[Call]) -> tuple[CacheState, list[Output]]:
    """Apply ``calls`` in order; returns the final state and every output."""
    outputs: list[Output] = []
    for call in calls:
        state, output = apply(state, call)
        outputs.append(output)
    return state, outputs
