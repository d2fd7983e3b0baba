"""The self-test: does the suite kill every seeded bug and pass every control?

Lifecycle variants run at ``--level any``, eviction-order variants at ``--level exact``
(each of those also runs at ``--level any`` as a control: any allowed victim is fine
there). Every run uses the budget the self-test was started with (the default one
unless ``--max-examples`` / ``--steps`` say otherwise).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from kvoffload.spec import Policy

from ..command.runner import CheckResult, run_check
from ..config import CheckConfig, Level

MODULE = "kvoffload.conformance.selftest.mutants"


@dataclass(frozen=True)
class Entry:
    """One self-test run: a variant that must fail, or a control that must pass."""

    cls: str
    kind: str
    """"variant" (must be killed) or "control" (must conform)."""
    policy: Policy = Policy.LRU
    level: Level = Level.ANY

    @property
    def target(self) -> str:
        return f"{MODULE}:{self.cls}"

    @property
    def label(self) -> str:
        return f"{self.cls} [{self.policy.value}/{self.level.value}]"


def _v(cls: str, policy: Policy = Policy.LRU, level: Level = Level.ANY) -> Entry:
    return Entry(cls, "variant", policy, level)


def _policy(cls: str, policy: Policy) -> list[Entry]:
    """An eviction-order variant: killed at --level exact, a control at --level any."""
    return [Entry(cls, "variant", policy, Level.EXACT), Entry(cls, "control", policy, Level.ANY)]


CATALOGUE: tuple[Entry, ...] = (
    _v("LookupPendingAsMiss"),
    _v("LookupPendingAsHit"),
    _v("DuplicateKeySlotLeak"),
    _v("EvictsPinnedBlock"),
    _v("EvictsStoringBlock"),
    _v("PartialEvictionBeforeRejection"),
    _v("EvictsMoreThanNeeded"),
    _v("ArcRejectsWithEvictable", Policy.ARC),
    _v("AnnouncesBeforeReady"),
    _v("FailedStoreLeaksSlot"),
    _v("FailedStoreStaysVisible"),
    _v("FailedStoreDropsReadyBlock"),
    _v("StaleCompletionMarksReady"),
    _v("IgnoresTicket"),
    _v("PrepareLoadDoublePins"),
    _v("LoadOfStoringMarksReady"),
    _v("MisuseNotAtomic"),
    _v("UnmatchedCompleteLoadAccepted"),
    _v("ResetLeavesBlocks"),
    _v("ResetFreesRunningSlots"),
    _v("ResetWithoutRemovalEvents"),
    _v("MissingRemovalEvent"),
    *_policy("LookupRefreshesRecency", Policy.LRU),
    *_policy("TouchIgnored", Policy.LRU),
    *_policy("TouchForwardOrder", Policy.LRU),
    *_policy("MruEviction", Policy.LRU),
    *_policy("ArcNoAdaptation", Policy.ARC),
    *_policy("ArcGhostHitToT1", Policy.ARC),
    Entry("FifoSlotReuse", "control"),
    Entry("FifoSlotReuse", "control", Policy.ARC, Level.EXACT),
    Entry("SlotsFromTop", "control"),
    Entry("SlotsFromTop", "control", Policy.ARC, Level.EXACT),
    Entry("OffloadManager", "control", Policy.LRU, Level.EXACT),
)
"""Seeded bugs (each one real bug class, see the classes' docstrings) and controls."""


@dataclass
class Outcome:
    """How one entry fared."""

    entry: Entry
    result: CheckResult

    @property
    def ok(self) -> bool:
        wanted = "fails" if self.entry.kind == "variant" else "conforms"
        return self.result.verdict == wanted

    @property
    def status(self) -> str:
        if self.result.verdict == "error":
            return "ERROR"
        if self.entry.kind == "variant":
            return "killed" if self.ok else "SURVIVED"
        return "passed" if self.ok else "FAILED"


@dataclass
class SelfTestReport:
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes)


def run_self_test(
    base: CheckConfig, show_progress: bool = False, only: tuple[str, ...] = ()
) -> SelfTestReport:
    """Run every catalogue entry under ``base``'s budget and seed."""
    report = SelfTestReport()
    start = time.perf_counter()
    from . import mutants

    for entry in CATALOGUE:
        if only and entry.cls not in only:
            continue
        config = replace(base, policy=entry.policy, level=entry.level, adapter="native",
                         stop_at_first=True)  # a variant is killed by its first failure
        obj = getattr(mutants, entry.cls)
        result = run_check(entry.target, config, obj=obj, show_progress=show_progress,
                           label=entry.label)
        report.outcomes.append(Outcome(entry, result))
    report.seconds = time.perf_counter() - start
    return report
