"""The typed error tree.

Three families, never mixed (no class belongs to two):

* :class:`MisuseError` (a :class:`ValueError`): a caller broke a precondition. Each
  subclass has a stable ``code`` that reports, adapters and docs quote. A call that
  raises one changes nothing. :class:`MalformedCall` is one too: a :class:`Call` that
  describes no call of the API (a lookup without its key, say).
* :class:`ChoiceNotAllowed`: a victim or slot choice handed to the spec is outside what
  the rules allow. The lockstep checker hands a target's choices to the spec, so this
  means the *target* chose wrongly: a finding against it, not a misuse by the caller
  of the operation. It has a stable ``code`` too.
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
    """``complete_load`` in vLLM's form named a key with no load outstanding."""

    code = "unmatched-complete-load"


class NotEvictable(MisuseError):
    """``evict_in_background`` named a key that is not READY with no readers (D14)."""

    code = "not-evictable"


class BadCapacity(MisuseError):
    """A cache needs at least one slot."""

    code = "bad-capacity"


class MalformedCall(MisuseError):
    """A :class:`~kvoffload.spec.calls.Call` that describes no call of the API."""

    code = "malformed-call"


class ChoiceNotAllowed(KvOffloadError):
    """A victim or slot choice handed to the spec is outside what the spec allows.

    The lockstep checker hands the target's choices to the spec; this error means the
    target chose a victim or slot the rules forbid. The state is unchanged.
    """

    code: str = "choice-not-allowed"

    def __init__(self, message: str) -> None:
        super().__init__(f"[{self.code}] {message}")


class InvariantViolation(KvOffloadError):
    """A named invariant does not hold: a bug in whatever built the state."""

    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"invariant {invariant!r} broken: {detail}")
        self.invariant = invariant
        self.detail = detail
