"""A manager that implements the native API by running the spec's own transitions.

It is conformant by construction, which makes it the suite's simplest positive target
(the suite must pass it), and its two hooks let tests exercise the freedom the spec
leaves: which free slots a store gets, and which allowed blocks it evicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kvoffload.spec import (
    CacheState,
    Completion,
    Events,
    Key,
    LoadPlan,
    LookupResult,
    Policy,
    StorePlan,
    StoreRejected,
    complete_load,
    complete_store,
    initial_state,
    lookup,
    prepare_load,
    prepare_store,
    reset_cache,
    take_events,
    touch,
    unique,
)


class SpecBackedManager:
    """The native API over :mod:`kvoffload.spec.transitions` (lowest slot, policy victim)."""

    def __init__(self, capacity: int, policy: str = "lru") -> None:
        self.state: CacheState = initial_state(capacity, Policy(policy))

    def choose_slots(self, free: Sequence[int], count: int) -> Sequence[int] | None:
        """Which free slots a store gets (None: the spec's lowest-first)."""
        return None

    def choose_victims(self, allowed: Sequence[Key], count: int) -> Sequence[Key] | None:
        """Which allowed blocks a store evicts (None: the policy's exact victims)."""
        return None

    def lookup(self, key: Key) -> LookupResult:
        return lookup(self.state, key)[1]

    def prepare_load(self, keys: Iterable[Key]) -> LoadPlan:
        self.state, plan = prepare_load(self.state, keys)
        return plan

    def complete_load(self, keys: Iterable[Key], ticket: int | None = None) -> Completion:
        self.state, done = complete_load(self.state, keys, ticket)
        return done

    def touch(self, keys: Iterable[Key]) -> None:
        self.state, _ = touch(self.state, keys)

    def prepare_store(self, keys: Iterable[Key]) -> StorePlan | StoreRejected:
        keys = unique(keys)
        state = self.state
        _, default = prepare_store(state, keys)
        if isinstance(default, StoreRejected):
            return default
        allowed = sorted(state.evictable() - frozenset(keys), key=repr)
        victims = self.choose_victims(allowed, len(default.evicted))
        freed = [state.table[k].slot for k in (default.evicted if victims is None else victims)]
        slots = self.choose_slots(sorted([*state.free_slots(), *freed]), len(default.keys))
        self.state, plan = prepare_store(state, keys, victims, slots)
        return plan

    def complete_store(
        self, keys: Iterable[Key], success: bool = True, ticket: int | None = None
    ) -> Completion:
        self.state, done = complete_store(self.state, keys, success, ticket)
        return done

    def reset_cache(self) -> int:
        self.state, epoch = reset_cache(self.state)
        return epoch

    def take_events(self) -> Events:
        self.state, events = take_events(self.state)
        return events


class HighestSlotFirst(SpecBackedManager):
    """Control: the highest free slots first (the spec allows any free slot)."""

    def choose_slots(self, free: Sequence[int], count: int) -> Sequence[int] | None:
        return sorted(free, reverse=True)[:count]


class NewestAllowedVictim(SpecBackedManager):
    """Control at --level any: evicts the allowed blocks that come last by key order."""

    def choose_victims(self, allowed: Sequence[Key], count: int) -> Sequence[Key] | None:
        return list(reversed(allowed))[:count]
