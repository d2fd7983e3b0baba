"""Bounded exploration of the spec: every state a small tier reaches, every step from it.

The lifecycle diagram and the operation x phase table are projections of these steps,
so both follow whatever the spec's transitions do. The alphabet is every operation
with one-key arguments (the phase picture is per key, and a key's fate does not depend
on how many other keys share its call), every completion form (vLLM's ``epoch=None``,
the current epoch, an earlier one, one that has not begun) and both store outcomes;
resets and readers per block are bounded so the space is finite.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from kvoffload.spec import (
    COMPLETIONS,
    CacheState,
    Call,
    MisuseError,
    Op,
    Output,
    Policy,
    apply,
    check_invariants,
    initial_state,
)


@dataclass(frozen=True)
class Bounds:
    """How far the exploration goes."""

    capacity: int = 2
    keys: tuple[str, ...] = ("a", "b")
    resets: int = 1
    """``reset_cache`` is offered only while fewer than this many resets happened."""
    readers: int = 2
    """``prepare_load`` is offered only while the key has fewer readers than this."""
    policy: Policy = Policy.LRU

    def describe(self) -> str:
        return (f"{self.policy.name}, capacity {self.capacity}, keys {', '.join(self.keys)}, "
                f"at most {self.resets} reset(s), at most {self.readers} readers per block")


@dataclass(frozen=True)
class Step:
    """One call from one reachable state: what it returned or the misuse error it raised.

    A rejected call changes nothing, so ``after`` is ``before`` when ``error`` is set.
    """

    before: CacheState
    call: Call
    after: CacheState
    output: Output
    error: MisuseError | None


def calls_from(state: CacheState, bounds: Bounds) -> Iterator[Call]:
    """The alphabet offered in ``state``: one-key calls of every operation and form."""
    epochs: tuple[int | None, ...] = (None, *range(state.epoch + 2))
    for key in bounds.keys:
        keys = (key,)
        yield Call(Op.LOOKUP, keys)
        block = state.table.get(key)
        if block is None or block.readers < bounds.readers:
            yield Call(Op.PREPARE_LOAD, keys)
        yield Call(Op.TOUCH, keys)
        yield Call(Op.PREPARE_STORE, keys)
        for epoch in epochs:
            yield Call(Op.COMPLETE_LOAD, keys, epoch=epoch)
            for success in (True, False):
                yield Call(Op.COMPLETE_STORE, keys, success=success, epoch=epoch)
    if state.epoch < bounds.resets:
        yield Call(Op.RESET_CACHE)
    yield Call(Op.TAKE_EVENTS)


def take_step(state: CacheState, call: Call) -> Step:
    """Apply ``call`` to ``state`` with the spec; a misuse error is an outcome, not a crash."""
    try:
        after, output = apply(state, call)
    except MisuseError as error:
        return Step(state, call, state, None, error)
    return Step(state, call, after, output, None)


def explore(bounds: Bounds) -> tuple[list[CacheState], list[Step]]:
    """Breadth-first search from the empty tier, in a deterministic order.

    Returns the reachable states (the initial one first) and every step taken from them.
    Each new state is checked against the spec's invariants when first reached.
    """
    start = initial_state(bounds.capacity, bounds.policy)
    seen = {start}
    order = [start]
    queue = deque(order)
    steps: list[Step] = []
    while queue:
        state = queue.popleft()
        for call in calls_from(state, bounds):
            step = take_step(state, call)
            steps.append(step)
            if step.after not in seen:
                check_invariants(step.after)
                seen.add(step.after)
                order.append(step.after)
                queue.append(step.after)
    return order, steps


def epoch_form(step: Step) -> str:
    """How a completion names its job, relative to the state it arrives in."""
    epoch = step.call.epoch
    if step.call.op not in COMPLETIONS or epoch is None:
        return ""
    if epoch == step.before.epoch:
        return "current"
    return "earlier" if epoch < step.before.epoch else "later"
