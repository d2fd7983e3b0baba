"""kvoffload.spec: the executable specification of a KV-cache offloading tier.

Standard library only. Read it in this order: :mod:`.vocabulary`, :mod:`.state`,
:mod:`.transitions`, :mod:`.recency`, :mod:`.invariants`, :mod:`.assumptions`;
``docs/spec.md`` explains every decision. :mod:`.laws` states the spec a second time, as
relations over one call that never call a transition.
"""

from .assumptions import (
    ASSUMPTIONS,
    NO_MISUSE,
    NO_RESET_IN_FLIGHT,
    NO_STALE_COMPLETIONS,
    UNIQUE_KEYS,
    Assumption,
    excluded_by,
)
from .calls import (
    API_OPS,
    COMPLETIONS,
    ENVIRONMENT_OPS,
    FAULTS,
    Call,
    Op,
    Output,
    apply,
    replay,
    send,
)
from .errors import (
    BadCapacity,
    ChoiceNotAllowed,
    InvariantViolation,
    KvOffloadError,
    MalformedCall,
    MisuseError,
    NotEvictable,
    NotReadable,
    UnmatchedCompleteLoad,
)
from .invariants import INVARIANTS, broken_invariants, check_invariants, is_quiescent
from .laws import LAWS, broken_laws
from .outputs import Completion, Events, LoadPlan, StorePlan, StoreRejected
from .recency import ArcLists, LruOrder
from .state import Block, CacheState, Orphan, initial_state, renumbered
from .transitions import (
    complete_load,
    complete_store,
    evict_in_background,
    fail_node,
    lookup,
    prepare_load,
    prepare_store,
    reset_cache,
    take_events,
    touch,
)
from .vocabulary import CopyKind, Eviction, Key, LookupResult, Phase, Policy, Ticket, unique

__all__ = [
    "API_OPS", "ASSUMPTIONS", "COMPLETIONS", "ENVIRONMENT_OPS", "FAULTS", "INVARIANTS",
    "LAWS", "NO_MISUSE", "NO_RESET_IN_FLIGHT", "NO_STALE_COMPLETIONS", "UNIQUE_KEYS",
    "ArcLists", "Assumption", "BadCapacity", "Block", "CacheState", "Call",
    "ChoiceNotAllowed", "Completion", "CopyKind", "Events", "Eviction",
    "InvariantViolation", "Key", "KvOffloadError", "LoadPlan", "LookupResult", "LruOrder",
    "MalformedCall", "MisuseError", "NotEvictable", "NotReadable", "Op", "Orphan",
    "Output", "Phase", "Policy", "StorePlan", "StoreRejected", "Ticket",
    "UnmatchedCompleteLoad", "apply", "broken_invariants", "broken_laws",
    "check_invariants", "complete_load", "complete_store", "evict_in_background",
    "excluded_by", "fail_node", "initial_state", "is_quiescent", "lookup", "prepare_load",
    "prepare_store", "renumbered", "replay", "reset_cache", "send", "take_events", "touch",
    "unique",
]
