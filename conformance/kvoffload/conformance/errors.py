"""The suite's own exceptions: a property violation (exit 1) or a usage error (exit 2).

A violation is raised with ``raise``, never ``assert``, and does not derive from
:class:`AssertionError`: ``python -O`` must not make a target conform, and a vLLM
target's own ``assert`` failures (its way of rejecting misuse) must never be mistaken
for the suite's verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvoffload.spec import Call

EXIT_CONFORMS, EXIT_FAILS, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
"""The command's exit statuses (docs/conformance.md, "Exit status"); 143 is SIGTERM's."""
MAX_MESSAGE = 2000
"""Characters kept of a violation's message (a target's answer can be megabytes long)."""
MAX_CELL = 500
"""Characters kept of one cell of the spec-versus-target table."""


def clip(text: str, limit: int) -> str:
    """``text``, cut to about ``limit`` characters, saying how much was left out: what
    is printed and stored of any one answer stays small however large the answer."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


class UsageError(Exception):
    """The run could not start: bad option, unloadable target, unusable adapter."""


class TargetLoadError(UsageError):
    """TARGET could not be imported, found or constructed."""


class PropertyViolation(Exception):
    """The target's observable behaviour differs from the spec's at one step.

    ``rows`` is the spec-versus-target table at the divergence: (aspect, spec, target).
    ``trace`` is every call made up to and including the failing one (set by the
    lockstep driver when it raises).
    """

    def __init__(
        self,
        prop: str,
        message: str,
        rows: Sequence[tuple[str, str, str]] = (),
    ) -> None:
        message = clip(message, MAX_MESSAGE)
        super().__init__(f"[{prop}] {message}")
        self.prop = prop
        self.message = message
        self.rows: tuple[tuple[str, str, str], ...] = tuple(
            (clip(a, MAX_CELL), clip(s, MAX_CELL), clip(t, MAX_CELL)) for a, s, t in rows)
        self.trace: tuple[Call, ...] = ()
        self.generated: int = 0
        """Calls of ``trace`` before the final drain (the rest are the drain's)."""
        self.step: int = 0
        self.capacity: int = 0
        """The tier size the failing example ran with."""
        self.timed_out = False
        """A call overran --call-timeout: the target hangs, and the run stops here (every
        example would wait out the timeout again)."""
        self.host_ended = False
        """The target's host process ended (or wrote garbage) in this call: every
        example would end it again, so the run stops here, as for ``timed_out``."""
        self.probe = False
        """Found by the lookups around a rejected call, not by the call's own answer."""

    @property
    def in_drain(self) -> bool:
        """Did it fail in the final drain (the liveness check), not in a generated call?"""
        return len(self.trace) > self.generated

    def trace_lines(self) -> list[str]:
        """The numbered trace; the drain's calls are marked."""
        return [f"  {i:>3}. {call}" + ("    (drain)" if i > self.generated else "")
                for i, call in enumerate(self.trace, 1)]

    def table(self) -> str:
        """The spec-versus-target table as aligned text."""
        return format_table(("", "spec", "target"), self.rows)

    def __str__(self) -> str:
        where = f"step {self.step}: " if self.step else ""
        text = f"property {self.prop!r} violated at {where}{self.message}"
        if self.trace:
            text += "\ntrace:\n" + "\n".join(self.trace_lines())
        if self.rows:
            text += "\n" + self.table()
        return text


class Untranslatable(Exception):
    """An adapter could not read the target's answer as the API's vocabulary.

    The lockstep driver turns it into a violation of ``prop``.
    """

    def __init__(self, prop: str, message: str) -> None:
        super().__init__(message)
        self.prop = prop
        self.message = message


def format_table(header: tuple[str, str, str], rows: Sequence[tuple[str, str, str]]) -> str:
    """Three aligned text columns, for violation tables and summaries."""
    every = [header, *rows]
    widths = [max(len(row[i]) for row in every) for i in range(3)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in every]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
