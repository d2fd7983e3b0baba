"""Spec mutants: the spec with one rule broken each, built from its public pieces.

A mutant replaces one or two operations of :data:`~.model.SPEC` by the spec's own
transition (run through :func:`kvoffload.spec.apply`) with a small, named change before
or after it: the spec itself is never edited and none of its bodies is copied. So a
mutant differs from the spec in exactly the rule it names. Every mutant must be caught
by the model checker at TINY with a shortest trace; a mutant whose broken rule is only
reachable through calls an assumption rules out (duplicate keys, misuse, a reset with
copies in flight, a stale completion) must also pass once that assumption is made:
that is what the assumption buys a target that relies on it.

Names: a mutant of the same bug class as a seeded bug of the conformance suite's
self-test (``kvoffload.conformance.selftest.mutants``, variants of the reference manager) takes
that bug's name (``in_suite``); the others are spec-level bugs the suite has no variant
for. ``proofs/README.md`` lists both side by side.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from kvoffload.spec import (
    NO_MISUSE,
    NO_RESET_IN_FLIGHT,
    NO_STALE_COMPLETIONS,
    UNIQUE_KEYS,
    Assumption,
    Block,
    CacheState,
    Call,
    Completion,
    Events,
    Key,
    LoadPlan,
    LookupResult,
    LruOrder,
    Op,
    Output,
    Phase,
    Policy,
    StorePlan,
    StoreRejected,
    UnmatchedCompleteLoad,
    apply,
    unique,
)

from .model import SPEC, Model, Slots, Transition
from .node import Form


@dataclass(frozen=True)
class Mutant:
    """A model that breaks one rule, the policy it is checked under, and the assumption
    (if any) under which its broken rule can no longer be reached."""

    model: Model
    decision: str
    """The decision of ``docs/spec.md`` whose rule the mutant breaks (D1 ... D10)."""
    rule: str
    policy: Policy = Policy.LRU
    hidden_by: Assumption | None = None
    in_suite: bool = False
    """Does the conformance suite's self-test seed a bug of this class, by this name?"""
    form: Form = Form.TICKET
    """The completion form it is checked with: vLLM's for a bug only that form can show
    (the ticket form names each job, so neither a duplicate key nor a missing load
    can take another job's completion)."""

    @property
    def name(self) -> str:
        return self.model.name


def _evicted(state: CacheState, keys: frozenset[Key]) -> CacheState:
    """``state`` with the blocks of ``keys`` gone, each evicted from the recency order."""
    recency = state.recency
    for key in sorted(keys, key=str):
        recency = recency.evicted(key)
    return replace(state, blocks=frozenset(b for b in state.blocks if b.key not in keys),
                   recency=recency)


# --- D1: lookup -------------------------------------------------------------------


def _lookup_pending_as_miss(state: CacheState, call: Call, slots: Slots
                            ) -> tuple[CacheState, Output]:
    new, result = apply(state, call)
    return new, LookupResult.MISS if result is LookupResult.PENDING else result


def _lookup_refreshes_recency(state: CacheState, call: Call, slots: Slots
                              ) -> tuple[CacheState, Output]:
    new, result = apply(state, call)
    if result is LookupResult.HIT:
        new, _ = apply(state, Call(Op.TOUCH, call.keys))
    return new, result


# --- D2: duplicate keys -------------------------------------------------------------


def _duplicate_key_slot_leak(state: CacheState, call: Call, slots: Slots
                             ) -> tuple[CacheState, Output]:
    """The spec's plan, plus one more slot (and block) per repeat of a planned key."""
    new, plan = apply(state, call, slots=slots)
    if not isinstance(plan, StorePlan):
        return new, plan
    repeats = [k for i, k in enumerate(call.keys) if k in plan.keys and k in call.keys[:i]]
    extra = new.free_slots()[:len(repeats)]
    leaked = frozenset(Block(k, Phase.STORING, s, plan.ticket)
                       for k, s in zip(repeats, extra, strict=False))
    return (replace(new, blocks=new.blocks | leaked),
            StorePlan((*plan.keys, *repeats[:len(extra)]), (*plan.slots, *extra),
                      plan.evicted, plan.epoch, plan.ticket))


def _prepare_load_double_pins(state: CacheState, call: Call, slots: Slots
                              ) -> tuple[CacheState, Output]:
    if len(set(call.keys)) == len(call.keys):
        return apply(state, call)
    new = state
    for key in call.keys:
        new, _ = apply(new, Call(Op.PREPARE_LOAD, (key,)))
    return new, LoadPlan(call.keys, tuple(state.table[k].slot for k in call.keys), state.epoch,
                         state.next_ticket)


def _complete_load_counts_duplicates(state: CacheState, call: Call, slots: Slots
                                     ) -> tuple[CacheState, Output]:
    new = state
    found: list[Key] = []
    applied: list[Key] = []
    released: list[Key] = []
    for key in call.keys:
        new, done = apply(new, replace(call, keys=(key,)))
        if isinstance(done, Completion):
            found += done.applied + done.released
            applied += done.applied
            released += done.released
    ignored = tuple(k for k in unique(call.keys) if k not in found)
    return new, Completion(applied=tuple(applied), released=tuple(released), ignored=ignored)


