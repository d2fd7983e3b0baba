"""Spec mutants: the spec's transition table with one rule broken each.

A mutant wraps one or two of the spec's transitions (the spec itself is never edited),
so it differs from the spec in exactly the rule it names. Every mutant must be caught by
the model checker at TINY with a shortest trace; a mutant whose broken rule is only
reachable through calls an assumption rules out (duplicate keys, misuse, a reset with
copies in flight, a stale completion) must also pass once that assumption is made:
that is what the assumption buys a target that relies on it.

:func:`prepare_store_variant` is a copy of the spec's ``prepare_store`` with switches
for the store mutants; with every switch off it is the spec's (tested on every reachable
TINY state).
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
    Completion,
    Events,
    Key,
    LoadPlan,
    LookupResult,
    LruOrder,
    Phase,
    Policy,
    StorePlan,
    StoreRejected,
    UnmatchedCompleteLoad,
    unique,
)
from kvoffload.spec import transitions as t
from kvoffload.spec.transitions import _choose_slots, _evict

from .model import SPEC, Keys, Model, Slots


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

    @property
    def name(self) -> str:
        return self.model.name


def _ready_or_pinned(state: CacheState) -> frozenset[Key]:
    return state.keys_in(Phase.READY)


def _unpinned(state: CacheState) -> frozenset[Key]:
    return frozenset(b.key for b in state.blocks if not b.readers)


def prepare_store_variant(
    state: CacheState,
    keys: Keys,
    slots: Slots = None,
    *,
    dedupe: bool = True,
    evictable: Callable[[CacheState], frozenset[Key]] = CacheState.evictable,
    count_present: bool = False,
    evict_before_reject: bool = False,
) -> tuple[CacheState, StorePlan | StoreRejected]:
    """The spec's ``prepare_store`` (exact victims, lowest free slots), with switches:
    keep duplicate keys, widen the evictable set, count keys already present as new,
    evict what can be evicted before rejecting."""
    keys = unique(keys) if dedupe else tuple(keys)
    new_keys = tuple(k for k in keys if state.phase(k) is Phase.ABSENT)
    candidates = evictable(state) - frozenset(keys)
    needed = (len(keys) if count_present else len(new_keys)) - len(state.free_slots())
    if needed > len(candidates):
        available = len(state.free_slots()) + len(candidates)
        if evict_before_reject and candidates:
            state, _ = _evict(state, candidates, len(candidates), None)
        return state, StoreRejected(needed=len(new_keys), available=available)
    recency = state.recency
    for key in new_keys:
        recency = recency.adapted(key)
    state, evicted = _evict(replace(state, recency=recency), candidates, max(0, needed), None)
    chosen = _choose_slots(state, len(new_keys), slots)
    recency = state.recency
    for key in new_keys:
        recency = recency.inserted(key)
    stored = frozenset(Block(k, Phase.STORING, s) for k, s in zip(new_keys, chosen, strict=True))
    state = replace(state, blocks=state.blocks | stored, recency=recency)
    return state, StorePlan(new_keys, chosen, evicted, state.epoch)


# --- D1: lookup -------------------------------------------------------------------


def _lookup_storing_is_miss(state: CacheState, key: Key) -> tuple[CacheState, LookupResult]:
    new, result = t.lookup(state, key)
    return new, LookupResult.MISS if result is LookupResult.PENDING else result


def _lookup_is_a_use(state: CacheState, key: Key) -> tuple[CacheState, LookupResult]:
    new, result = t.lookup(state, key)
    if result is LookupResult.HIT:
        new, _ = t.touch(state, (key,))
    return new, result


# --- D2: duplicate keys -------------------------------------------------------------


def _store_keeps_duplicates(state: CacheState, keys: Keys, slots: Slots
                            ) -> tuple[CacheState, StorePlan | StoreRejected]:
    return prepare_store_variant(state, keys, slots, dedupe=False)


def _load_pins_duplicates(state: CacheState, keys: Keys) -> tuple[CacheState, LoadPlan]:
    new = state
    for key in keys:
        new, _ = t.prepare_load(new, (key,))
    return new, LoadPlan(tuple(keys), tuple(state.table[k].slot for k in keys), state.epoch)


def _complete_load_each(state: CacheState, keys: Keys, epoch: int | None
                        ) -> tuple[CacheState, Completion]:
    new = state
    applied: list[Key] = []
    released: list[Key] = []
    for key in keys:
        new, done = t.complete_load(new, (key,), epoch)
        applied += done.applied
        released += done.released
    return new, Completion(applied=tuple(applied), released=tuple(released))


# --- D3 and D4: rejection and eviction --------------------------------------------


def _counts_present(state: CacheState, keys: Keys, slots: Slots
                    ) -> tuple[CacheState, StorePlan | StoreRejected]:
    return prepare_store_variant(state, keys, slots, count_present=True)


def _evicts_before_rejecting(state: CacheState, keys: Keys, slots: Slots
                             ) -> tuple[CacheState, StorePlan | StoreRejected]:
    return prepare_store_variant(state, keys, slots, evict_before_reject=True)


def _evicts_pinned(state: CacheState, keys: Keys, slots: Slots
                   ) -> tuple[CacheState, StorePlan | StoreRejected]:
    return prepare_store_variant(state, keys, slots, evictable=_ready_or_pinned)


def _evicts_storing(state: CacheState, keys: Keys, slots: Slots
                    ) -> tuple[CacheState, StorePlan | StoreRejected]:
    return prepare_store_variant(state, keys, slots, evictable=_unpinned)


# --- D5: store failure -------------------------------------------------------------


def _failed_store_kept(state: CacheState, keys: Keys, success: bool, epoch: int | None
                       ) -> tuple[CacheState, Completion]:
    new, done = t.complete_store(state, keys, success, epoch)
    if success or not done.applied:
        return new, done
    kept = frozenset(state.table[k] for k in done.applied)
    return replace(new, blocks=new.blocks | kept, recency=state.recency), done


def _failure_drops_ready(state: CacheState, keys: Keys, success: bool, epoch: int | None
                         ) -> tuple[CacheState, Completion]:
    new, done = t.complete_store(state, keys, success, epoch)
    dropped = tuple(k for k in done.ignored if not success and k in state.evictable())
    if not dropped:
        return new, done
    recency = new.recency
    for key in dropped:
        recency = recency.evicted(key)
    gone = frozenset(state.table[k] for k in dropped)
    return (replace(new, blocks=new.blocks - gone, recency=recency),
            Completion(applied=done.applied + dropped, released=done.released,
                       ignored=tuple(k for k in done.ignored if k not in dropped)))


# --- D6: misuse --------------------------------------------------------------------


def _unmatched_decrements(state: CacheState, keys: Keys, epoch: int | None
                          ) -> tuple[CacheState, Completion]:
    try:
        return t.complete_load(state, keys, epoch)
    except UnmatchedCompleteLoad:
        # vLLM under python -O: the assert is gone and the count goes down anyway.
        live = tuple(k for k in unique(keys) if k in state.table)
        old = frozenset(state.table[k] for k in live)
        lowered = frozenset(replace(b, readers=b.readers - 1) for b in old)
        return replace(state, blocks=(state.blocks - old) | lowered), Completion(applied=live)


def _load_of_storing(state: CacheState, keys: Keys) -> tuple[CacheState, LoadPlan]:
    storing = tuple(k for k in unique(keys) if state.phase(k) is Phase.STORING)
    if storing:
        # vLLM under python -O: the block is marked READY before its data is written.
        old = frozenset(state.table[k] for k in storing)
        ready = frozenset(replace(b, phase=Phase.READY) for b in old)
        state = replace(state, blocks=(state.blocks - old) | ready,
                        recency=state.recency.evictable(storing))
    return t.prepare_load(state, keys)


def _store_future_epoch(state: CacheState, keys: Keys, success: bool, epoch: int | None
                        ) -> tuple[CacheState, Completion]:
    return t.complete_store(state, keys, success,
                            None if epoch is not None and epoch > state.epoch else epoch)


def _load_future_epoch(state: CacheState, keys: Keys, epoch: int | None
                       ) -> tuple[CacheState, Completion]:
    return t.complete_load(state, keys,
                           None if epoch is not None and epoch > state.epoch else epoch)


# --- D7: reset and stale completions ------------------------------------------------


def _reset_without_hold_back(state: CacheState) -> tuple[CacheState, int]:
    new, epoch = t.reset_cache(state)
    return replace(new, orphans=state.orphans), epoch


def _stale_store_applied(state: CacheState, keys: Keys, success: bool, epoch: int | None
                         ) -> tuple[CacheState, Completion]:
    return t.complete_store(state, keys, success,
                            None if epoch is not None and epoch < state.epoch else epoch)


# --- D8 and D10: events and recency -------------------------------------------------


def _events_without_removals(state: CacheState) -> tuple[CacheState, Events]:
    new, events = t.take_events(state)
    return replace(new, announced=state.announced | events.stored), Events(stored=events.stored)


def _touch_queues_storing(state: CacheState, keys: Keys) -> tuple[CacheState, None]:
    new, _ = t.touch(state, keys)
    if isinstance(new.recency, LruOrder):
        order = new.recency.order
        for key in reversed(unique(keys)):
            if key in state.table and key not in order:
                order = (*order, key)
        new = replace(new, recency=LruOrder(order))
    return new, None


def _mutant(name: str, decision: str, rule: str, model: Model, policy: Policy = Policy.LRU,
            hidden_by: Assumption | None = None) -> Mutant:
    return Mutant(replace(model, name=name, about=rule), decision, rule, policy, hidden_by)


MUTANTS: tuple[Mutant, ...] = (
    _mutant("lookup-storing-is-miss", "D1",
            "lookup answers MISS for a block still STORING (vLLM before PR #41795)",
            replace(SPEC, lookup=_lookup_storing_is_miss)),
    _mutant("lookup-is-a-use", "D1",
            "lookup of a READY block counts as a use (moves it in the eviction order)",
            replace(SPEC, lookup=_lookup_is_a_use)),
    _mutant("store-keeps-duplicates", "D2",
            "prepare_store([k, k]) allocates a slot per occurrence (vLLM up to 0.34)",
            replace(SPEC, prepare_store=_store_keeps_duplicates), hidden_by=UNIQUE_KEYS),
    _mutant("load-pins-duplicates", "D2",
            "prepare_load([k, k]) adds two readers for one load",
            replace(SPEC, prepare_load=_load_pins_duplicates), hidden_by=UNIQUE_KEYS),
    _mutant("complete-load-counts-duplicates", "D2",
            "complete_load([k, k]) releases two readers",
            replace(SPEC, complete_load=_complete_load_each), hidden_by=UNIQUE_KEYS),
    _mutant("counts-present-keys", "D3",
            "prepare_store counts keys already present as needing a slot",
            replace(SPEC, prepare_store=_counts_present)),
    _mutant("evicts-before-rejecting", "D3",
            "a rejected prepare_store first evicts what it could (vLLM 0.18 ARC)",
            replace(SPEC, prepare_store=_evicts_before_rejecting)),
    _mutant("evicts-pinned", "D4",
            "eviction may take a READY block that has readers",
            replace(SPEC, prepare_store=_evicts_pinned), Policy.ARC),
    _mutant("evicts-storing", "D4",
            "eviction may take a block still STORING",
            replace(SPEC, prepare_store=_evicts_storing), Policy.ARC),
    _mutant("failed-store-kept", "D5",
            "complete_store(success=False) keeps the block STORING",
            replace(SPEC, complete_store=_failed_store_kept)),
    _mutant("failure-drops-ready", "D5",
            "complete_store(success=False) of a READY block drops it (vLLM 0.18 ARC)",
            replace(SPEC, complete_store=_failure_drops_ready)),
    _mutant("unmatched-complete-load", "D6",
            "complete_load with no load outstanding decrements anyway (vLLM under -O)",
            replace(SPEC, complete_load=_unmatched_decrements), hidden_by=NO_MISUSE),
    _mutant("load-of-storing", "D6",
            "prepare_load of a STORING block marks it READY (vLLM under -O)",
            replace(SPEC, prepare_load=_load_of_storing), hidden_by=NO_MISUSE),
    _mutant("future-epoch-accepted", "D6",
            "a completion naming an epoch not yet begun is taken as vLLM's form",
            replace(SPEC, complete_store=_store_future_epoch, complete_load=_load_future_epoch),
            hidden_by=NO_MISUSE),
    _mutant("reset-without-hold-back", "D7",
            "reset_cache frees the slots of copies still running (vLLM-shaped reset)",
            replace(SPEC, reset_cache=_reset_without_hold_back), hidden_by=NO_RESET_IN_FLIGHT),
    _mutant("stale-completion-applied", "D7",
            "the reset-safe form applies a pre-reset completion to the current block",
            replace(SPEC, complete_store=_stale_store_applied),
            hidden_by=NO_STALE_COMPLETIONS),
    _mutant("events-miss-removals", "D8",
            "take_events never reports removals",
            replace(SPEC, take_events=_events_without_removals)),
    _mutant("touch-queues-storing", "D10",
            "touch puts a block that is not evictable into the LRU queue",
            replace(SPEC, touch=_touch_queues_storing)),
)

MUTANTS_BY_NAME: dict[str, Mutant] = {m.name: m for m in MUTANTS}
