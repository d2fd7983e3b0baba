"""Environment assumptions: what a target may rely on never receiving.

Each is a named object whose ``.name`` is the one used everywhere (CLI ``--assume``,
reports, docs). ``excludes(state, call)`` says whether the assumption rules ``call``
out in ``state``; the conformance suite and the model checker stop generating excluded
calls when the assumption is switched on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from .calls import COMPLETIONS, Call, Op, apply
from .errors import ChoiceNotAllowed, MisuseError
from .state import CacheState
from .vocabulary import Phase


@dataclass(frozen=True)
class Assumption:
    """A named assumption about the environment (the scheduler and the workers)."""

    name: str
    never: str
    """What the target relies on never receiving, in words."""
    excludes: Callable[[CacheState, Call], bool]

    def __str__(self) -> str:
        return self.name


def _has_duplicates(state: CacheState, call: Call) -> bool:
    return len(set(call.keys)) < len(call.keys)


def _is_misuse(state: CacheState, call: Call) -> bool:
    try:
        apply(state, call)
    except ChoiceNotAllowed:
        return False
    except MisuseError:
        return True
    return False


def _is_stale_completion(state: CacheState, call: Call) -> bool:
    """A completion of a known job that is not running on every key it names, live."""
    job = call.job_ticket
    if call.op not in COMPLETIONS or job is None:
        return False
    for key in call.keys:
        block = state.table.get(key)
        running = block is not None and (
            job in block.loads if call.op is Op.COMPLETE_LOAD
            else block.phase is Phase.STORING and block.ticket == job)
        if not running:
            return True
    return False


def _is_reset_in_flight(state: CacheState, call: Call) -> bool:
    return call.op is Op.RESET_CACHE and state.in_flight()


UNIQUE_KEYS = Assumption("unique-keys", "a key twice in one call", _has_duplicates)
NO_MISUSE = Assumption(
    "no-misuse",
    "a call that breaks a precondition (load of a non-READY key, a complete_load in "
    "vLLM's form with no load outstanding)",
    _is_misuse,
)
NO_STALE_COMPLETIONS = Assumption(
    "no-stale-completions",
    "a completion that belongs to no running job: one from before a reset, or a "
    "second/late report of a job that finished",
    _is_stale_completion,
)
NO_RESET_IN_FLIGHT = Assumption(
    "no-reset-in-flight", "a reset while stores or loads are still running", _is_reset_in_flight)

ASSUMPTIONS: Mapping[str, Assumption] = MappingProxyType({
    a.name: a for a in (UNIQUE_KEYS, NO_MISUSE, NO_STALE_COMPLETIONS, NO_RESET_IN_FLIGHT)
})
"""Every assumption by name (read-only)."""


def excluded_by(state: CacheState, call: Call, assumptions: Iterable[Assumption]) -> str | None:
    """The name of the first assumption that rules ``call`` out, or None if it may happen."""
    return next((a.name for a in assumptions if a.excludes(state, call)), None)
