"""The environment: the scheduler's calls and the copy jobs workers run.

A checked node is the spec's state plus the jobs still outstanding. A store job
``(STORE, key, epoch, slot)`` is created by an accepted ``prepare_store`` (one per
planned key), a load job ``(LOAD, key, epoch, slot)`` by ``prepare_load`` (one per
distinct key of the call). The environment may, in any node: look keys up, touch,
prepare stores and loads, complete any outstanding job (success or failure for
stores), take events, reset (within the bound), and make mistakes: misuse calls the
spec must reject, and completions with no job behind them, which it must ignore.

Completions come in two forms (:class:`Form`): vLLM's (no job identity: the manager is
told ``epoch=None``; ``Call.origin`` records which job really finished) and the
reset-safe one (the job's epoch is passed). :meth:`Environment.step` runs one call on
the model under check and checks what that single call did against the rules the spec
states (D1-D8 of ``docs/spec.md``), computed here from the state before the call.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import permutations
from typing import cast

from kvoffload.spec import (
    Block,
    CacheState,
    Call,
    Completion,
    Events,
    KvOffloadError,
    LoadPlan,
    LookupResult,
    MisuseError,
    NotReadable,
    Op,
    Output,
    Phase,
    StorePlan,
    StoreRejected,
    UnknownEpoch,
    UnmatchedCompleteLoad,
    unique,
)

from .bounds import Bounds
from .model import Model

STORE, LOAD = "store", "load"
Job = tuple[str, str, int, int]
"""``(kind, key, epoch, slot)``: one copy a worker is running."""


class Form(enum.Enum):
    """How the environment reports a finished copy to the manager."""

    SAFE = "reset-safe"
    """Completions name the epoch their job started in."""
    VLLM = "vllm"
    """Completions carry no job identity (``epoch=None``), as in vLLM."""


@dataclass(frozen=True)
class Node:
    """One checked state: the model's state and the jobs outstanding (sorted, with repeats)."""

    state: CacheState
    jobs: tuple[Job, ...] = ()


class Expect(enum.Enum):
    """What the environment knows a call must do, before the model runs it."""

    ACCEPT = "accept"
    """A legitimate call: it must not raise a misuse error."""
    MISUSE = "misuse"
    """A broken precondition: it must raise the error the action names."""
    IGNORED = "ignored"
    """A completion with no job behind it: it must report the keys ignored, change nothing."""


@dataclass(frozen=True)
class Action:
    """A call the environment makes, with the jobs it completes and what it must do."""

    call: Call
    jobs: tuple[Job, ...] = ()
    expect: Expect = Expect.ACCEPT
    error: type[MisuseError] | None = None
    slots: tuple[int, ...] | None = None
    """The free slots a ``prepare_store`` hands out; None: the lowest (see
    :func:`jobs_on_free_slots` for when the choice is made explicit)."""

    def __str__(self) -> str:
        if self.slots is None:
            return str(self.call)
        return f"{self.call}  # into slot(s) {', '.join(map(str, self.slots))}"

    @property
    def delivers_jobs(self) -> bool:
        """Is this the completion of outstanding jobs (an edge the liveness check may use)?"""
        return bool(self.jobs)


@dataclass(frozen=True)
class Outcome:
    """What one call did: the next node (None when it raised), its output, a broken rule."""

    node: Node | None
    output: Output | BaseException
    violation: tuple[str, str] | None = None


_LOOKUP = {Phase.ABSENT: LookupResult.MISS, Phase.STORING: LookupResult.PENDING,
           Phase.READY: LookupResult.HIT}


def jobs_on_free_slots(node: Node) -> frozenset[int]:
    """Slots the state counts as free that a running copy still uses.

    Only a reset that does not hold slots back, or a vLLM-form completion attributed to
    another copy, leaves such slots. While there are none, free slots are
    interchangeable and the lowest one stands for all; once there are, which free slot a
    store gets matters, so the environment tries every choice the spec allows ("any free
    slot", ``docs/native-api.md``).
    """
    s = node.state
    if not node.jobs:
        return frozenset()
    return frozenset(j[3] for j in node.jobs) - s.used_slots()


def _name(key: object) -> str:
    return cast(str, key)


