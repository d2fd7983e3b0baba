"""What the spec does to one key: a bounded exploration, projected per key.

The lifecycle diagram and the operation x phase table are projections of these steps,
so both follow whatever the spec's transitions do. The exploration (:func:`explore`)
offers every operation with one-key arguments (the phase picture is per key, and a
key's fate does not depend on how many other keys share its call), every completion
form (vLLM's ``ticket=None``; the ticket of a job running on the key's live block, of
one a reset left running, of no running job) and both store outcomes; resets and readers
per block are bounded, and states equal up to a renaming of tickets are one (the spec
compares tickets only for equality), so the space is finite. It runs on the model
checker's search engine (``proofs/modelcheck/explorer.py``).

A key's phase (:class:`KeyPhase`) refines the spec's :class:`~kvoffload.spec.Phase` by
readers (a READY block being read cannot be evicted, an idle one can). A reset can leave
a key's copy running (a spec ``Orphan``); such copies are followed separately, since a
key may have one while it is stored again in the new epoch.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

from proofs.modelcheck.explorer import Search

from kvoffload.spec import (
    COMPLETIONS,
    CacheState,
    Call,
    Completion,
    CopyKind,
    Events,
    Key,
    LookupResult,
    MisuseError,
    Op,
    Output,
    Phase,
    Policy,
    StorePlan,
    StoreRejected,
    apply,
    check_invariants,
    initial_state,
    renumbered,
)

# --- the exploration ----------------------------------------------------------------


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


class Step(NamedTuple):
    """One call from one reachable state: what it returned or the misuse error it raised.

    A rejected call changes nothing, so ``after`` is ``before`` when ``error`` is set.
    (A tuple: one is made per step, 30,897 in the two explorations, and a frozen
    dataclass takes several times as long to make.)
    """

    before: CacheState
    call: Call
    after: CacheState
    output: Output
    error: MisuseError | None


def _tickets(state: CacheState, key: Key, kind: CopyKind) -> tuple[int | None, ...]:
    """The completion forms offered for ``key``: vLLM's (None), each job of ``kind``
    running on the key's live block or on a copy a reset left running, and a ticket that
    names no running job (the latest finished one, else one never issued)."""
    block = state.table.get(key)
    live: tuple[int, ...] = ()
    if block is not None:
        live = block.loads if kind is CopyKind.LOAD else (
            () if block.ticket is None else (block.ticket,))
    left = tuple(t for o in sorted(state.orphans, key=lambda o: o.epoch)
                 if o.key == key and o.kind is kind for t in o.tickets)
    running = {t for b in state.blocks for t in (*b.loads, b.ticket) if t is not None}
    running |= {t for o in state.orphans for t in o.tickets}
    issued = state.next_ticket
    other = next((t for t in range(issued - 1, -1, -1) if t not in running), issued)
    return (None, *live, *left, other)


def calls_from(state: CacheState, bounds: Bounds) -> Iterator[Call]:
    """The alphabet offered in ``state``: one-key calls of every operation and form."""
    for key in bounds.keys:
        keys = (key,)
        yield _call(Op.LOOKUP, keys)
        block = state.table.get(key)
        if block is None or block.readers < bounds.readers:
            yield _call(Op.PREPARE_LOAD, keys)
        yield _call(Op.TOUCH, keys)
        yield _call(Op.PREPARE_STORE, keys)
        for ticket in _tickets(state, key, CopyKind.LOAD):
            yield _call(Op.COMPLETE_LOAD, keys, ticket=ticket)
        for ticket in _tickets(state, key, CopyKind.STORE):
            for success in (True, False):
                yield _call(Op.COMPLETE_STORE, keys, success=success, ticket=ticket)
    if state.epoch < bounds.resets:
        yield _call(Op.RESET_CACHE)
    yield _call(Op.TAKE_EVENTS)


@cache
def _call(op: Op, keys: tuple[Key, ...] = (), success: bool = True,
          ticket: int | None = None) -> Call:
    """``Call(op, keys, success=success, ticket=ticket)``, made once (a call is a frozen
    value; the explorations offer the same few hundred calls in every state)."""
    return Call(op, keys, success=success, ticket=ticket)


def take_step(state: CacheState, call: Call) -> Step:
    """Apply ``call`` to ``state`` with the spec; a misuse error is an outcome, not a crash."""
    try:
        after, output = apply(state, call)
    except MisuseError as error:
        return Step(state, call, state, None, error)
    return Step(state, call, after, output, None)


def explore(bounds: Bounds) -> tuple[list[CacheState], list[Step]]:
    """Breadth-first search from the empty tier, in a deterministic order (the model
    checker's search engine, :class:`proofs.modelcheck.explorer.Search`, with no
    symmetry reduction: the diagram tells keys apart).

    Returns the reachable states (the initial one first) and every step taken from them.
    Each new state is checked against the spec's invariants when first reached.
    """
    search: Search[CacheState, Call] = Search(initial_state(bounds.capacity, bounds.policy),
                                              _renamed)
    steps: list[Step] = []
    for state, i, _ in search.frontier():
        for call in calls_from(state, bounds):
            step = take_step(state, call)
            steps.append(step)
            # two steps in three leave the state itself (a lookup, a misuse error): it
            # is node i, found already, and needs no form
            if step.after is not state and search.reach(i, call, step.after)[1]:
                check_invariants(step.after)
    return search.nodes, steps


def _renamed(state: CacheState) -> tuple[Hashable, object]:
    return renumbered(state)[0], None


def ticket_form(step: Step) -> str:
    """How a completion names its job, relative to the state it arrives in: ``running``
    (a job on the key's live block), ``pre-reset`` (a copy a reset left running),
    ``finished`` (no running job: a finished one, or one never issued)."""
    ticket, call = step.call.ticket, step.call
    if call.op not in COMPLETIONS or ticket is None:
        return ""
    kind = CopyKind.LOAD if call.op is Op.COMPLETE_LOAD else CopyKind.STORE
    key = call.keys[0]
    block = step.before.table.get(key)
    if block is not None and ticket in (block.loads if kind is CopyKind.LOAD else (block.ticket,)):
        return "running"
    if step.before.orphan_of_job(key, kind, ticket) is not None:
        return "pre-reset"
    return "finished"


# --- the projection onto one key ---------------------------------------------------


class KeyPhase(enum.Enum):
    """A key's lifecycle phase, with READY split by whether the block is being read."""

    ABSENT = "ABSENT"
    STORING = "STORING"
    READY = "READY, readers = 0"
    READ = "READY, readers > 0"


def key_phase(state: CacheState, key: Key) -> KeyPhase:
    """The phase of ``key``'s live block in ``state``."""
    block = state.table.get(key)
    if block is None:
        return KeyPhase.ABSENT
    if block.phase is Phase.STORING:
        return KeyPhase.STORING
    return KeyPhase.READ if block.readers else KeyPhase.READY


def readers(state: CacheState, key: Key) -> int:
    block = state.table.get(key)
    return 0 if block is None else block.readers


def running_copies(state: CacheState, key: Key) -> dict[tuple[CopyKind, int], int]:
    """The copies of ``key`` a reset left running: (kind, epoch) -> completions still due."""
    return {(o.kind, o.epoch): o.count for o in state.orphans if o.key == key}


class CopyChange(enum.Enum):
    """What a step did to one copy that a reset left running."""

    LEFT_RUNNING = "left running"
    """``reset_cache`` dropped the key while its copy was running."""
    ONE_LESS = "one completion fewer"
    """A load copy with several readers got one of its completions."""
    FINISHED = "finished"
    """Its last completion arrived: the slot it held is free again."""


@dataclass(frozen=True)
class Effect:
    """What one step did to one key, and what it told the caller about that key."""

    call: str
    """The call as seen from the key: ``k`` is the key, ``j`` another key."""
    op: Op
    named: bool
    """Whether the call named the key (``reset_cache`` and ``take_events`` name none)."""
    before: KeyPhase
    after: KeyPhase
    result: str
    """The output as it concerns the key (``HIT``, ``applied``, ...), or the error's class."""
    error_code: str | None
    readers_delta: int
    copies: tuple[tuple[CopyKind, CopyChange], ...]
    recency_changed: bool
    state_changed: bool

    @property
    def touches_key(self) -> bool:
        """Did the step change anything about the key (phase, readers, running copies)?"""
        return self.before is not self.after or bool(self.readers_delta or self.copies)


GLOBAL_OPS = frozenset({Op.RESET_CACHE, Op.TAKE_EVENTS})
"""The operations that name no key: they concern every key."""


def concerns(step: Step, key: Key) -> bool:
    """Does ``step`` name ``key``, concern every key, or change ``key`` all the same?"""
    if key in step.call.keys or step.call.op in GLOBAL_OPS:
        return True
    if step.after is step.before:  # the state itself: nothing of any key changed
        return False
    return (step.before.table.get(key) != step.after.table.get(key)
            or running_copies(step.before, key) != running_copies(step.after, key))


def effects_of(steps: Iterable[Step], keys: Sequence[Key]) -> Iterator[Effect]:
    """The effect of every step on every key it concerns (see :func:`concerns`)."""
    for step in steps:
        for key in keys:
            if concerns(step, key):
                yield effect(step, key)


def distinct_effects(steps: Iterable[Step], keys: Sequence[Key]) -> list[Effect]:
    """``list(dict.fromkeys(effects_of(steps, keys)))``: each distinct effect once, in the
    order first met, an :class:`Effect` made for each distinct one only (an effect
    equals another exactly when its fields do)."""
    distinct = dict.fromkeys(_fields(step, key) for step in steps for key in keys
                             if concerns(step, key))
    return [Effect(*fields) for fields in distinct]


def call_form(step: Step, key: Key) -> str:
    """The call of ``step`` as seen from ``key``: ``complete_store([k], ticket=pre-reset)``."""
    call = step.call
    if call.op in GLOBAL_OPS:
        return f"{call.op.value}()"
    named = key in call.keys
    arg = "k" if named else "j"
    args = [arg if call.op is Op.LOOKUP else f"[{arg}]"]
    if call.op is Op.COMPLETE_STORE and not call.success:
        args.append("success=False")
    form = ticket_form(step)
    if form:
        args.append(f"ticket={form}")
    return f"{call.op.value}({', '.join(args)})"


def _result(step: Step, key: Key) -> str:
    """The part of the output (or the error) that concerns ``key``."""
    if step.error is not None:
        return type(step.error).__name__
    out = step.output
    if isinstance(out, LookupResult):
        return out.name
    if isinstance(out, Completion):
        fields = ("applied", "released", "ignored")
        return next((f for f in fields if key in getattr(out, f)), "")
    if isinstance(out, StoreRejected):
        return "StoreRejected"
    if isinstance(out, StorePlan):
        if key in out.evicted:
            return "evicted"
        if key in out.keys:
            return "StorePlan"
        return "already present" if key in step.call.keys else ""
    if isinstance(out, Events):
        return "stored" if key in out.stored else "removed" if key in out.removed else ""
    if step.call.op is Op.PREPARE_LOAD:
        return "LoadPlan"
    if step.call.op is Op.TOUCH:
        return "None"
    return ""


def _copy_changes(step: Step, key: Key) -> tuple[tuple[CopyKind, CopyChange], ...]:
    before, after = running_copies(step.before, key), running_copies(step.after, key)
    changes: list[tuple[CopyKind, CopyChange]] = []
    for (kind, epoch), count in sorted(before.items(), key=lambda item: item[0][1]):
        left = after.get((kind, epoch), 0)
        if left == 0:
            changes.append((kind, CopyChange.FINISHED))
        elif left < count:
            changes.append((kind, CopyChange.ONE_LESS))
    changes.extend((kind, CopyChange.LEFT_RUNNING) for kind, epoch in sorted(
        after, key=lambda ke: (ke[1], ke[0].value)) if (kind, epoch) not in before)
    return tuple(changes)


def effect(step: Step, key: Key) -> Effect:
    """What ``step`` did to ``key``."""
    return Effect(*_fields(step, key))


_Fields = tuple[str, Op, bool, KeyPhase, KeyPhase, str, str | None, int,
                tuple[tuple[CopyKind, CopyChange], ...], bool, bool]


def _fields(step: Step, key: Key) -> _Fields:
    """The fields of :func:`effect`'s answer, in :class:`Effect`'s order."""
    before = key_phase(step.before, key)
    same = step.after is step.before  # the state itself (two steps in three): no change
    return (
        call_form(step, key),  # call
        step.call.op,  # op
        key in step.call.keys,  # named
        before,
        before if same else key_phase(step.after, key),  # after
        _result(step, key),  # result
        None if step.error is None else step.error.code,  # error_code
        0 if same else readers(step.after, key) - readers(step.before, key),  # readers_delta
        () if same else _copy_changes(step, key),  # copies
        not same and step.before.recency != step.after.recency,  # recency_changed
        not same and step.before != step.after,  # state_changed
    )


def _plain(token: str) -> str:
    return token


def describe(e: Effect, code: Callable[[str], str] = _plain) -> tuple[str, str]:
    """``e`` in words for a table cell, as (what the call answered, what it did to the key).

    ``code`` marks identifiers (Markdown backticks).
    """
    if e.error_code is not None:
        return f"error {code(e.result)} ({code(e.error_code)})", ""
    if not e.named and e.op not in GLOBAL_OPS:
        return ("evicted" if e.result == "evicted" else ""), _change_words(e)
    return _result_words(e, code), _change_words(e)


def _change_words(e: Effect) -> str:
    parts = []
    if e.before is not e.after:
        parts.append(f"→ {e.after.value}")
    elif e.readers_delta:
        parts.append("one more reader" if e.readers_delta > 0 else "one reader fewer")
    parts.extend(_COPY_WORDS[change].format(kind=kind.value) for kind, change in e.copies)
    if e.op is Op.TOUCH:
        parts.append("eviction order updated" if e.recency_changed else "no change")
    elif not parts and e.op not in (Op.LOOKUP, Op.TAKE_EVENTS):
        parts.append("no change" if e.named else "unaffected")
    return ", ".join(parts)


_COPY_WORDS = {
    CopyChange.LEFT_RUNNING: "its {kind} copy keeps running and holds its slot",
    CopyChange.ONE_LESS: "one reader fewer on its pre-reset {kind} copy",
    CopyChange.FINISHED: "its pre-reset {kind} copy's slot is freed",
}


def _result_words(e: Effect, code: Callable[[str], str]) -> str:
    if e.result in ("stored", "removed"):
        return f"k in {code('Events.' + e.result)}"
    if e.op is Op.TAKE_EVENTS:
        return f"{code('Events')} without k"
    if e.result == "already present":
        return f"{code('StorePlan')} without k (already present)"
    return code(e.result) if e.result else ""
