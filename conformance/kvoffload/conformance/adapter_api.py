"""What every adapter offers the lockstep driver: one method per operation, answers in
the spec's vocabulary, and a statement of what the target's API can express.

Adapters translate at the edge (``bool | None``, ints, vLLM enums, bytes keys) so that
the driver compares like with like; a value an adapter cannot translate raises
:class:`~kvoffload.conformance.errors.Untranslatable`.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Protocol

from kvoffload.spec import Completion, Key, LookupResult

from .errors import Untranslatable


class Retry(enum.Enum):
    """vLLM's "cannot tell now, ask again" answer (``None`` before 0.25, ``RETRY`` after)."""

    RETRY = "retry"


RETRY = Retry.RETRY

Reported = LookupResult | Retry
"""A lookup answer as the target gave it, translated."""


@dataclass(frozen=True)
class StoreOutcome:
    """``prepare_store`` as the target answered it.

    Accepted: ``keys`` to store, their ``slots``, the ``evicted`` keys, the plan's
    ``epoch`` and job ``ticket`` (None: the API has none). Rejected: ``needed`` /
    ``available`` when the API reports them (None otherwise).
    """

    accepted: bool
    keys: tuple[Key, ...] = ()
    slots: tuple[int, ...] = ()
    evicted: tuple[Key, ...] = ()
    epoch: int | None = None
    ticket: int | None = None
    """The plan's job ticket (None: the API has none, vLLM's)."""
    needed: int | None = None
    available: int | None = None


@dataclass(frozen=True)
class LoadOutcome:
    """``prepare_load`` as the target answered it: where to read, the epoch and job
    ticket if the API has them."""

    keys: tuple[Key, ...] | None
    slots: tuple[int, ...]
    epoch: int | None = None
    ticket: int | None = None


@dataclass(frozen=True)
class EventBatch:
    """Events in delivery order: ``(removed, keys)`` pairs, as a subscriber applies them."""

    items: tuple[tuple[bool, tuple[Key, ...]], ...] = ()
    net: bool = False
    """The API promises the net change since the last drain (the native ``Events``):
    no key stored that the subscriber already has, none removed that it lacks."""

    def replay_onto(self, ready: set[Key]) -> None:
        """Apply the batch to a subscriber's READY set, in delivery order."""
        for removed, keys in self.items:
            if removed:
                ready.difference_update(keys)
            else:
                ready.update(keys)

    def not_net(self, ready: AbstractSet[Key]) -> tuple[frozenset[Key], frozenset[Key]]:
        """What breaks the net-change promise against the subscriber's READY set before
        the batch: keys stored that it already has, keys removed that it lacks (both
        empty if the batch makes no such promise)."""
        if not self.net:
            return frozenset(), frozenset()
        again = frozenset(k for removed, keys in self.items if not removed
                          for k in keys if k in ready)
        unknown = frozenset(k for removed, keys in self.items if removed
                            for k in keys if k not in ready)
        return again, unknown

    def not_net_text(self, ready: AbstractSet[Key]) -> str | None:
        """:meth:`not_net` in words (None: the promise holds)."""
        again, unknown = self.not_net(ready)
        if not again and not unknown:
            return None
        broken = [f"stores {sorted(map(repr, again))}, announced already"] if again else []
        if unknown:
            broken.append(f"removes {sorted(map(repr, unknown))}, not announced")
        return "Events is the net change since the last take_events, yet it " + " and ".join(broken)


@dataclass(frozen=True)
class Capabilities:
    """What the target's API can express; the machine generates nothing else."""

    touch: bool = True
    reset: bool = True
    events: bool = True
    completion_tickets: bool = True
    """Plans carry job tickets and completions may name them (the ticket form)."""
    typed_misuse: bool = True
    """Misuse is rejected with the spec's typed errors (else with ``AssertionError``)."""
    strict_lookup: bool = True
    """The lookup can report PENDING at all (vLLM <= 0.18 cannot: safe profile only)."""

    def rejects_with(self, error: BaseException, code: str) -> bool:
        """Whether ``error``, a rejection, is the one the spec calls for: of the spec's
        misuse ``code`` (its ``code`` attribute) in an API with typed misuse errors; any
        rejection in one without."""
        return not self.typed_misuse or getattr(error, "code", None) == code


class Adapter(Protocol):
    """One target instance, seen through the spec's vocabulary."""

    name: str
    capabilities: Capabilities

    def lookup(self, key: Key) -> Reported: ...

    def prepare_load(self, keys: Sequence[Key]) -> LoadOutcome: ...

    def complete_load(self, keys: Sequence[Key], ticket: int | None) -> Completion | None: ...

    def touch(self, keys: Sequence[Key]) -> None: ...

    def prepare_store(self, keys: Sequence[Key]) -> StoreOutcome: ...

    def complete_store(
        self, keys: Sequence[Key], success: bool, ticket: int | None
    ) -> Completion | None: ...

    def reset_cache(self) -> int | None: ...

    def take_events(self) -> EventBatch: ...

    def is_rejection(self, error: BaseException) -> bool:
        """Is ``error`` the target's way of rejecting misuse (rather than a crash)?"""
        ...


def read_int(value: object, prop: str, what: str) -> int:
    """``value`` as a plain int (``operator.index``: a bool, a float or None is refused;
    an int subclass is read as the int it holds, whatever its ``__eq__`` says)."""
    if isinstance(value, bool):
        raise Untranslatable(prop, f"the {what} {value!r} is a bool, not an int")
    try:
        return operator.index(value)  # type: ignore[arg-type]  # checked by the except
    except TypeError as error:
        raise Untranslatable(prop, f"the {what} {value!r} is not an int") from error
