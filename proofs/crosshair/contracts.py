"""The spec's rules as PEP 316 contracts, one function per operation and form.

Each function calls one transition of the spec's public API and returns what it
returned (a misuse error as its ``code``, the state then the one before); its ``post:``
lines state the rule of ``docs/spec.md`` without calling any transition: through the
state's accessors (``phase``, ``table``, ``free_slots``, ...) and the helpers below,
which read the states before and after. ``python -m proofs.crosshair_check
proofs/crosshair/contracts.py`` must confirm every one over the ``lru`` domain (every
reachable state at its bound, every argument); with a spec mutant in place
(``--mutant NAME``) the contracts of the operations it replaces must be refuted.
"""

from __future__ import annotations

from dataclasses import replace

from kvoffload.spec import (
    CacheState,
    Completion,
    CopyKind,
    Events,
    Key,
    LoadPlan,
    LookupResult,
    MisuseError,
    Orphan,
    Phase,
    StorePlan,
    StoreRejected,
    broken_invariants,  # noqa: F401 - named by the contracts (pre:, post:)
    complete_load,
    complete_store,
    lookup,
    prepare_load,
    prepare_store,
    reset_cache,
    take_events,
    touch,
    unique,
)

from .domain import Keys, TicketNumber
from .plugin import native

STORE, LOAD = CopyKind.STORE, CopyKind.LOAD
ANSWERS = {Phase.ABSENT: LookupResult.MISS, Phase.STORING: LookupResult.PENDING,
           Phase.READY: LookupResult.HIT}


def lookup_answers_the_phase(state: CacheState, key: Key) -> tuple[CacheState, LookupResult]:
    """D1: MISS iff absent, PENDING iff STORING, HIT iff READY; nothing changes.

    pre: not broken_invariants(state)
    post: __return__[1] is ANSWERS[state.phase(key)]
    post: __return__[0] == state
    """
    return lookup(state, key)


def touch_changes_only_the_order(state: CacheState, keys: Keys) -> tuple[CacheState, None]:
    """D10: touch reorders; blocks, copies, tickets and events stay; invariants hold.

    pre: not broken_invariants(state)
    post: _same_but_recency(state, __return__[0])
    post: not broken_invariants(__return__[0])
    """
    return touch(state, keys)


def prepare_load_pins_ready_blocks(state: CacheState, keys: Keys
                                   ) -> tuple[CacheState, LoadPlan | str]:
    """D2, D6, D7: a load of READY blocks adds one reader per distinct key under a fresh
    ticket; any key not READY is misuse and changes nothing.

    pre: not broken_invariants(state)
    post: _prepare_load_ok(state, tuple(keys), *__return__)
    post: not broken_invariants(__return__[0])
    """
    try:
        return prepare_load(state, keys)
    except MisuseError as error:
        return state, error.code


def prepare_store_allocates_or_rejects(state: CacheState, keys: Keys
                                       ) -> tuple[CacheState, StorePlan | StoreRejected]:
    """D2, D3, D4, D7: the absent keys get free slots under a fresh ticket, evicting
    exactly as many evictable blocks not named in the call as needed, or the whole call
    is rejected (only then) and nothing changes.

    pre: not broken_invariants(state)
    post: _prepare_store_ok(state, tuple(keys), *__return__)
    post: not broken_invariants(__return__[0])
    """
    return prepare_store(state, keys)


def complete_store_ticket_form(state: CacheState, key: Key, success: bool,
                               ticket: TicketNumber) -> tuple[CacheState, Completion]:
    """D5, D7, the ticket form: the completion finishes job ``ticket`` where it runs: a
    live STORING block of that job becomes READY or ABSENT, a store a reset left running
    frees its slot; with no such job the key is ignored. (The spec matches each key of a
    completion on its own; several keys are the vLLM-form contract's.)

    pre: not broken_invariants(state)
    post: _lands(state, (key,), STORE, success, ticket, __return__)
    post: not broken_invariants(__return__[0])
    """
    return complete_store(state, [key], success, ticket)


def complete_store_vllm_form(state: CacheState, keys: Keys, success: bool
                             ) -> tuple[CacheState, Completion]:
    """D2, D5, D7, vLLM's form (no ticket): each distinct key's STORING block, else its
    oldest store a reset left running, else ignored.

    pre: not broken_invariants(state)
    post: _lands(state, tuple(keys), STORE, success, None, __return__)
    post: not broken_invariants(__return__[0])
    """
    return complete_store(state, keys, success)