# --- D3 and D4: rejection and eviction --------------------------------------------


def _rejects_counting_present_keys(state: CacheState, call: Call, slots: Slots
                                   ) -> tuple[CacheState, Output]:
    """Rejects when the call's keys, present ones included, outnumber the room."""
    keys = unique(call.keys)
    fresh = [k for k in keys if state.phase(k) is Phase.ABSENT]
    room = len(state.free_slots()) + len(state.evictable() - frozenset(keys))
    if len(keys) > room:
        return state, StoreRejected(needed=len(fresh), available=room)
    return apply(state, call, slots=slots)


def _partial_eviction_before_rejection(state: CacheState, call: Call, slots: Slots
                                       ) -> tuple[CacheState, Output]:
    """A rejected store still evicts every block it could have evicted."""
    new, plan = apply(state, call, slots=slots)
    candidates = state.evictable() - frozenset(call.keys)
    if isinstance(plan, StoreRejected) and candidates:
        return _evicted(state, candidates), plan
    return new, plan


def _evicts_also(extra: Callable[[CacheState], frozenset[Key]]) -> Transition:
    """Where the spec rejects, evict blocks of ``extra(state)`` to make room instead."""

    def transition(state: CacheState, call: Call, slots: Slots
                   ) -> tuple[CacheState, Output]:
        new, plan = apply(state, call, slots=slots)
        if not isinstance(plan, StoreRejected):
            return new, plan
        widened = sorted(extra(state) - frozenset(call.keys), key=str)
        short = plan.needed - plan.available
        if short > len(widened):
            return new, plan
        return apply(_evicted(state, frozenset(widened[:short])), call,
                     slots=slots)

    return transition


def _pinned(state: CacheState) -> frozenset[Key]:
    return frozenset(b.key for b in state.blocks if b.readers)


def _storing(state: CacheState) -> frozenset[Key]:
    return state.keys_in(Phase.STORING)


# --- D5: store failure -------------------------------------------------------------


def _failed_store_stays_storing(state: CacheState, call: Call, slots: Slots
                                ) -> tuple[CacheState, Output]:
    new, done = apply(state, call)
    if call.success or not isinstance(done, Completion) or not done.applied:
        return new, done
    kept = frozenset(state.table[k] for k in done.applied)
    return replace(new, blocks=new.blocks | kept, recency=state.recency), done


def _failed_store_drops_ready_block(state: CacheState, call: Call, slots: Slots
                                    ) -> tuple[CacheState, Output]:
    new, done = apply(state, call)
    if not isinstance(done, Completion):
        return new, done
    dropped = tuple(k for k in done.ignored if not call.success and k in state.evictable())
    if not dropped:
        return new, done
    return (_evicted(new, frozenset(dropped)),
            Completion(applied=done.applied + dropped, released=done.released,
                       ignored=tuple(k for k in done.ignored if k not in dropped)))


# --- D6: misuse --------------------------------------------------------------------


def _unmatched_complete_load_accepted(state: CacheState, call: Call, slots: Slots
                                      ) -> tuple[CacheState, Output]:
    try:
        return apply(state, call)
    except UnmatchedCompleteLoad:
        # vLLM under python -O: the assert is gone and the call goes through (the reader
        # count, here a list of load tickets, cannot go below zero).
        return state, Completion(applied=tuple(k for k in unique(call.keys) if k in state.table))


def _load_of_storing_marks_ready(state: CacheState, call: Call, slots: Slots
                                 ) -> tuple[CacheState, Output]:
    storing = tuple(k for k in unique(call.keys) if state.phase(k) is Phase.STORING)
    if storing:
        # vLLM under python -O: the block is marked READY before its data is written.
        old = frozenset(state.table[k] for k in storing)
        ready = frozenset(replace(b, phase=Phase.READY, ticket=None) for b in old)
        state = replace(state, blocks=(state.blocks - old) | ready,
                        recency=state.recency.evictable(storing))
    return apply(state, call)


# --- D7: reset and stale completions ------------------------------------------------


def _reset_frees_running_slots(state: CacheState, call: Call, slots: Slots
                               ) -> tuple[CacheState, Output]:
    new, epoch = apply(state, call)
    return replace(new, orphans=state.orphans), epoch


def _stale_completion_marks_ready(state: CacheState, call: Call, slots: Slots
                                  ) -> tuple[CacheState, Output]:
    """A completion whose ticket names no running live job is taken as vLLM's form."""
    if call.ticket is not None and NO_STALE_COMPLETIONS.excludes(state, call):
        call = replace(call, ticket=None)
    return apply(state, call)


# --- D8 and D10: events and recency -------------------------------------------------


def _missing_removal_event(state: CacheState, call: Call, slots: Slots
                           ) -> tuple[CacheState, Output]:
    new, events = apply(state, call)
    if not isinstance(events, Events):
        return new, events
    return replace(new, announced=state.announced | events.stored), Events(stored=events.stored)


