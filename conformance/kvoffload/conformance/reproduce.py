"""Replay a saved counterexample without Hypothesis: what reproducer files call.

A reproducer written by ``kvoffload check`` imports this module only; it needs
kvoffload (spec and suite) and the target, never Hypothesis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kvoffload.spec import Call

from .config import CheckConfig
from .judge.guard import timed_calls
from .judge.lockstep import replay
from .target.remote import is_exec_target, target_session
from .target.targets import with_target_defaults

REPLAY_OPTIONS = ("profile", "policy", "level", "eviction", "fault", "assume", "capacity",
                  "adapter", "call_timeout")
"""The options of a report's ``configuration`` that a replay uses (the rest steer the
search, which a replay does not run)."""


def config_from(values: Mapping[str, Any]) -> CheckConfig:
    """A CheckConfig from the plain values of a report's ``configuration``, parsed as
    ``check()`` parses its keywords.

    raises: UsageError, naming the option and what it accepts
    """
    return CheckConfig.from_options(
        **{name: values[name] for name in REPLAY_OPTIONS if name in values}, spelling="")


@timed_calls
def reproduce(
    target: str, configuration: Mapping[str, Any], calls: Sequence[Call], drain: bool = False
) -> None:
    """Replay ``calls`` against ``target`` in lockstep with the spec.

    Raises :class:`~kvoffload.conformance.errors.PropertyViolation` if the target still
    diverges; returns quietly once it conforms on this trace. An option the
    configuration does not name takes the kind of target's default, as in ``check``
    (``mooncake==``: ``eviction`` background; a report's configuration names them all).
    """
    config = with_target_defaults(target, config_from(configuration))
    # A Python target replays in this process (a reproducer is for debugging it); an
    # ``exec:`` target through its host.
    with target_session(target, config, in_process=not is_exec_target(target)) as prepared:
        replay(prepared.make_adapter(config.capacity), config, calls, drain=drain)
