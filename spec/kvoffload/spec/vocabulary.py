"""The words of the spec: block keys, job tickets, lifecycle phases, lookup results, policies.

These are the only names an implementation may share with the spec (together with
the error classes in :mod:`kvoffload.spec.errors`): sharing vocabulary keeps reports
readable, while the transitions and invariants stay the spec's alone.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Iterable
from typing import TypeAlias

Key: TypeAlias = Hashable
"""An opaque block key: the spec only hashes keys and compares them for equality."""

Ticket: TypeAlias = int
"""An opaque job name: every accepted plan issues a fresh one, never issued before by that
manager (not even before a reset), naming the whole plan's job (D7). Transitions compare
tickets only for equality, never order them, so a model checker may renumber them."""


class Phase(enum.Enum):
    """Where one key is in its lifecycle: ABSENT -> STORING -> READY -> ABSENT."""

    __hash__ = object.__hash__
    """By identity, as they compare: Enum's own hashes the member's name in Python, and
    each block's hash hashes its phase (a model checker hashes millions of blocks)."""

    ABSENT = "absent"
    STORING = "storing"
    READY = "ready"


class LookupResult(enum.Enum):
    """The tri-state answer to "is this block offloaded?"."""

    MISS = "miss"
    """Absent: the scheduler may compute (and later store) the block."""
    PENDING = "pending"
    """Its store is still being written: ask again later, do not recompute or re-store."""
    HIT = "hit"
    """Ready: the block may be loaded."""


class Policy(enum.Enum):
    """The eviction policies the spec models exactly."""

    __hash__ = object.__hash__
    """By identity, as they compare (as :class:`Phase`): each state's hash hashes its
    policy."""

    LRU = "lru"
    ARC = "arc"


class Eviction(enum.Enum):
    """When a tier may evict a block (decision D14): a setting of the environment,
    chosen per engine, never a behaviour the spec picks at random."""

    ON_STORE = "on-store"
    """Only inside ``prepare_store``, to make room for its keys (vLLM, LMCache): the
    default. A READY block stays until a store evicts it or a reset drops it."""
    BACKGROUND = "background"
    """Also between calls, on the tier's own initiative (Mooncake's master): the
    environment transition ``evict_in_background`` may take any READY block with no
    readers at any time. Opt-in."""


class CopyKind(enum.Enum):
    """What a running copy does to its offloaded slot."""

    __hash__ = object.__hash__
    """By identity, as they compare (as :class:`Phase`): each orphan's hash hashes its
    kind."""

    STORE = "store"
    """Device to host: writes the slot."""
    LOAD = "load"
    """Host to device: reads the slot."""


def unique(keys: Iterable[Key]) -> tuple[Key, ...]:
    """The keys of one call without repeats, first occurrence wins (decision D2)."""
    named = tuple(keys)
    return named if len(named) < 2 else tuple(dict.fromkeys(named))  # one key repeats none
