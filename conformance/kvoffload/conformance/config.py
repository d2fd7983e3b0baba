"""What one conformance run is configured with; printed in every report.

Engines differ legitimately (a two-valued lookup, a policy of their own, a scheduler
that never sends some calls), so a verdict only means something together with the
configuration it was reached under.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from kvoffload.spec import ASSUMPTIONS, Assumption, Eviction, Policy

from .options import (
    ADAPTERS,
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_CAPACITY,
    DEFAULT_MAX_EXAMPLES,
    DEFAULT_STEPS,
    MAX_CAPACITY,
    MAX_EXAMPLES,
    MAX_STEPS,
    OPTIONS,
    SMALL_TIERS,
    FrontEnd,
    parse_options,
)

__all__ = ["ADAPTERS", "CONFIG_OPTIONS", "DEFAULT_CALL_TIMEOUT", "DEFAULT_CAPACITY",
           "DEFAULT_MAX_EXAMPLES", "DEFAULT_STEPS", "MAX_CAPACITY", "MAX_EXAMPLES",
           "MAX_STEPS", "SMALL_TIERS", "WIDE_EVERY", "CheckConfig", "Level", "Profile",
           "describe_tiers", "tier_size"]


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


WIDE_EVERY = 10
"""One example in WIDE_EVERY draws a tier above SMALL_TIERS (up to ``--capacity``)."""
CONFIG_OPTIONS = tuple(option.name for option in OPTIONS if option.config)
"""The options (:mod:`.options`) that are fields of :class:`CheckConfig`."""
_ENUMS: dict[str, type[enum.Enum]] = {"profile": Profile, "policy": Policy, "level": Level,
                                      "eviction": Eviction}
_SPELLINGS = {"--": FrontEnd.CLI, "--kvoffload-": FrontEnd.PLUGIN, "": FrontEnd.CHECK}


@dataclass(frozen=True)
class CheckConfig:
    """One run's configuration. ``seed=None`` means "pick one and report it"."""

    profile: Profile = Profile.STRICT
    policy: Policy = Policy.LRU
    level: Level = Level.ANY
    eviction: Eviction | None = None
    """When the target may evict (D14): None is the kind of target's default
    (:func:`~.target.targets.with_target_defaults`: ``background`` for ``mooncake==``, else
    ``on-store``); a value given as text is taken as the spec's :class:`Eviction`."""
    fault: str = "none"
    """The node's failure the suite injects (``--fault``, D15): ``none``, or the kind of
    node a target that has nodes fails (``holder-kill``, ``master-kill``)."""
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
    target's default (:func:`~.target.targets.with_target_defaults`: 1 for ``lmcache==``, whose
    backends store one chunk per call; 0 for any other)."""
    trace: str | None = None
    """A request trace (``--trace``): its call stream is the run's workload, one pass on
    a tier of ``capacity`` slots (:mod:`.traffic.check`); None: random calls."""
    target_defaults: tuple[str, ...] = ()
    """Options (field names) whose value the kind of target chose, the user giving none;
    every report's header says so."""

    def __post_init__(self) -> None:
        """A configuration built field by field is held to the options' own checks
        (:func:`~.options.parse_options`'s, spelled as the command line's)."""
        for option in OPTIONS:
            if option.config:
                option.bounded(self.trace is not None).parse(getattr(self, option.name),
                                                             FrontEnd.CLI)
        if isinstance(self.eviction, str):  # a target's default arrives as its text
            object.__setattr__(self, "eviction", Eviction(self.eviction))

    @classmethod
    def from_options(cls, *, spelling: str = "--", **given: object) -> CheckConfig:
        """The configuration from option values (strings from a command line, or typed
        values from Python) judged by :func:`~.options.parse_options`; None or missing
        means the default.

        ``spelling`` names options in messages: ``"--"`` (the CLI), ``"--kvoffload-"``
        (the pytest plugin) or ``""`` (``check()``'s keywords, ``profile=``).

        raises: UsageError, naming the option and what it accepts
        """
        return cls.from_values(parse_options(given, _SPELLINGS[spelling], CONFIG_OPTIONS))

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> CheckConfig:
        """The configuration from :func:`~.options.parse_options`'s values (the
        options that are no field of it are left out)."""
        chosen: dict[str, Any] = {name: values[name] for name in CONFIG_OPTIONS
                                  if name in values}
        for name, kind in _ENUMS.items():
            if chosen.get(name) is not None:
                chosen[name] = kind(chosen[name])
        if chosen.get("database") is not None:
            chosen["database"] = str(chosen["database"])
        return cls(**chosen)

    @property
    def assumptions(self) -> tuple[Assumption, ...]:
        """The enabled assumption objects, in the order given."""
        return tuple(ASSUMPTIONS[name] for name in dict.fromkeys(self.assume))

    def assumes(self, name: str) -> bool:
        return name in self.assume

    @property
    def injects_faults(self) -> bool:
        """Does the run inject a node's failure (``--fault``, D15)?"""
        return self.fault != "none"

    @property
    def background_eviction(self) -> bool:
        """May the target evict on its own, between calls (``--eviction background``)?"""
        return self.eviction is Eviction.BACKGROUND

    def sized(self, capacity: int) -> CheckConfig:
        """This configuration on a tier of ``capacity`` slots: every example, shrink
        candidate and replay asks for one, and a configuration made anew runs the
        options' checks again (:meth:`__post_init__`), so each is made once, kept in
        this configuration's own ``__dict__`` (not a field: not compared, hashed or
        described). Kept by instance, not in a cache keyed on the configuration, whose
        hash would read every field at each look-up."""
        if capacity == self.capacity:
            return self
        made: dict[int, CheckConfig] | None = self.__dict__.get("_sized")
        if made is None:
            made = self.__dict__["_sized"] = {}
        config = made.get(capacity)
        if config is None:
            config = made[capacity] = replace(self, capacity=capacity)
        return config

    def describe(self) -> dict[str, object]:
        """The configuration as plain values, for reports and report.json."""
        return {
            "adapter": self.adapter,
            "profile": self.profile.value,
            "policy": self.policy.value,
            "level": self.level.value,
            "eviction": (self.eviction or Eviction.ON_STORE).value,
            "fault": self.fault,
            "assume": list(dict.fromkeys(self.assume)),
            "capacity": self.capacity,
            "max_examples": self.max_examples,
            "steps": self.steps,
            "seed": self.seed,
            "call_timeout": self.call_timeout,
            "stop_at_first": self.stop_at_first,
            "max_keys_per_call": self.max_keys_per_call,
            "trace": self.trace,
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