def _fields(state: CacheState) -> tuple[object, ...]:
    return (state.capacity, state.policy, state.recency, state.blocks, state.orphans,
            state.epoch, state.announced)


class Environment:
    """The calls the environment may make in a node, and the checks on each call."""

    def __init__(self, model: Model, bounds: Bounds, form: Form) -> None:
        self.model = model
        self.bounds = bounds
        self.form = form
        self._sequences = bounds.sequences()
        self._index = {k: i for i, k in enumerate(bounds.keys)}
        self._renamed: dict[tuple[Sequence[int], tuple[object, ...]], object] = {}

    # --- the call alphabet ------------------------------------------------------

    def actions(self, node: Node, classes: Sequence[int] | None) -> Iterator[Action]:
        """Every call the environment may make in ``node``, up to symmetry.

        ``classes`` gives each key of the universe (in order) its symmetry class: keys
        of one class are interchangeable in ``node``, so of two calls that differ only
        by such a renaming one is enough. None turns the reduction off.
        """
        if classes is None or len(set(classes)) == len(classes):
            yield from self._all_actions(node)
            return
        seen: set[object] = set()
        for action in self._all_actions(node):
            reduced = self._reduction_key(node, action, classes)
            if reduced not in seen:
                seen.add(reduced)
                yield action

    def _all_actions(self, node: Node) -> Iterator[Action]:
        s = node.state
        table = s.table
        keys = self.bounds.keys
        for key in keys:
            yield Action(Call(Op.LOOKUP, (key,)))
        for seq in self._sequences:
            yield Action(Call(Op.TOUCH, seq))
        dangling = jobs_on_free_slots(node)
        for seq in self._sequences:
            call = Call(Op.PREPARE_STORE, seq)
            if dangling:
                yield from self._slot_choices(s, call, dangling)
            else:
                yield Action(call)
        for seq in self._sequences:
            blocks = [table.get(k) for k in seq]
            if any(b is None or b.phase is not Phase.READY for b in blocks):
                yield Action(Call(Op.PREPARE_LOAD, seq), expect=Expect.MISUSE, error=NotReadable)
            elif all(cast(Block, b).readers < self.bounds.readers for b in blocks):
                yield Action(Call(Op.PREPARE_LOAD, seq))
        yield from self._completions(node, STORE)
        yield from self._completions(node, LOAD)
        yield from self._spurious(node)
        if s.epoch < self.bounds.resets:
            yield Action(Call(Op.RESET_CACHE))
        yield Action(Call(Op.TAKE_EVENTS))

    def _slot_choices(self, s: CacheState, call: Call, dangling: frozenset[int]
                      ) -> Iterator[Action]:
        """``call`` with every distinct choice of free slots (those no copy uses are
        interchangeable, so one order of them is enough)."""
        try:
            _, plan = self.model.apply(s, call)
        except KvOffloadError:
            plan = None
        if not isinstance(plan, StorePlan) or not plan.keys:
            yield Action(call)
            return
        free = sorted(set(s.free_slots()) | {s.table[k].slot for k in plan.evicted})
        seen: set[tuple[object, ...]] = set()
        for choice in permutations(free, len(plan.keys)):
            shape = tuple(slot if slot in dangling else -1 - choice.index(slot)
                          for slot in choice)
            if shape not in seen:
                seen.add(shape)
                yield Action(call, slots=choice)

    def _completion_call(self, op: Op, keys: tuple[str, ...], epoch: int, current: int,
                         success: bool = True) -> Call:
        if self.form is Form.SAFE:
            return Call(op, keys, success=success, epoch=epoch)
        return Call(op, keys, success=success, origin=None if epoch == current else epoch)

    def _completions(self, node: Node, kind: str) -> Iterator[Action]:
        """Completions of outstanding jobs: one call may finish up to ``width`` jobs of
        distinct keys and one epoch; a lone job may also be named twice (duplicates)."""
        op = Op.COMPLETE_STORE if kind == STORE else Op.COMPLETE_LOAD
        jobs = sorted(set(j for j in node.jobs if j[0] == kind))
        current = node.state.epoch
        outcomes = (True, False) if kind == STORE else (True,)
        for n in range(1, self.bounds.width + 1):
            for group in permutations(jobs, n):
                if len({j[1] for j in group}) < n or len({j[2] for j in group}) > 1:
                    continue
                keys = tuple(j[1] for j in group)
                for success in outcomes:
                    call = self._completion_call(op, keys, group[0][2], current, success)
                    yield Action(call, jobs=group)
        if self.bounds.duplicates and self.bounds.width >= 2:
            for job in jobs:
                for success in outcomes:
                    call = self._completion_call(op, (job[1], job[1]), job[2], current, success)
                    yield Action(call, jobs=(job,))

    def _spurious(self, node: Node) -> Iterator[Action]:
        """Completions with no job behind them, and completions of epochs not yet begun."""
        s = node.state
        safe = self.form is Form.SAFE
        for kind, op in ((STORE, Op.COMPLETE_STORE), (LOAD, Op.COMPLETE_LOAD)):
            busy = {j[1] for j in node.jobs if j[0] == kind and (not safe or j[2] == s.epoch)}
            for key in self.bounds.keys:
                if key in busy:
                    continue
                epoch = s.epoch if safe else None
                if kind == STORE:
                    for success in (True, False):
                        yield Action(Call(op, (key,), success=success, epoch=epoch),
                                     expect=Expect.IGNORED)
                else:
                    yield Action(Call(op, (key,), epoch=epoch), expect=Expect.MISUSE,
                                 error=UnmatchedCompleteLoad)
            if safe:
                for key in self.bounds.keys:
                    yield Action(Call(op, (key,), epoch=s.epoch + 1), expect=Expect.MISUSE,
                                 error=UnknownEpoch)

    def _reduction_key(self, node: Node, action: Action, classes: Sequence[int]) -> object:
        call = action.call
        canon = self._renamed.get((classes, call.keys))
        if canon is None:
            index = self._index
            assigned: dict[str, int] = {}
            used: dict[int, int] = {}
            names: list[tuple[int, int]] = []
            for key in call.keys:
                k = _name(key)
                if k not in assigned:
                    cls = classes[index[k]]
                    assigned[k] = used.get(cls, 0)
                    used[cls] = assigned[k] + 1
                names.append((classes[index[k]], assigned[k]))
            canon = self._renamed[classes, call.keys] = tuple(names)
        jobs = tuple(self._job_relation(node, j) for j in action.jobs)
        return (call.op, canon, call.success, call.epoch, call.origin, jobs, action.expect,
                action.slots)

    @staticmethod
    def _job_relation(node: Node, job: Job) -> object:
        """A job as seen from its key: which of the key's slots it uses, named without
        slot numbers when it runs on the key's live block or on one of its orphans."""
        kind, key, epoch, slot = job
        s = node.state
        block = s.table.get(key)
        if block is not None and block.slot == slot:
            return (kind, epoch, "block")
        for orphan in s.orphans:
            if orphan.key == key and orphan.slot == slot:
                return (kind, epoch, "orphan", orphan.kind.value, orphan.epoch)
        return (kind, epoch, "slot", slot)

    # --- one call ---------------------------------------------------------------

    def step(self, node: Node, action: Action) -> Outcome:
        """Run ``action`` on ``node`` with the model; check the call's own rules."""
        s, call = node.state, action.call
        before = _fields(s) if action.expect is Expect.MISUSE else None
        try:
            new, out = self.model.apply(s, call, action.slots)
        except MisuseError as error:
            if before is not None and before != _fields(s):
                return Outcome(None, error, ("misuse_changes_nothing",
                                             f"{call} raised {error} but changed the state"))
            if action.expect is Expect.MISUSE and action.error is not None \
                    and isinstance(error, action.error):
                return Outcome(None, error)
            if action.expect is Expect.MISUSE:
                return Outcome(None, error, ("misuse_rejected", f"{call} must raise "
                               f"{_error_name(action)}; it raised {error!r}"))
            return Outcome(None, error, ("legit_calls_accepted",
                                         f"{call} is a legitimate call but raised {error}"))
        except KvOffloadError as error:
            return Outcome(None, error, ("no_internal_errors", f"{call} raised {error!r}"))
        if action.expect is Expect.MISUSE:
            return Outcome(Node(new, node.jobs), out, ("misuse_rejected",
                           f"{call} must raise {_error_name(action)}; it returned {out!r}"))
        jobs, broken = self._effects(node, new, action, out)
        next_node = node if new is s and jobs is node.jobs else Node(new, jobs)
        return Outcome(next_node, out, broken)

    def _effects(self, node: Node, new: CacheState, action: Action, out: Output
                 ) -> tuple[tuple[Job, ...], tuple[str, str] | None]:
        """The jobs after the call, and the first rule of the call it broke."""
        s, call, op = node.state, action.call, action.call.op
        if op is Op.LOOKUP:
            return node.jobs, _check_lookup(s, new, call, out)
        if op is Op.TOUCH:
            return node.jobs, _check_touch(s, new, call)
        if op is Op.PREPARE_STORE:
            broken = _check_prepare_store(s, new, call, out)
            if isinstance(out, StorePlan):
                started = [(STORE, _name(k), out.epoch, slot)
                           for k, slot in zip(out.keys, out.slots, strict=False)]
                return _with_jobs(node.jobs, started, ()), broken
            return node.jobs, broken
        if op is Op.PREPARE_LOAD:
            broken = _check_prepare_load(s, call, out)
            started = [(LOAD, _name(k), s.epoch, s.table[k].slot) for k in unique(call.keys)]
            return _with_jobs(node.jobs, started, ()), broken
        if op in (Op.COMPLETE_STORE, Op.COMPLETE_LOAD):
            if action.expect is Expect.IGNORED:
                return node.jobs, _check_ignored(s, new, call, out)
            broken = self._check_attributed(s, action, out)
            return _with_jobs(node.jobs, (), action.jobs), broken
        if op is Op.RESET_CACHE:
            return node.jobs, _check_reset(s, new, out)
        return node.jobs, _check_events(s, new, out)

    def _check_attributed(self, s: CacheState, action: Action, out: Output
                          ) -> tuple[str, str] | None:
        """A job's completion finishes a live block or releases a copy a reset left
        running, never nothing; in the reset-safe form, exactly the job's own one."""
        if not isinstance(out, Completion):
            return ("completions_attributed", f"{action.call} returned {out!r}")
        for _, key, epoch, _ in action.jobs:
            if self.form is Form.SAFE:
                found = out.applied if epoch == s.epoch else out.released
                if key not in found:
                    where = "applied" if epoch == s.epoch else "released"
                    return ("completions_attributed", f"{action.call}: the job of epoch "
                            f"{epoch} for {key!r} must be {where}; got {out}")
            elif key not in out.applied and key not in out.released:
                return ("completions_attributed",
                        f"{action.call}: the completion of a running copy of {key!r} was "
                        f"ignored; got {out}")
        return None


