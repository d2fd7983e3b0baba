"""What one conformance run is configured with; printed in every report.

Engines differ legitimately (a two-valued lookup, a policy of their own, a scheduler
that never sends some calls), so a verdict only means something together with the
configuration it was reached under.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from kvoffload.spec import ASSUMPTIONS, Assumption, Policy

from .errors import UsageError


class Profile(enum.Enum):
    """How strictly lookup answers are compared."""

    STRICT = "strict"
    """PENDING must be reported as PENDING (vLLM's RETRY is accepted in its place)."""
    SAFE = "safe"
    """PENDING may read as MISS (a two-valued lookup), never as HIT."""


class Level(enum.Enum):
    """How eviction choices are compared."""

    ANY = "any"
    """Any allowed victim: READY, no readers, not named in the call."""
    EXACT = "exact"
    """Exactly the victims of the spec's model of the policy (LRU or ARC)."""


DEFAULT_CAPACITY = 64
SMALL_TIERS = 4
"""Nine examples in ten draw a tier of 1..SMALL_TIERS slots (rejections and evictions
at once, where lifecycle bugs show first); see :func:`tier_size`."""
WIDE_EVERY = 10
"""One example in WIDE_EVERY draws a tier above SMALL_TIERS (up to ``--capacity``)."""
DEFAULT_MAX_EXAMPLES = 300
DEFAULT_STEPS = 150
DEFAULT_CALL_TIMEOUT = 10.0
"""Seconds one call into the target may take before it is a ``liveness`` failure."""
MAX_CAPACITY = 1024
"""The largest ``--capacity``: the spec's state, the key pool and the drain grow with it."""
MAX_STEPS = 100_000
MAX_EXAMPLES = 10_000_000

ADAPTERS = ("auto", "native", "vllm-int", "vllm-bool", "vllm-enum", "lmcache-cpu",
            "lmcache-disk")
"""``vllm-int``: ``lookup(hashes) -> int`` (<= 0.18); ``vllm-bool``: ``lookup(key, ctx) ->
bool | None`` (0.19-0.24); ``vllm-enum``: ``LookupResult`` (0.25 on)."""

_E = TypeVar("_E", bound=enum.Enum)


@dataclass(frozen=True)
class CheckConfig:
    """One run's configuration. ``seed=None`` means "pick one and report it"."""

    profile: Profile = Profile.STRICT
    policy: Policy = Policy.LRU
    level: Level = Level.ANY
    assume: tuple[str, ...] = ()
    capacity: int = DEFAULT_CAPACITY
    max_examples: int = DEFAULT_MAX_EXAMPLES
    steps: int = DEFAULT_STEPS
    seed: int | None = None
    adapter: str = "auto"
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    """Seconds per call into the target (0: no limit)."""
    database: str | None = None
    """Hypothesis example database folder (a failure found once replays first); None: off."""
    stop_at_first: bool = False
    """End the run at the first failing property (else go on to a verdict per property)."""
    max_keys_per_call: int | None = None
    """At most this many keys in one generated call (0: no limit). None: the kind of
    target's default (:func:`~.targets.with_target_defaults`: 1 for ``lmcache==``, whose
    backends store one chunk per call; 0 for any other)."""
    target_defaults: tuple[str, ...] = ()
    """Options (field names) whose value the kind of target chose, the user giving none;
    every report's header says so."""

    def __post_init__(self) -> None:
        unknown = [name for name in self.assume if name not in ASSUMPTIONS]
        if unknown:
            raise UsageError(f"unknown assumption {unknown}; known: {sorted(ASSUMPTIONS)}")
        if not 1 <= self.capacity <= MAX_CAPACITY:
            raise UsageError(f"--capacity must be 1 to {MAX_CAPACITY}, got {self.capacity}")
        if self.max_examples < 1 or self.steps < 1:
            raise UsageError("--max-examples and --steps must be at least 1")
        if self.max_examples > MAX_EXAMPLES or self.steps > MAX_STEPS:
            raise UsageError(f"--max-examples is at most {MAX_EXAMPLES} and --steps at most "
                             f"{MAX_STEPS}")
        if not (math.isfinite(self.call_timeout) and self.call_timeout >= 0):
            raise UsageError(f"--call-timeout must be a number of seconds >= 0 (0: no "
                             f"limit), got {self.call_timeout}")
        if self.max_keys_per_call is not None and self.max_keys_per_call < 0:
            raise UsageError(f"--max-keys-per-call must be 0 (no limit) or more, got "
                             f"{self.max_keys_per_call}")
        if self.seed is not None and not 0 <= self.seed < 2**64:
            raise UsageError(f"--seed must be 0 to 2**64-1, got {self.seed}")

    @classmethod
    def from_options(
        cls,
        *,
        profile: object = "strict",
        policy: object = "lru",
        level: object = "any",
        assume: Iterable[object] = (),
        capacity: object = None,
        max_examples: object = None,
        steps: object = None,
        seed: object = None,
        adapter: object = "auto",
        call_timeout: object = None,
        database: object = None,
        stop_at_first: object = False,
        max_keys_per_call: object = None,
        spelling: str = "--",
    ) -> CheckConfig:
        """The one parser from option values (strings from a command line, or typed
        values from Python) to a configuration; None means the default.

        ``spelling`` names options in messages: ``"--"`` (the CLI), ``"--kvoffload-"``
        (the pytest plugin) or ``""`` (``check()``'s keywords, ``profile=``).

        raises: UsageError, naming the option and what it accepts
        """
        def flag(name: str) -> str:
            return f"{spelling}{name.replace('_', '-')}" if spelling else f"{name}="

        if isinstance(assume, str | bytes):
            assume = [assume]
        names = tuple(str(a) for a in assume)
        unknown = [n for n in names if n not in ASSUMPTIONS]
        if unknown:
            raise UsageError(f"{flag('assume')} takes {', '.join(sorted(ASSUMPTIONS))}; "
                             f"got {', '.join(map(repr, unknown))}")
        adapter_name = str(adapter)
        if adapter_name not in ADAPTERS:
            raise UsageError(f"{flag('adapter')} must be one of {', '.join(ADAPTERS)}; "
                             f"got {adapter!r}")
        return cls(
            profile=_choice(flag("profile"), Profile, profile),
            policy=_choice(flag("policy"), Policy, policy),
            level=_choice(flag("level"), Level, level),
            assume=names,
            capacity=_integer(flag("capacity"), capacity, DEFAULT_CAPACITY),
            max_examples=_integer(flag("max_examples"), max_examples, DEFAULT_MAX_EXAMPLES),
            steps=_integer(flag("steps"), steps, DEFAULT_STEPS),
            seed=None if seed is None else _integer(flag("seed"), seed, 0),
            adapter=adapter_name,
            call_timeout=_seconds(flag("call_timeout"), call_timeout),
            database=None if database is None else str(database),
            stop_at_first=bool(stop_at_first),
            max_keys_per_call=None if max_keys_per_call is None else _integer(
                flag("max_keys_per_call"), max_keys_per_call, 0),
        )

    @property
    def assumptions(self) -> tuple[Assumption, ...]:
        """The enabled assumption objects, in the order given."""
        return tuple(ASSUMPTIONS[name] for name in dict.fromkeys(self.assume))

    def assumes(self, name: str) -> bool:
        return name in self.assume

    def describe(self) -> dict[str, object]:
        """The configuration as plain values, for reports and report.json."""
        return {
            "adapter": self.adapter,
            "profile": self.profile.value,
            "policy": self.policy.value,
            "level": self.level.value,
            "assume": list(dict.fromkeys(self.assume)),
            "capacity": self.capacity,
            "max_examples": self.max_examples,
            "steps": self.steps,
            "seed": self.seed,
            "call_timeout": self.call_timeout,
            "stop_at_first": self.stop_at_first,
            "max_keys_per_call": self.max_keys_per_call,
            "target_defaults": list(self.target_defaults),
        }


def tier_size(draw: int, capacity: int) -> int:
    """The tier, in slots, of an example whose draw is ``draw`` (any int >= 0), when the
    largest tier is ``capacity``.

    Nine draws in ten give a small tier, 1..SMALL_TIERS (all draws do when ``capacity``
    is no more): small tiers reach rejections and evictions at once. The
    tenth gives a wide one, SMALL_TIERS+1..capacity, log-uniform (each doubling of the
    size as likely as the next), so a target that goes wrong only past some size (a
    fixed-size table, an index that overflows, a structure that changes as it grows)
    meets it too. Draw 0 (Hypothesis's simplest value) is the 1-slot tier.
    """
    if capacity <= SMALL_TIERS or draw % WIDE_EVERY != WIDE_EVERY - 1:
        return 1 + draw % min(capacity, SMALL_TIERS)
    low = SMALL_TIERS + 1
    share = (draw // WIDE_EVERY) % 4096 / 4096
    return min(capacity, int(low * ((capacity + 1) / low) ** share))


def describe_tiers(capacity: int) -> str:
    """The tiers :func:`tier_size` draws, in words."""
    if capacity <= SMALL_TIERS:
        return f"tiers of 1..{capacity} slots"
    return (f"tiers of 1..{SMALL_TIERS} slots (one example in {WIDE_EVERY}: "
            f"{SMALL_TIERS + 1}..{capacity})")


def _choice(flag: str, kind: type[_E], value: object) -> _E:
    if isinstance(value, kind):
        return value
    try:
        return kind(value)
    except ValueError:
        known = ", ".join(str(member.value) for member in kind)
        raise UsageError(f"{flag} must be one of {known}; got {value!r}") from None


def _integer(flag: str, value: object, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise UsageError(f"{flag} takes a whole number; got {value!r}")
    try:
        return int(value)
    except ValueError:
        raise UsageError(f"{flag} takes a whole number; got {value!r}") from None


def _seconds(flag: str, value: object) -> float:
    if value is None:
        return DEFAULT_CALL_TIMEOUT
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise UsageError(f"{flag} takes a number of seconds; got {value!r}")
    try:
        seconds = float(value)
    except ValueError:
        raise UsageError(f"{flag} takes a number of seconds; got {value!r}") from None
    if not (math.isfinite(seconds) and seconds >= 0):
        raise UsageError(f"{flag} must be a number of seconds >= 0 (0: no limit); "
                         f"got {value!r}")
    return seconds
