"""Do the managers of the benchmark agree where their policies agree?

Two checks, untimed, on the same kind of trace the timings use:

* :func:`lockstep_with_vllm`: ``OffloadManager`` and a vLLM manager side by side on
  the full trace, ours deciding what happens next: every lookup answer, every
  rejection, the keys each store accepts, the evicted keys (in order; only where the
  policies are the same, vLLM 0.24's LRU), the slots up to renaming (one bijection
  between our live slots and theirs, kept through the whole run), and the READY set
  that replaying each side's events gives.
* :func:`check_against_spec`: any manager against the spec itself, on a smaller
  trace (the spec is slow by design). The spec is handed the manager's victims and
  slots, so a manager whose policy differs (vLLM 0.34 ranks by request) is still
  checked for everything else; where the manager claims the spec's LRU, victims that
  differ from the spec's exact choice count as mismatches, elsewhere they are counted
  apart as policy differences.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kvoffload.conformance.adapter_api import StoreOutcome
from kvoffload.conformance.config import Profile
from kvoffload.conformance.judge.compare import lookup_agrees
from kvoffload.conformance.target.native import NativeAdapter
from kvoffload.conformance.target.vllm_adapters import VllmAdapter, era_of
from kvoffload.impl import OffloadManager
from kvoffload.spec import ChoiceNotAllowed, Key, StorePlan, StoreRejected, initial_state
from kvoffload.spec import transitions as spec
from kvoffload.spec.vocabulary import LookupResult, Phase
from manager_trace import Request, TraceShape

Job = tuple[int, bool, Sequence[Key], bool, Any]
"""A completion to deliver: (due step, is a load, keys, success, the request's context)."""


@dataclass
class Agreement:
    """What a check compared, what disagreed, and the first few disagreements."""

    checked: Counter[str] = field(default_factory=Counter)
    mismatches: Counter[str] = field(default_factory=Counter)
    policy_differences: int = 0
    examples: list[str] = field(default_factory=list)

    def expect(self, aspect: str, same: bool, detail: str | Callable[[], str] = "") -> bool:
        """Count one comparison of ``aspect``; on a mismatch keep ``detail`` (text, or
        a function giving it, called only then) among the first examples."""
        self.checked[aspect] += 1
        if not same:
            self.mismatches[aspect] += 1
            if len(self.examples) < 5:
                self.examples.append(f"{aspect}: {detail() if callable(detail) else detail}")
        return same

    @property
    def total(self) -> int:
        return sum(self.mismatches.values())


@dataclass
class Target:
    """A manager behind the conformance suite's adapter, plus what a scheduler adds for
    vLLM: one ``ReqContext`` per request (``contexts``), announced with
    ``on_new_request`` and passed on every call of that request and its completions."""

    adapter: NativeAdapter | VllmAdapter
    contexts: Sequence[Any] = ()

    @classmethod
    def vllm(cls, manager: Any, contexts: Sequence[Any]) -> Target:
        """A vLLM manager (0.19 on) driven with the trace's keys as they are."""
        era = era_of(type(manager))
        if era is None:
            raise TypeError(f"{type(manager).__qualname__} is not a vLLM manager")
        return cls(VllmAdapter(manager, era, raw_keys=True), contexts)

    @classmethod
    def native(cls, manager: Any) -> Target:
        return cls(NativeAdapter(manager))

    def start(self, step: int) -> Any:
        """Begin request ``step``; returns the context its completions are made under."""
        if not isinstance(self.adapter, VllmAdapter):
            return None
        context = self.contexts[step]
        self.adapter.manager.on_new_request(context)
        self.adapter.req_context = context
        return context

    def complete(self, job: Job) -> None:
        """Deliver a job's completion, under the context of the request that made it."""
        _, is_load, keys, success, context = job
        if isinstance(self.adapter, VllmAdapter):
            self.adapter.req_context = context
        if is_load:
            self.adapter.complete_load(keys, None)
        else:
            self.adapter.complete_store(keys, success, None)

    def replay_events(self, ready: set[Key]) -> None:
        self.adapter.take_events().replay_onto(ready)


def _lookups(report: Agreement, request: Request, answer: Callable[[bytes], LookupResult],
             target: Target) -> int:
    """Look the request's keys up on both sides until the first non-hit (by ``answer``,
    the side that decides); returns the hit prefix's length."""
    hits = 0
    for key in request.keys:
        mine, other = answer(key), target.adapter.lookup(key)
        same = lookup_agrees(Profile.STRICT, mine, other)
        report.expect("lookup", same, "" if same else f"{key!r}: {mine} vs {other}")
        if mine is not LookupResult.HIT:
            break
        hits += 1
    return hits


class Renaming:
    """One bijection between our live slots and theirs, built as blocks are stored."""

    def __init__(self) -> None:
        self.theirs: dict[int, int] = {}
        self.ours: dict[int, int] = {}

    def add(self, ours: int, theirs: int) -> bool:
        if ours in self.theirs or theirs in self.ours:
            return False
        self.theirs[ours], self.ours[theirs] = theirs, ours
        return True

    def drop(self, ours: int) -> None:
        self.ours.pop(self.theirs.pop(ours, -1), None)


def lockstep_with_vllm(theirs: Target, requests: Sequence[Request], shape: TraceShape,
                       same_victims: bool) -> Agreement:
    """Run ``OffloadManager`` and ``theirs`` side by side on the trace (see the module doc)."""
    ours, report = Target.native(OffloadManager(shape.capacity)), Agreement()
    renaming, slot_of = Renaming(), dict[Key, int]()
    jobs: list[Job] = []
    ours_ready: set[Key] = set()
    theirs_ready: set[Key] = set()
    for step, request in enumerate(requests):
        context = theirs.start(step)
        hits = _lookups(report, request, ours.adapter.manager.lookup, theirs)
        loaded = request.keys[:hits]
        if hits:
            plan = ours.adapter.prepare_load(loaded)
            their_slots = theirs.adapter.prepare_load(loaded).slots
            mapped = tuple(renaming.theirs.get(s) for s in plan.slots)
            report.expect("load slots", mapped == their_slots, f"{mapped} vs {their_slots}")
            jobs.append((step + shape.delay, True, loaded, True, context))
        rest = request.keys[hits:]
        if rest:
            out, other_out = ours.adapter.prepare_store(rest), theirs.adapter.prepare_store(rest)
            report.expect("rejection", out.accepted == other_out.accepted,
                          f"ours {out}, theirs {other_out}")
            if out.accepted and other_out.accepted:
                report.expect("keys to store", out.keys == other_out.keys,
                              f"{out.keys} vs {other_out.keys}")
                if same_victims:
                    report.expect("victims", out.evicted == other_out.evicted,
                                  f"{out.evicted} vs {other_out.evicted}")
                _rename(report, renaming, slot_of, out, other_out)
                if out.keys:
                    jobs.append((step + shape.delay, False, out.keys, not request.store_fails,
                                 context))
        jobs = _complete_due(jobs, step, [ours, theirs], renaming, slot_of)
        _events_both(ours, theirs, ours_ready, theirs_ready, report)
    _complete_due(jobs, len(requests) + shape.delay, [ours, theirs], renaming, slot_of)
    _events_both(ours, theirs, ours_ready, theirs_ready, report)
    return report


def _rename(report: Agreement, renaming: Renaming, slot_of: dict[Key, int],
            out: StoreOutcome, other_out: StoreOutcome) -> None:
    """Free the victims' slots, then pair each stored key's slot with theirs."""
    for key in out.evicted:
        renaming.drop(slot_of.pop(key))
    for key, mine_slot, their_slot in zip(out.keys, out.slots, other_out.slots, strict=False):
        slot_of[key] = mine_slot
        report.expect("slots up to renaming", renaming.add(mine_slot, their_slot),
                      f"ours {mine_slot} / theirs {their_slot}")


def _complete_due(jobs: list[Job], step: int, targets: Sequence[Target],
                  renaming: Renaming | None = None,
                  slot_of: dict[Key, int] | None = None) -> list[Job]:
    """Deliver the jobs due by ``step`` on every target (a failed store frees its slots
    from the renaming); returns the jobs still to come."""
    for job in [job for job in jobs if job[0] <= step]:
        for target in targets:
            target.complete(job)
        _, is_load, keys, success, _ = job
        if not is_load and not success and renaming is not None and slot_of is not None:
            for key in keys:
                renaming.drop(slot_of.pop(key))
    return [job for job in jobs if job[0] > step]


def _events_both(ours: Target, theirs: Target, ours_ready: set[Key],
                 theirs_ready: set[Key], report: Agreement) -> None:
    ours.replay_events(ours_ready)
    theirs.replay_events(theirs_ready)
    report.expect("events replay to the READY set", ours_ready == theirs_ready,
                  lambda: f"{len(ours_ready ^ theirs_ready)} keys differ")


def check_against_spec(target: Target, requests: Sequence[Request],
                       shape: TraceShape, exact_victims: bool) -> Agreement:
    """Drive the spec and ``target`` in lockstep on a (small) trace; see the module doc."""
    state, report = initial_state(shape.capacity), Agreement()
    jobs: list[Job] = []
    replayed: set[Key] = set()

    def spec_lookup(key: bytes) -> LookupResult:
        nonlocal state
        state, answer = spec.lookup(state, key)
        return answer

    for step, request in enumerate(requests):
        context = target.start(step)
        hits = _lookups(report, request, spec_lookup, target)
        loaded = request.keys[:hits]
        if hits:
            state, load = spec.prepare_load(state, loaded)
            their_slots = target.adapter.prepare_load(loaded).slots
            report.expect("load slots", tuple(load.slots) == their_slots,
                          f"{load.slots} vs {their_slots}")
            jobs.append((step + shape.delay, True, loaded, True, context))
        rest = request.keys[hits:]
        if rest:
            other_out = target.adapter.prepare_store(rest)
            _, exact = spec.prepare_store(state, rest)
            if not other_out.accepted:
                report.expect("rejection", isinstance(exact, StoreRejected),
                              f"spec {exact}, target rejected")
            elif not isinstance(exact, StorePlan):
                report.expect("rejection", False, f"spec {exact}, target accepted")
            else:
                report.checked["rejection"] += 1
                if tuple(exact.evicted) != other_out.evicted:
                    if exact_victims:
                        report.expect("victims", False, f"{exact.evicted} vs {other_out.evicted}")
                    else:
                        report.policy_differences += 1
                try:
                    state, plan = spec.prepare_store(state, rest, victims=list(other_out.evicted),
                                                     slots=list(other_out.slots))
                except ChoiceNotAllowed as illegal:
                    report.expect("allowed victims and free slots", False, str(illegal))
                    return report  # the spec cannot follow the target any further
                if not isinstance(plan, StorePlan):  # the same call without choices was accepted
                    raise RuntimeError(f"the spec rejected a store it had accepted: {plan}")
                report.checked["allowed victims and free slots"] += 1
                report.expect("keys to store", tuple(plan.keys) == other_out.keys,
                              f"{plan.keys} vs {other_out.keys}")
                if plan.keys:
                    jobs.append((step + shape.delay, False, plan.keys, not request.store_fails,
                                 context))
        for job in [job for job in jobs if job[0] <= step]:
            state = _complete_with_spec(state, job)
        jobs = _complete_due(jobs, step, [target])
        state, _ = spec.take_events(state)
        target.replay_events(replayed)
        ready = set(state.keys_in(Phase.READY))
        same = replayed == ready
        report.expect("events replay to the READY set", same,
                      "" if same else f"{len(replayed ^ ready)} keys differ")
    for job in jobs:
        state = _complete_with_spec(state, job)
        target.complete(job)
    return report


def _complete_with_spec(state: Any, job: Job) -> Any:
    _, is_load, keys, success, _ = job
    if is_load:
        state, _ = spec.complete_load(state, keys)
    else:
        state, _ = spec.complete_store(state, keys, success)
    return state
