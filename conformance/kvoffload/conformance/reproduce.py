"""Replay a saved counterexample without Hypothesis: what reproducer files call.

A reproducer written by ``kvoffload check`` imports this module only; it needs
kvoffload (spec and suite) and the target, never Hypothesis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kvoffload.spec import Call, Policy

from .config import DEFAULT_CALL_TIMEOUT, CheckConfig, Level, Profile
from .guard import timed_calls
from .lockstep import replay
from .targets import prepare


def config_from(values: Mapping[str, Any]) -> CheckConfig:
    """A CheckConfig from the plain values of a report's ``configuration``."""
    return CheckConfig(
        profile=Profile(values.get("profile", "strict")),
        policy=Policy(values.get("policy", "lru")),
        level=Level(values.get("level", "any")),
        assume=tuple(values.get("assume", ())),
        capacity=int(values.get("capacity", 4)),
        adapter=str(values.get("adapter", "auto")),
        call_timeout=float(values.get("call_timeout", DEFAULT_CALL_TIMEOUT)),
    )


@timed_calls
def reproduce(
    target: str, configuration: Mapping[str, Any], calls: Sequence[Call], drain: bool = False
) -> None:
    """Replay ``calls`` against ``target`` in lockstep with the spec.

    Raises :class:`~kvoffload.conformance.errors.PropertyViolation` if the target still
    diverges; returns quietly once it conforms on this trace.
    """
    config = config_from(configuration)
    prepared = prepare(target, config)
    replay(prepared.make_adapter(config.capacity), config, calls, drain=drain)
