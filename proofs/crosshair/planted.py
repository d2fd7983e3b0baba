"""Three contracts that are false on trivial states: ``python -m proofs.crosshair_check
proofs/crosshair/planted.py`` must refute each one (the default test tier checks the
first; ``proofs/README.md`` records all three).

A template for planting your own: a function over the spec's public API whose
arguments CrossHair chooses (``CacheState``: a state the spec reaches at the bound;
``Key``: a key of the universe or a fresh one; ``list[Key]``, ``int | None``: any, as
CrossHair makes them), ``pre: not broken_invariants(state)``, and the claim as
``post:`` lines.
"""

from __future__ import annotations

from kvoffload.spec import (
    CacheState,
    Completion,
    Key,
    LookupResult,
    StorePlan,
    StoreRejected,
    broken_invariants,  # noqa: F401 - named by the contracts (pre:)
    complete_store,
    lookup,
    prepare_store,
)


def lookup_never_answers_hit(state: CacheState, key: Key) -> LookupResult:
    """False: a READY block's lookup answers HIT.

    pre: not broken_invariants(state)
    post: __return__ is not LookupResult.HIT
    """
    return lookup(state, key)[1]


def prepare_store_never_evicts(state: CacheState, keys: list[Key]) -> StorePlan | StoreRejected:
    """False: a full tier with an evictable block evicts it for a new key.

    pre: not broken_invariants(state)
    post: not isinstance(__return__, StorePlan) or not __return__.evicted
    """
    return prepare_store(state, keys)[1]


def failed_complete_store_never_frees_a_slot(
    state: CacheState, keys: list[Key], ticket: int | None
) -> tuple[CacheState, Completion]:
    """False: a failed store frees its block's slot.

    pre: not broken_invariants(state)
    post: len(__return__[0].free_slots()) <= len(state.free_slots())
    """
    return complete_store(state, keys, success=False, ticket=ticket)