def complete_load_ticket_form(state: CacheState, key: Key, ticket: TicketNumber
                              ) -> tuple[CacheState, Completion | str]:
    """D6, D7, the ticket form: the completion ends load ``ticket`` where it runs (a
    reader of the live block, or a load a reset left running), else the key is ignored.

    pre: not broken_invariants(state)
    post: _lands(state, (key,), LOAD, True, ticket, __return__)
    post: not broken_invariants(__return__[0])
    """
    try:
        return complete_load(state, [key], ticket)
    except MisuseError as error:
        return state, error.code


def complete_load_vllm_form(state: CacheState, keys: Keys) -> tuple[CacheState, Completion | str]:
    """D2, D6, D7, vLLM's form: each distinct key's oldest running load ends (of the
    live block, else of the oldest copy a reset left running); a key with none is misuse
    and the call changes nothing.

    pre: not broken_invariants(state)
    post: _lands(state, tuple(keys), LOAD, True, None, __return__)
    post: not broken_invariants(__return__[0])
    """
    try:
        return complete_load(state, keys)
    except MisuseError as error:
        return state, error.code


def reset_holds_running_copies(state: CacheState) -> tuple[CacheState, int]:
    """D7: every block goes; each copy still running keeps its slot; a new epoch.

    pre: not broken_invariants(state)
    post: _reset_ok(state, __return__[0], __return__[1])
    post: not broken_invariants(__return__[0])
    """
    return reset_cache(state)


def take_events_reports_the_net_change(state: CacheState) -> tuple[CacheState, Events]:
    """D8: the events since the last call replay to the READY set; nothing else changes.

    pre: not broken_invariants(state)
    post: __return__[1].stored == state.keys_in(Phase.READY) - state.announced
    post: __return__[1].removed == state.announced - state.keys_in(Phase.READY)
    post: __return__[0].announced == state.keys_in(Phase.READY)
    post: __return__[0].blocks == state.blocks and __return__[0].recency == state.recency
    """
    return take_events(state)


# --- the rules, read from the states before and after (never through a transition) ---


@native
def _same_but_recency(before: CacheState, after: CacheState) -> bool:
    return (after.blocks, after.orphans, after.epoch, after.announced, after.next_ticket) == (
        before.blocks, before.orphans, before.epoch, before.announced, before.next_ticket)


@native
def _prepare_load_ok(before: CacheState, keys: tuple[Key, ...], after: CacheState,
                     answer: LoadPlan | str) -> bool:
    wanted = unique(keys)
    if any(before.phase(k) is not Phase.READY for k in wanted):
        return answer == "load-not-ready" and after == before
    if not isinstance(answer, LoadPlan):
        return False
    ticket = before.next_ticket
    pinned = {k: before.table[k] for k in wanted}
    return (answer.keys == wanted and answer.ticket == ticket and answer.epoch == before.epoch
            and answer.slots == tuple(b.slot for b in pinned.values())
            and after.next_ticket == ticket + 1
            and all(after.table[k].loads == (*b.loads, ticket) and after.table[k].slot == b.slot
                    and after.table[k].phase is Phase.READY for k, b in pinned.items())
            and _others_kept(before, after, frozenset(wanted))
            and (after.orphans, after.epoch, after.announced) == (
                before.orphans, before.epoch, before.announced))


@native
def _prepare_store_ok(before: CacheState, keys: tuple[Key, ...], after: CacheState,
                      answer: StorePlan | StoreRejected) -> bool:
    wanted = unique(keys)
    new = tuple(k for k in wanted if before.phase(k) is Phase.ABSENT)
    free = len(before.free_slots())
    allowed = before.evictable() - frozenset(wanted)
    needed = max(0, len(new) - free)
    if needed > len(allowed):
        return answer == StoreRejected(len(new), free + len(allowed)) and after == before
    if not isinstance(answer, StorePlan):
        return False
    evicted = frozenset(answer.evicted)
    reused = frozenset(before.table[k].slot for k in evicted)
    ticket = before.next_ticket
    return (answer.keys == new and answer.ticket == ticket and answer.epoch == before.epoch
            and len(answer.evicted) == needed == len(evicted) and evicted <= allowed
            and len(set(answer.slots)) == len(new)
            and set(answer.slots) <= set(before.free_slots()) | reused
            and all(after.table[k].phase is Phase.STORING and after.table[k].ticket == ticket
                    and after.table[k].slot == s for k, s in zip(new, answer.slots, strict=True))
            and not evicted & frozenset(after.table)
            and _others_kept(before, after, evicted | frozenset(new))
            and after.next_ticket == ticket + 1
            and (after.orphans, after.epoch, after.announced) == (
                before.orphans, before.epoch, before.announced))


