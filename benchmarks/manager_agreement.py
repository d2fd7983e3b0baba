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

from kvoffload.impl import OffloadManager
from kvoffload.spec import ChoiceNotAllowed, StorePlan, StoreRejected, initial_state
from kvoffload.spec import transitions as spec
from kvoffload.spec.vocabulary import LookupResult, Phase
from manager_trace import Request, TraceShape

_NAMES = {"MISS": LookupResult.MISS, "HIT": LookupResult.HIT,
          "HIT_PENDING": LookupResult.PENDING, "PENDING": LookupResult.PENDING}


def answer_of(value: object) -> LookupResult | str:
    """A vLLM lookup answer as the spec's LookupResult (``True`` / ``None`` / ``False``
    or an enum member named MISS / HIT / HIT_PENDING); anything else is returned as text."""
    if value is True:
        return LookupResult.HIT
    if value is False:
        return LookupResult.MISS
    if value is None:
        return LookupResult.PENDING
    return _NAMES.get(getattr(value, "name", ""), repr(value))


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


class VllmSide:
    """A vLLM manager (0.19 on) behind plain calls; ``contexts`` gives each request's."""

    def __init__(self, manager: Any, contexts: Sequence[Any]) -> None:
        self.manager = manager
        self.contexts = contexts
        self.context: Any = None

    def start(self, step: int) -> None:
        self.context = self.contexts[step]
        self.manager.on_new_request(self.context)

    def lookup(self, key: bytes) -> LookupResult | str:
        return answer_of(self.manager.lookup(key, self.context))

    def prepare_load(self, keys: Sequence[bytes]) -> list[int]:
        return [int(b) for b in self.manager.prepare_load(keys, self.context).block_ids]

    def complete_load(self, keys: Sequence[bytes], context: Any) -> None:
        self.manager.complete_load(keys, context)

    def prepare_store(self, keys: Sequence[bytes]) -> tuple[list[bytes], list[int],
                                                             list[bytes]] | None:
        out = self.manager.prepare_store(keys, self.context)
        if out is None:
            return None
        return (list(out.keys_to_store), [int(b) for b in out.store_spec.block_ids],
                list(out.evicted_keys))

    def complete_store(self, keys: Sequence[bytes], success: bool, context: Any) -> None:
        self.manager.complete_store(keys, context, success)

    def events(self, ready: set[bytes]) -> None:
        for event in self.manager.take_events():
            (ready.difference_update if event.removed else ready.update)(event.keys)


class NativeSide:
    """``OffloadManager`` behind the same plain calls as :class:`VllmSide`."""

    def __init__(self, manager: OffloadManager) -> None:
        self.manager = manager
        self.context: Any = None

    def start(self, step: int) -> None:
        self.context = step

    def lookup(self, key: bytes) -> LookupResult | str:
        return self.manager.lookup(key)

    def prepare_load(self, keys: Sequence[bytes]) -> list[int]:
        return list(self.manager.prepare_load(keys).slots)

    def complete_load(self, keys: Sequence[bytes], context: Any) -> None:
        self.manager.complete_load(keys)

    def prepare_store(self, keys: Sequence[bytes]) -> tuple[list[bytes], list[int],
                                                             list[bytes]] | None:
        out = self.manager.prepare_store(keys)
        if isinstance(out, StoreRejected):
            return None
        return list(out.keys), list(out.slots), list(out.evicted)

    def complete_store(self, keys: Sequence[bytes], success: bool, context: Any) -> None:
        self.manager.complete_store(keys, success)

    def events(self, ready: set[bytes]) -> None:
        taken = self.manager.take_events()
        ready.difference_update(taken.removed)
        ready.update(taken.stored)


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


def lockstep_with_vllm(theirs: VllmSide, requests: Sequence[Request], shape: TraceShape,
                       same_victims: bool) -> Agreement:
    """Run ``OffloadManager`` and ``theirs`` side by side on the trace (see the module doc)."""
    ours, report, renaming = OffloadManager(shape.capacity), Agreement(), Renaming()
    slot_of: dict[bytes, int] = {}
    jobs: list[tuple[int, bool, Sequence[bytes], bool, Any]] = []
    ours_ready: set[bytes] = set()
    theirs_ready: set[bytes] = set()
    for step, request in enumerate(requests):
        theirs.start(step)
        hits = 0
        for key in request.keys:
            mine, other = ours.lookup(key), theirs.lookup(key)
            if mine != other:
                report.expect("lookup", False, f"{key!r}: {mine} vs {other}")
            else:
                report.checked["lookup"] += 1
            if mine is not LookupResult.HIT:
                break
            hits += 1
        loaded = request.keys[:hits]
        if hits:
            plan = ours.prepare_load(loaded)
            their_slots = theirs.prepare_load(loaded)
            mapped = [renaming.theirs.get(s) for s in plan.slots]
            report.expect("load slots", mapped == their_slots, f"{mapped} vs {their_slots}")
            jobs.append((step + shape.delay, True, loaded, True, theirs.context))
        rest = request.keys[hits:]
        if rest:
            out = ours.prepare_store(rest)
            other_out = theirs.prepare_store(rest)
            accepted = isinstance(out, StorePlan)
            report.expect("rejection", accepted == (other_out is not None),
                          f"ours {out}, theirs {other_out}")
            if isinstance(out, StorePlan) and other_out is not None:
                keys, slots, evicted = other_out
                if list(out.keys) != keys:
                    report.expect("keys to store", False, f"{out.keys} vs {keys}")
                else:
                    report.checked["keys to store"] += 1
                if same_victims and list(out.evicted) != evicted:
                    report.expect("victims", False, f"{out.evicted} vs {evicted}")
                elif same_victims:
                    report.checked["victims"] += 1
                for key in out.evicted:
                    renaming.drop(slot_of.pop(key))
                for key, mine_slot, their_slot in zip(out.keys, out.slots, slots, strict=False):
                    slot_of[key] = mine_slot
                    if not renaming.add(mine_slot, their_slot):
                        report.expect("slots up to renaming", False,
                                      f"ours {mine_slot} / theirs {their_slot}")
                    else:
                        report.checked["slots up to renaming"] += 1
                if out.keys:
                    jobs.append((step + shape.delay, False, out.keys, not request.store_fails,
                                 theirs.context))
        due = [job for job in jobs if job[0] <= step]
        jobs = [job for job in jobs if job[0] > step]
        for job in due:
            _complete_both(ours, theirs, job, renaming, slot_of)
        _events_both(ours, theirs, ours_ready, theirs_ready, report)
    for job in jobs:
        _complete_both(ours, theirs, job, renaming, slot_of)
    _events_both(ours, theirs, ours_ready, theirs_ready, report)
    return report


