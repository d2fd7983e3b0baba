"""``kvoffload corpus replay DIR TARGET``: each case's calls through ``kvoffload check``'s judge.

A case's calls are made in lockstep on the spec and the target by the same
:class:`~kvoffload.conformance.judge.lockstep.Lockstep` that ``kvoffload check`` drives (the same
adapters, the same comparers, the same host process for the target), then the same drain (every
running copy completed, then a store that must fit: ``liveness``). The spec is the oracle: a case's
``expect`` answers are not read here (they are the spec's answers, written for replayers in other
languages; ``tests/conformance/test_corpus.py`` keeps them equal to the spec). So a failure names
the property, with the spec-versus-target table, and the run writes the report and reproducers
``kvoffload check`` writes.

Where the spec leaves a choice (which victims at ``--level any``, which slot), it takes
the target's, as in ``check``: a case tagged ``level: exact`` replays at any level and
with any policy (the tag is for replayers that compare with ``expect``). A case is
skipped when the target cannot receive its calls: a call an assumption (``--assume``)
rules out, more keys in one call than ``--max-keys-per-call``, an operation the target
lacks, a completion naming a ticket on an API without job names.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvoffload.spec import Call, LoadPlan, Op, StorePlan, excluded_by

from ..adapter_api import Adapter, Capabilities
from ..config import CheckConfig
from ..errors import PropertyViolation
from ..judge.guard import Interrupted, stop_requested, timed_calls
from ..judge.lockstep import Lockstep, assumed_away, construct
from ..judge.properties import PROPERTIES
from ..target.isolation import mark_running
from ..target.remote import target_session
from ..target.targets import Prepared, with_target_defaults
from .corpus import load_cases

if TYPE_CHECKING:
    from ..command.runner import CheckResult

NEVER_ISSUED_OFFSET = 1_000_000
"""A completion naming ``u0`` (no plan issued it) sends the spec a ticket this far past
the next one it would issue: one it never issues within a case."""
CALLS_TEXT = "each case's calls as the corpus writes them, then the drain"


@dataclass
class CaseFailure:
    """A case the target failed: the violation the lockstep raised."""

    case: str
    violation: PropertyViolation


@dataclass
class Outcome:
    """What one replay of a corpus gave, case by case."""

    passed: list[str] = field(default_factory=list)
    failed: list[CaseFailure] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    calls: int = 0
    """Calls in the cases replayed (the drains' not counted)."""

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


@dataclass
class ReplayResult:
    """The replay as ``kvoffload check`` reports a run (``check``), and case by case."""

    check: CheckResult
    outcome: Outcome


def applies(case: dict[str, Any], config: CheckConfig,
            caps: Capabilities | None = None) -> str | None:
    """Why ``case`` is skipped under ``config`` for a target with ``caps`` (None: it is
    replayed; without ``caps``, only the configuration's reasons).

    A case's ``excluded_by`` is read off the spec's own choices: it holds for the
    target's only at level any (no choice before the last call); a case tagged exact
    is checked call by call instead (:func:`replay_case`)."""
    excluded = set(case["excluded_by"]) & set(config.assume)
    if excluded and case["level"] == "any":
        return "assumed away: " + ", ".join(sorted(excluded))
    limit = config.max_keys_per_call
    if limit and any(len(s["call"].get("keys", ())) > limit for s in case["steps"]):
        return f"a call names more than {limit} keys"
    if caps is None:
        return None
    has = {"touch": caps.touch, "reset_cache": caps.reset, "take_events": caps.events}
    missing = sorted({s["call"]["op"] for s in case["steps"]} & {op for op, ok in has.items()
                                                                  if not ok})
    if missing:
        return "the target has no " + ", ".join(missing)
    if not caps.completion_tickets and any("ticket" in s["call"] for s in case["steps"]):
        return "completions name a ticket; this target's API has none"
    return None


def _call(data: dict[str, Any], tickets: dict[str, int], never: int) -> Call:
    """A case's call as the spec's :class:`Call`; a ticket name is the spec's ticket of
    the plan that bound it (``u0``, or a name no plan bound: one never issued)."""
    ticket = tickets.get(data["ticket"], never) if "ticket" in data else None
    return Call(Op(data["op"]), tuple(data.get("keys", ())),
                success=data.get("success", True), ticket=ticket)


def replay_case(case: dict[str, Any], make_adapter: Callable[[int], Adapter],
                config: CheckConfig) -> PropertyViolation | str | None:
    """Replay ``case`` on a fresh target in lockstep with the spec, then drain: None if
    it passes, the violation at its first divergence, or why it was skipped (a call an
    assumption rules out in the state the target's own choices led to)."""
    config = config.sized(case["capacity"])
    stale = not config.assumes("no-stale-completions")
    tickets: dict[str, int] = {}
    assumptions = config.assumptions  # made anew at every reading: read once
    try:
        run = Lockstep(construct(make_adapter, config.capacity, config.call_timeout), config)
        for step in case["steps"]:
            call = _call(step["call"], tickets, run.state.next_ticket + NEVER_ISSUED_OFFSET)
            if assumptions and assumed_away(run.state, call, assumptions):
                run.settle()
                return f"assumed away: {excluded_by(run.state, call, assumptions)}"
            output = run.step(call)
            if isinstance(output, StorePlan | LoadPlan):  # the n-th plan's ticket is "tn"
                tickets[f"t{len(tickets)}"] = output.ticket
        run.drain(stale_completions=stale)
        run.settle()
    except PropertyViolation as violation:
        return violation
    return None


def replay_cases(cases: list[dict[str, Any]], prepared: Prepared,
                 config: CheckConfig) -> tuple[Outcome, bool]:
    """Replay every case that applies; (the outcome, whether a Ctrl-C stopped it)."""
    outcome = Outcome()
    for case in cases:
        why = applies(case, config, prepared.capabilities)
        if why is not None:
            outcome.skip(why)
            continue
        if stop_requested():
            return outcome, True
        try:
            found = replay_case(case, prepared.make_adapter, config)
        except Interrupted:
            return outcome, True
        if isinstance(found, str):
            outcome.skip(found)
        elif found is None:
            outcome.passed.append(case["name"])
        else:
            outcome.failed.append(CaseFailure(case["name"], found))
        outcome.calls += len(case["steps"])
    return outcome, False


@timed_calls
def replay_corpus(target: str, config: CheckConfig, directory: Path, obj: Any = None,
                  in_process: bool | None = None) -> ReplayResult:
    """Replay the corpus under ``directory`` against ``target``, the target in a host
    process as for ``kvoffload check`` (in this process for ``obj``, ``in_process`` or
    ``KVOFFLOAD_IN_PROCESS=1``).

    raises: UsageError (bad target or options), OSError / ValueError / KeyError (an
    unreadable corpus)
    """
    # Here, not at the module's import: the runner imports Hypothesis's engine, which a
    # replay of single cases (replay_case: tests/vllm_replay.py's ``python -O`` child,
    # about 0.2 s of its CPU) never uses.
    from ..command.runner import CheckResult, Failure, coverage

    cases = load_cases(directory)
    config = with_target_defaults(target, config)  # lmcache==: one chunk per call
    start = time.perf_counter()
    with target_session(target, config, obj, in_process) as prepared:
        mark_running()  # loaded and built: from here, a process that dies fails the target
        outcome, interrupted = replay_cases(cases, prepared, config)
        config = replace(config, adapter=prepared.adapter)
        not_checked, _ = coverage(prepared, config)
    first: dict[str, Failure] = {}
    for failed in outcome.failed:
        first.setdefault(failed.violation.prop, Failure(failed.violation))
    result = CheckResult(
        target=target, adapter=prepared.adapter, adapter_reason=prepared.why, config=config,
        checked=tuple(p for p in PROPERTIES if p not in not_checked), not_checked=not_checked,
        alphabet={"replayed": CALLS_TEXT}, failures=list(first.values()),
        interrupted=interrupted, examples=len(outcome.passed) + len(outcome.failed),
        steps=outcome.calls, seconds=time.perf_counter() - start)
    result.extra["corpus"] = corpus_json(directory, outcome, len(cases))
    return ReplayResult(result, outcome)


MAX_LISTED = 1000
"""Failed cases listed by name in report.json (the counts are always whole)."""


def corpus_json(directory: Path, outcome: Outcome, cases: int) -> dict[str, Any]:
    """report.json's ``run.corpus``: the corpus, the counts, the failed cases."""
    return {
        "directory": str(directory), "cases": cases, "passed": len(outcome.passed),
        "failed": len(outcome.failed), "skipped": dict(sorted(outcome.skipped.items())),
        "failed_cases": [{"case": f.case, "property": f.violation.prop, "step": f.violation.step,
                          "drain": f.violation.in_drain, "message": f.violation.message}
                         for f in outcome.failed[:MAX_LISTED]],
    }