def _others_kept(before: CacheState, after: CacheState, touched: frozenset[Key]) -> bool:
    """Every block of a key outside ``touched`` is as it was."""
    return ({b for b in before.blocks if b.key not in touched}
            == {b for b in after.blocks if b.key not in touched})


def _landing(state: CacheState, key: Key, kind: CopyKind, ticket: int | None) -> str:
    """Where a completion of ``kind`` for ``key`` lands (D7), read from the state."""
    block = state.table.get(key)
    if block is not None:
        running = block.loads if kind is LOAD else (
            (block.ticket,) if block.phase is Phase.STORING else ())
        if running and (ticket is None or ticket in running):
            return "applied"
    if any(o.key == key and o.kind is kind and (ticket is None or ticket in o.tickets)
           for o in state.orphans):
        return "released"
    return "ignored"


@native
def _lands(before: CacheState, keys: tuple[Key, ...], kind: CopyKind, success: bool,
           ticket: int | None, result: tuple[CacheState, Completion | str]) -> bool:
    after, answer = result
    wanted = unique(keys)
    where = {k: _landing(before, k, kind, ticket) for k in wanted}
    if kind is LOAD and ticket is None and "ignored" in where.values():
        return answer == "unmatched-complete-load" and after == before
    if not isinstance(answer, Completion):
        return False
    sorted_out = tuple(tuple(k for k in wanted if where[k] == w)
                       for w in ("applied", "released", "ignored"))
    if (answer.applied, answer.released, answer.ignored) != sorted_out:
        return False
    for key in answer.applied:
        old, new = before.table[key], after.table.get(key)
        if kind is STORE:
            good = (new is not None and new.phase is Phase.READY and new.slot == old.slot
                    and new.ticket is None and not new.loads) if success else new is None
        else:
            ended = old.loads[0] if ticket is None else ticket
            rest = list(old.loads)
            rest.remove(ended)
            good = new is not None and new.phase is Phase.READY and new.loads == tuple(rest) \
                and new.slot == old.slot
        if not good:
            return False
    return (after.orphans == _orphans_after(before, answer.released, kind, ticket)
            and _others_kept(before, after, frozenset(answer.applied))
            and (after.epoch, after.announced, after.next_ticket) == (
                before.epoch, before.announced, before.next_ticket))


def _orphans_after(before: CacheState, released: tuple[Key, ...], kind: CopyKind,
                   ticket: int | None) -> frozenset[Orphan]:
    """The copies a reset left running, less the job each released key finished: the
    one named (ticket form) or the oldest copy's oldest (vLLM's form)."""
    orphans = set(before.orphans)
    for key in released:
        copy = min((o for o in before.orphans if o.key == key and o.kind is kind
                    and (ticket is None or ticket in o.tickets)), key=lambda o: o.epoch)
        ended = copy.tickets[0] if ticket is None else ticket
        rest = list(copy.tickets)
        rest.remove(ended)
        orphans.remove(copy)
        if rest:
            orphans.add(replace(copy, tickets=tuple(rest)))
    return frozenset(orphans)


@native
def _reset_ok(before: CacheState, after: CacheState, epoch: int) -> bool:
    running = {b.slot for b in before.blocks if b.phase is Phase.STORING or b.loads}
    return (not after.blocks and epoch == after.epoch == before.epoch + 1
            and after.used_slots() == running | {o.slot for o in before.orphans}
            and before.orphans <= after.orphans
            and all(o.epoch == before.epoch for o in after.orphans - before.orphans)
            and (after.announced, after.next_ticket) == (before.announced, before.next_ticket))
