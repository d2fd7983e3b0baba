"""What one conformance run is configured with; printed in every report.

Engines differ legitimately (a two-valued lookup, a policy of their own, a scheduler
that never sends some calls), so a verdict only means something together with the
configuration it was reached under.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

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


DEFAULT_CAPACITY = 4
DEFAULT_MAX_EXAMPLES = 300
DEFAULT_STEPS = 150


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
    max_keys_per_call: int = 0
    """At most this many keys in one generated call (0: no limit). Engines that store
    one chunk per call (LMCache's backends) are checked with 1."""

    def __post_init__(self) -> None:
        unknown = [name for name in self.assume if name not in ASSUMPTIONS]
        if unknown:
            raise UsageError(f"unknown assumption {unknown}; known: {sorted(ASSUMPTIONS)}")
        if self.capacity < 1:
            raise UsageError(f"--capacity must be at least 1, got {self.capacity}")
        if self.max_examples < 1 or self.steps < 1:
            raise UsageError("--max-examples and --steps must be at least 1")
        if self.max_keys_per_call < 0:
            raise UsageError(f"--max-keys-per-call must be 0 (no limit) or more, got "
                             f"{self.max_keys_per_call}")

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
            "max_keys_per_call": self.max_keys_per_call,
        }