def _error_name(action: Action) -> str:
    return action.error.__name__ if action.error is not None else "a misuse error"


def _with_jobs(jobs: tuple[Job, ...], started: Sequence[Job], finished: Sequence[Job]
               ) -> tuple[Job, ...]:
    if not started and not finished:
        return jobs
    out = list(jobs)
    for job in finished:
        out.remove(job)
    out.extend(started)
    out.sort()
    return tuple(out)


def _check_lookup(s: CacheState, new: CacheState, call: Call, out: Output
                  ) -> tuple[str, str] | None:
    expected = _LOOKUP[s.phase(call.keys[0])]
    if out is not expected:
        return ("lookup_reports_phase", f"{call} returned {out}; the key is "
                f"{s.phase(call.keys[0]).value}, so it must return {expected}")
    if new is not s and new != s:
        return ("lookup_is_pure", f"{call} changed the state")
    return None


def _check_touch(s: CacheState, new: CacheState, call: Call) -> tuple[str, str] | None:
    if (new.blocks, new.orphans, new.epoch, new.announced) != (
            s.blocks, s.orphans, s.epoch, s.announced):
        return ("touch_changes_only_recency", f"{call} changed more than the eviction order")
    return None


def _check_prepare_store(s: CacheState, new: CacheState, call: Call, out: Output
                         ) -> tuple[str, str] | None:
    """D3 and D4, computed from the state before the call."""
    keys = unique(call.keys)
    fresh = tuple(k for k in keys if k not in s.table)
    free = s.free_slots()
    candidates = s.evictable() - frozenset(keys)
    unavoidable = len(fresh) > len(free) + len(candidates)
    if isinstance(out, StoreRejected):
        if not unavoidable:
            return ("rejection_only_when_unavoidable", f"{call} was rejected although "
                    f"{len(free)} free slot(s) and {len(candidates)} evictable block(s) "
                    f"cover the {len(fresh)} new key(s)")
        if new != s:
            return ("rejection_is_atomic", f"{call} was rejected but changed the state")
        if out != StoreRejected(len(fresh), len(free) + len(candidates)):
            return ("rejection_only_when_unavoidable", f"{call} reported {out}")
        return None
    if not isinstance(out, StorePlan):
        return ("store_plan_is_exact", f"{call} returned {out!r}")
    if unavoidable:
        return ("rejection_only_when_unavoidable", f"{call} was accepted although only "
                f"{len(free) + len(candidates)} slot(s) could be had for {len(fresh)}")
    if not set(out.evicted) <= candidates or len(set(out.evicted)) != len(out.evicted):
        return ("evicts_only_evictable", f"{call} evicted {list(out.evicted)}; only READY "
                f"blocks with no readers, not named in the call, may go: "
                f"{sorted(map(str, candidates))}")
    if len(out.evicted) != max(0, len(fresh) - len(free)):
        return ("evicts_only_as_needed", f"{call} evicted {len(out.evicted)} block(s) for "
                f"{len(fresh)} new key(s) and {len(free)} free slot(s)")
    freed = {s.table[k].slot for k in out.evicted}
    if len(set(out.slots)) != len(out.slots) or not set(out.slots) <= set(free) | freed:
        return ("store_slots_were_free", f"{call} planned slots {list(out.slots)}; free were "
                f"{list(free)} plus {sorted(freed)} from evictions")
    if out.keys != fresh or out.epoch != s.epoch or len(out.slots) != len(fresh) or any(
            new.table.get(k) != Block(k, Phase.STORING, slot)
            for k, slot in zip(out.keys, out.slots, strict=False)):
        return ("store_plan_is_exact", f"{call} returned {out}; the new keys are "
                f"{list(fresh)}, each to be STORING in its planned slot")
    return None