def _complete_both(ours: OffloadManager, theirs: VllmSide,
                   job: tuple[int, bool, Sequence[bytes], bool, Any],
                   renaming: Renaming, slot_of: dict[bytes, int]) -> None:
    _, is_load, keys, success, context = job
    if is_load:
        ours.complete_load(keys)
        theirs.complete_load(keys, context)
        return
    ours.complete_store(keys, success)
    theirs.complete_store(keys, success, context)
    if not success:
        for key in keys:
            renaming.drop(slot_of.pop(key))


def _events_both(ours: OffloadManager, theirs: VllmSide, ours_ready: set[bytes],
                 theirs_ready: set[bytes], report: Agreement) -> None:
    taken = ours.take_events()
    ours_ready.difference_update(taken.removed)
    ours_ready.update(taken.stored)
    theirs.events(theirs_ready)
    report.expect("events replay to the READY set", ours_ready == theirs_ready,
                  lambda: f"{len(ours_ready ^ theirs_ready)} keys differ")


def check_against_spec(target: VllmSide | NativeSide, requests: Sequence[Request],
                       shape: TraceShape, exact_victims: bool) -> Agreement:
    """Drive the spec and ``target`` in lockstep on a (small) trace; see the module doc."""
    state, report = initial_state(shape.capacity), Agreement()
    jobs: list[tuple[int, bool, Sequence[bytes], bool, Any]] = []
    replayed: set[bytes] = set()
    for step, request in enumerate(requests):
        target.start(step)
        hits = 0
        for key in request.keys:
            state, mine = spec.lookup(state, key)
            other = target.lookup(key)
            if mine != other:
                report.expect("lookup", False, f"{key!r}: {mine} vs {other}")
            else:
                report.checked["lookup"] += 1
            if mine is not LookupResult.HIT:
                break
            hits += 1
        loaded = request.keys[:hits]
        if hits:
            state, plan = spec.prepare_load(state, loaded)
            their_slots = target.prepare_load(loaded)
            report.expect("load slots", list(plan.slots) == their_slots,
                          f"{plan.slots} vs {their_slots}")
            jobs.append((step + shape.delay, True, loaded, True, target.context))
        rest = request.keys[hits:]
        if rest:
            other_out = target.prepare_store(rest)
            _, exact = spec.prepare_store(state, rest)
            if other_out is None:
                report.expect("rejection", isinstance(exact, StoreRejected),
                              f"spec {exact}, target rejected")
            elif not isinstance(exact, StorePlan):
                report.expect("rejection", False, f"spec {exact}, target accepted")
            else:
                report.checked["rejection"] += 1
                keys, slots, evicted = other_out
                if list(exact.evicted) != evicted:
                    if exact_victims:
                        report.expect("victims", False, f"{exact.evicted} vs {evicted}")
                    else:
                        report.policy_differences += 1
                try:
                    state, plan = spec.prepare_store(state, rest, victims=evicted, slots=slots)
                except ChoiceNotAllowed as illegal:
                    report.expect("allowed victims and free slots", False, str(illegal))
                    return report  # the spec cannot follow the target any further
                report.checked["allowed victims and free slots"] += 1
                report.expect("keys to store", list(plan.keys) == keys, f"{plan.keys} vs {keys}")
                if plan.keys:
                    jobs.append((step + shape.delay, False, plan.keys, not request.store_fails,
                                 target.context))
        due = [job for job in jobs if job[0] <= step]
        jobs = [job for job in jobs if job[0] > step]
        for job in due:
            state = _complete_with_spec(state, target, job)
        state, _ = spec.take_events(state)
        target.events(replayed)
        ready = set(state.keys_in(Phase.READY))
        same = replayed == ready
        report.expect("events replay to the READY set", same,
                      "" if same else f"{len(replayed ^ ready)} keys differ")
    for job in jobs:
        state = _complete_with_spec(state, target, job)
    return report


def _complete_with_spec(state: Any, target: VllmSide | NativeSide,
                        job: tuple[int, bool, Sequence[bytes], bool, Any]) -> Any:
    _, is_load, keys, success, context = job
    if is_load:
        state, _ = spec.complete_load(state, keys)
        target.complete_load(keys, context)
    else:
        state, _ = spec.complete_store(state, keys, success)
        target.complete_store(keys, success, context)
    return state
