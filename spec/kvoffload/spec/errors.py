"""The typed error tree.

Two families, never mixed:

* :class:`MisuseError` (a :class:`ValueError`): a caller broke a precondition. Each
  subclass has a stable ``code`` that reports, adapters and docs quote. A call that
  raises one changes nothing.
* :class:`InvariantViolation`: something that cannot happen did. It signals a bug in
  whatever produced the state (the spec itself, a mutant, or an implementation under
  check), never bad input.

Errors are raised with ``raise``, never ``assert``, so they survive ``python -O``.
"""

from __future__ import annotations

from collections.abc import Hashable


class KvOffloadError(Exception):
    """Root of every error kvoffload raises on purpose."""


class MisuseError(KvOffloadError, ValueError):
    """A call broke a precondition; the state is unchanged."""

    code: str = "misuse"

    def __init__(self, message: str, *, keys: tuple[Hashable, ...] = ()) -> None:
        super().__init__(f"[{self.code}] {message}")
        self.keys = keys


class NotReadable(MisuseError):
    """``prepare_load`` named a key that is not READY (absent, or its store in flight)."""

    code = "load-not-ready"


class UnmatchedCompleteLoad(MisuseError):
    """``complete_load`` named a key with no load outstanding."""

    code = "unmatched-complete-load"


class UnknownEpoch(MisuseError):
    """A completion named an epoch that has not begun (later than the current one)."""

    code = "unknown-epoch"


class BadCapacity(MisuseError):
    """A cache needs at least one slot."""

    code = "bad-capacity"


class ChoiceNotAllowed(MisuseError):
    """A victim or slot choice handed to the spec is outside what the spec allows.

    The lockstep checker hands the target's choices to the spec; this error means
    the target chose a victim or slot the rules forbid.
    """

    code = "choice-not-allowed"


class InvariantViolation(KvOffloadError):
    """A named invariant does not hold: a bug in whatever built the state."""

    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"invariant {invariant!r} broken: {detail}")
        self.invariant = invariant
        self.detail = detail