def _touch_queues_storing(state: CacheState, call: Call, slots: Slots
                          ) -> tuple[CacheState, Output]:
    new, _ = apply(state, call)
    if isinstance(new.recency, LruOrder):
        order = new.recency.order
        for key in reversed(unique(call.keys)):
            if key in state.table and key not in order:
                order = (*order, key)
        new = replace(new, recency=LruOrder(order))
    return new, None


def _mutant(name: str, decision: str, rule: str, replaced: dict[Op, Transition], *,
            policy: Policy = Policy.LRU, hidden_by: Assumption | None = None,
            in_suite: bool = True, form: Form = Form.TICKET) -> Mutant:
    return Mutant(replace(SPEC, name=name, about=rule, replaced=replaced), decision, rule,
                  policy, hidden_by, in_suite, form)


MUTANTS: tuple[Mutant, ...] = (
    _mutant("LookupPendingAsMiss", "D1",
            "lookup answers MISS for a block still STORING (vLLM before PR #41795)",
            {Op.LOOKUP: _lookup_pending_as_miss}),
    _mutant("LookupRefreshesRecency", "D1",
            "lookup of a READY block counts as a use (moves it in the eviction order)",
            {Op.LOOKUP: _lookup_refreshes_recency}),
    _mutant("DuplicateKeySlotLeak", "D2",
            "prepare_store([k, k]) allocates a slot per occurrence (vLLM up to 0.34)",
            {Op.PREPARE_STORE: _duplicate_key_slot_leak}, hidden_by=UNIQUE_KEYS),
    _mutant("PrepareLoadDoublePins", "D2",
            "prepare_load([k, k]) adds two readers for one load",
            {Op.PREPARE_LOAD: _prepare_load_double_pins}, hidden_by=UNIQUE_KEYS),
    _mutant("CompleteLoadCountsDuplicates", "D2",
            "complete_load([k, k]) releases two readers",
            {Op.COMPLETE_LOAD: _complete_load_counts_duplicates}, hidden_by=UNIQUE_KEYS,
            in_suite=False, form=Form.VLLM),
    _mutant("RejectsCountingPresentKeys", "D3",
            "prepare_store counts keys already present as needing a slot",
            {Op.PREPARE_STORE: _rejects_counting_present_keys}, in_suite=False),
    _mutant("PartialEvictionBeforeRejection", "D3",
            "a rejected prepare_store first evicts what it could (vLLM 0.18 ARC)",
            {Op.PREPARE_STORE: _partial_eviction_before_rejection}),
    _mutant("EvictsPinnedBlock", "D4",
            "eviction may take a READY block that has readers",
            {Op.PREPARE_STORE: _evicts_also(_pinned)}, policy=Policy.ARC),
    _mutant("EvictsStoringBlock", "D4",
            "eviction may take a block still STORING",
            {Op.PREPARE_STORE: _evicts_also(_storing)}, policy=Policy.ARC),
    _mutant("FailedStoreStaysStoring", "D5",
            "complete_store(success=False) keeps the block STORING",
            {Op.COMPLETE_STORE: _failed_store_stays_storing}, in_suite=False),
    _mutant("FailedStoreDropsReadyBlock", "D5",
            "complete_store(success=False) of a READY block drops it (vLLM 0.18 ARC)",
            {Op.COMPLETE_STORE: _failed_store_drops_ready_block}),
    _mutant("UnmatchedCompleteLoadAccepted", "D6",
            "complete_load with no load outstanding is accepted (vLLM under -O)",
            {Op.COMPLETE_LOAD: _unmatched_complete_load_accepted}, hidden_by=NO_MISUSE,
            form=Form.VLLM),
    _mutant("LoadOfStoringMarksReady", "D6",
            "prepare_load of a STORING block marks it READY (vLLM under -O)",
            {Op.PREPARE_LOAD: _load_of_storing_marks_ready}, hidden_by=NO_MISUSE),
    _mutant("ResetFreesRunningSlots", "D7",
            "reset_cache frees the slots of copies still running (vLLM-shaped reset)",
            {Op.RESET_CACHE: _reset_frees_running_slots}, hidden_by=NO_RESET_IN_FLIGHT),
    _mutant("StaleCompletionMarksReady", "D7",
            "the ticket form takes a complete_store of a job not running live (finished, "
            "pre-reset, never issued) as vLLM's form: it lands on the key's current block",
            {Op.COMPLETE_STORE: _stale_completion_marks_ready},
            hidden_by=NO_STALE_COMPLETIONS),
    _mutant("MissingRemovalEvent", "D8",
            "take_events never reports removals",
            {Op.TAKE_EVENTS: _missing_removal_event}),
    _mutant("TouchQueuesStoring", "D10",
            "touch puts a block that is not evictable into the LRU queue",
            {Op.TOUCH: _touch_queues_storing}, in_suite=False),
)

MUTANTS_BY_NAME: dict[str, Mutant] = {m.name: m for m in MUTANTS}