def _check_prepare_load(s: CacheState, call: Call, out: Output) -> tuple[str, str] | None:
    keys = unique(call.keys)
    if not isinstance(out, LoadPlan) or out != LoadPlan(
            keys, tuple(s.table[k].slot for k in keys), s.epoch):
        return ("load_plan_is_exact", f"{call} returned {out!r}; it must name each key "
                f"once, {list(keys)}, with its slot and the current epoch")
    return None


def _check_ignored(s: CacheState, new: CacheState, call: Call, out: Output
                   ) -> tuple[str, str] | None:
    if out != Completion(ignored=unique(call.keys)) or new != s:
        return ("ignored_completions_change_nothing", f"{call} has no job behind it; it "
                f"must be ignored and change nothing; got {out!r}")
    return None


def _check_reset(s: CacheState, new: CacheState, out: Output) -> tuple[str, str] | None:
    if out != s.epoch + 1 or new.epoch != s.epoch + 1 or new.blocks:
        return ("reset_starts_next_epoch", f"reset_cache() returned {out!r} and left "
                f"{len(new.blocks)} live block(s); it must drop every block and start "
                f"epoch {s.epoch + 1}")
    return None


def _check_events(s: CacheState, new: CacheState, out: Output) -> tuple[str, str] | None:
    """D8: a subscriber that replays the events sees exactly the READY set."""
    ready = s.keys_in(Phase.READY)
    if not isinstance(out, Events):
        return ("events_replay_to_ready_set", f"take_events() returned {out!r}")
    seen = (s.announced | out.stored) - out.removed
    if seen != ready or out.stored & out.removed or new.announced != ready:
        return ("events_replay_to_ready_set", f"take_events() returned {out}; replayed on "
                f"{sorted(map(str, s.announced))} it gives {sorted(map(str, seen))}, but "
                f"READY is {sorted(map(str, ready))}")
    return None
