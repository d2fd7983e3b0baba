"""Errors of the reference manager that the spec's error tree does not name.

Every one derives from the spec's :class:`~kvoffload.spec.errors.MisuseError`, so a
caller that catches the spec's misuse family catches these too.
"""

from __future__ import annotations

from kvoffload.spec.errors import MisuseError


class UnknownPolicy(MisuseError):
    """The manager was asked for an eviction policy it does not implement."""

    code = "unknown-policy"
