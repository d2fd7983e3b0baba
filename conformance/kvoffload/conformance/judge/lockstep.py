"""The lockstep driver: one call at a time to the spec and to the target, compared.

This is the suite's core and it does not need Hypothesis: the stateful machine
generates calls and hands them to :meth:`Lockstep.step`; a reproducer replays a saved
trace with :func:`replay`. The first divergence raises :class:`PropertyViolation`
naming one property (see :mod:`.properties`), with the spec-versus-target table.

Three modules share the work: this one drives (makes each call on both sides, in one
place, :meth:`Lockstep.call_target`), :mod:`.compare` decides which property an answer
breaks, :mod:`.explain` words the tables.

The spec takes the target's choices where it leaves freedom: the target's victims (at
``--level any``; the spec rejects victims it does not allow) and the target's slots
(any free slot; the spec then tracks the target's own slot numbers, so "a load reads
the slot its block was stored in" compares the target with itself through the spec).
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import combinations
from typing import NamedTuple

from kvoffload.spec import (
    NO_MISUSE,
    Assumption,
    CacheState,
    Call,
    ChoiceNotAllowed,
    Key,
    LookupResult,
    MisuseError,
    Op,
    Phase,
    Policy,
    StoreRejected,
    check_invariants,
    initial_state,
)
from kvoffload.spec.calls import Output, apply, send

from ..adapter_api import Adapter, EventBatch, Reported
from ..config import CheckConfig
from ..errors import PropertyViolation, TargetLoadError, Untranslatable
from . import compare
from . import explain as ex
from .compare import lookup_agrees
from .explain import call_row, error_text, show
from .guard import CallTimeout, Interrupted, guarded_call, overran, stop_requested

__all__ = ["Lockstep", "TargetAnswer", "construct", "lookup_agrees", "replay", "show"]

DEFERRED = frozenset({Op.LOOKUP, Op.TOUCH, Op.COMPLETE_STORE, Op.COMPLETE_LOAD,
                      Op.RESET_CACHE, Op.TAKE_EVENTS, Op.PREPARE_LOAD, Op.FAIL_NODE})
"""Calls whose answer the spec's next state does not depend on: to a target in a host
(an adapter with ``post``), they are sent without waiting, and their answers compared,
in order, before the next call whose answer the spec needs (a store plan: the target's
victims and slots; a completion naming a load's ticket not read yet), or at the end.
A store the spec rejects is deferred too (the target must reject it: no choice of its
own feeds the spec; about half the stores of a default run), and so is a call the spec
rejects as misuse, with its probes (:meth:`Lockstep._defer_rejection`)."""
WINDOW = 64
"""At most this many calls sent and not yet compared."""

INVARIANT_SPAN = 128
"""The spec's invariants are checked after every call that changes its state while the
state holds fewer than 2 * INVARIANT_SPAN blocks; above, after every ``blocks //
INVARIANT_SPAN``-th such call, and at the end of the drain. Checking them costs time
in proportion to the blocks (28 ms at 5,859), so the cost per call stays bounded on a
trace's production-size tier (``kvoffload check --trace``); random runs' tiers (at
most 1,024 slots) are checked at least every eighth change. A call that changes
nothing (a lookup) needs no check: the state is the one checked before."""

HELD_STATES = 4096
"""At most this many states whose invariants held are kept (by value: see
:func:`holds_invariants`); then the record starts again."""
HELD_BLOCKS = 16
"""Only states of at most this many blocks are kept: the small tiers where most examples
run, and where states recur (a large state is checked when its turn comes, see
:data:`INVARIANT_SPAN`, and rarely recurs)."""

OBSERVATIONS = frozenset({"lookup", "events", "epochs"})
"""Properties whose check only observes an answer: the spec's state moves on the same
whether it agrees or not, so a silenced one can be passed over without ending the run."""

EXPLAINED_BY_EVICTION = frozenset({"lookup", "misuse", "store-plan", "eviction-choice",
                                   "slots", "events", "rejection"})
"""Under ``--eviction background``, the properties a divergence of which a background
eviction can explain: a READY block with no readers that the target no longer holds
reads as MISS (lookup), cannot be loaded (misuse), is stored again (store-plan), needs
no victim (eviction-choice), leaves its slot free (slots), is announced as removed
(events), or changes the counts a rejection reports (rejection: whether a store fits
never changes, as an eviction frees one slot for each slot it adds to the need or takes
from the victims)."""
MAX_EXPLAINED = 8
"""At most this many blocks found gone are tried in every combination (fewest first);
with more, only all of them together."""


class _Pending(NamedTuple):
    """A call sent to a host whose answer is not read yet, with what its comparison
    needs: the spec's state before and after it, its expected answer, and where it
    stands in the trace. (A tuple: one is made per call sent without waiting, and a
    frozen dataclass takes three times as long to make.)"""

    call: Call
    before: CacheState
    after: CacheState
    expected: Output
    length: int
    generated: int
    phase: str
    misuse: MisuseError | None = None
    """A call the spec rejects: sent between its ``probes``, judged as a rejection."""
    probes: tuple[Call, ...] = ()


@dataclass
class TargetAnswer:
    """What one call to the target gave: its value, or the exception it raised."""

    value: object = None
    error: BaseException | None = None


_last_applied: tuple[CacheState | None, Call | None, tuple[CacheState, Output] | None] = (
    None, None, None)
"""The state and call :func:`spec_apply` last answered, and its answer."""


def spec_apply(state: CacheState, call: Call) -> tuple[CacheState, Output]:
    """The spec's ``apply(state, call)`` (its own choices), made once for the same call
    in the same state (the same objects): where ``no-misuse`` is assumed, the generator
    asks first whether the call is misuse (:func:`assumed_away`), then the lockstep
    makes that call in that state (the second ``apply`` was about 5 % of the CPU of an
    in-process check of vllm==0.21.0 under its assumptions). A transition is a pure
    function of its state and call (both immutable), so the answer kept is the one a
    second ``apply`` gives. Raises what ``apply`` raises (nothing is kept then)."""
    global _last_applied
    last = _last_applied
    if last[1] is call and last[0] is state and last[2] is not None:
        return last[2]
    answer = apply(state, call)
    _last_applied = (state, call, answer)
    return answer


_held: dict[CacheState, None] = {}
"""Recent small states whose invariants held, by value (:func:`holds_invariants`)."""


@functools.lru_cache(maxsize=64)
def initial(capacity: int, policy: Policy) -> CacheState:
    """``initial_state(capacity, policy)``, one per tier: every example and every
    replay starts from it, and its derived views are then made once."""
    return initial_state(capacity, policy)


def holds_invariants(state: CacheState) -> None:
    """``check_invariants(state)``, made once for each value among recent small states:
    the invariants are pure predicates of a state's fields, so a state equal to one that
    held them holds them. A check's examples reach the same small states again and again
    (a self-test kill, three hostile targets' checks, a corpus write and a replay: 27,646
    checks of 6,365 distinct states, 77 % of them repeats), and a state's hash and
    equality cost about a tenth of its 15 predicates. Raises what
    :func:`check_invariants` raises (nothing is kept then)."""
    small = len(state.blocks) <= HELD_BLOCKS
    if small and state in _held:
        return
    check_invariants(state)
    if small:
        if len(_held) >= HELD_STATES:
            _held.clear()
        _held[state] = None


def assumed_away(state: CacheState, call: Call, assumptions: Iterable[Assumption]) -> bool:
    """``excluded_by(state, call, assumptions) is not None``, with ``no-misuse`` read
    as the spec reads it (``apply`` raises a misuse error other than
    ``ChoiceNotAllowed``) through :func:`spec_apply`, so that the lockstep making the
    call next does not apply it again (test_conformance_machine.py compares the two on
    every call of a run)."""
    for assumption in assumptions:
        if assumption is NO_MISUSE:
            try:
                spec_apply(state, call)
            except ChoiceNotAllowed:
                continue
            except MisuseError:
                return True
        elif assumption.excludes(state, call):
            return True
    return False


class Lockstep:
    """The spec and one target instance, driven together; raises at the first divergence."""

    def __init__(self, adapter: Adapter, config: CheckConfig,
                 silenced: frozenset[str] = frozenset()) -> None:
        self.adapter = adapter
        self.config = config
        self.silenced = silenced
        """Properties not checked (already failed earlier in the run): a divergence of
        one that only observes (lookup, events, epochs) is passed over; of another, it
        is still raised, and the caller discards this target."""
        self.state: CacheState = initial(config.capacity, config.policy)
        self.subscriber: set[Key] = set()
        self.trace: list[Call] = []
        self.seen: dict[Key, None] = {}
        self.failed = False
        self.phase = "run"
        self.generated = 0
        """How many calls came before the drain (the rest of ``trace`` is the drain)."""
        self.to_target: dict[int, int] = {}
        """Spec ticket -> the target's ticket for the same job (one to one)."""
        self.to_spec: dict[int, int] = {}
        self.pending: deque[_Pending] = deque()
        """Calls sent to a host, answers not yet compared (see :data:`DEFERRED`)."""
        self.background = config.background_eviction
        """``--eviction background`` (read once: every call asks)."""
        self.deferring = callable(getattr(adapter, "post", None)) and not self.background
        """Send calls without waiting for their answers (a host's adapter); never under
        ``--eviction background``, where an eviction observed at one call changes the
        spec's state for every call after it."""
        self.evicted: list[tuple[int, tuple[Key, ...]]] = []
        """Background evictions observed (``--eviction background``): how many calls of
        the trace came before each, and the keys the spec evicted then (D14)."""
        self.times_itself = getattr(adapter, "times_itself", False) is True
        """A host's adapter times each call itself (the judge's timer stays off)."""
        self.timeout = 0 if self.times_itself else config.call_timeout
        """The judge's limit on each call into the target (0: none)."""
        self.unchecked = 0
        """Calls that changed the spec's state since its invariants were last checked."""
        self._probe_calls: tuple[Call, ...] = ()
        """The lookups :meth:`_probes` made last."""
        self._probed: tuple[CacheState | None, dict[Key, Output]] = (None, {})
        """The spec's answers to probes in one state (the state, then by key): a rejected
        call is probed before and after, and a rejection changes nothing, so the same
        lookups are asked of the same state (often over several rejected calls)."""

    # --- driving -------------------------------------------------------------------

    def step(self, call: Call) -> Output | MisuseError:
        """Make ``call`` on both sides and compare; raise PropertyViolation on divergence.

        Returns the spec's output (with the target's choices), or the spec's misuse error
        when both sides rejected the call.
        """
        self.trace.append(call)
        if self.phase == "run":
            self.generated = len(self.trace)
        for key in call.keys:
            self.seen[key] = None
        try:
            before = self.state
            output = self._dispatch(call)
            if self.state is not before:
                self._check_invariants()
        except PropertyViolation as violation:
            if violation.step == 0:  # not stamped yet (a deferred answer's is)
                self._stamp(violation)
            raise
        return output

    def _check_invariants(self, now: bool = False) -> None:
        """The spec's invariants, after this many changes (:data:`INVARIANT_SPAN`)."""
        self.unchecked += 1
        if now or self.unchecked >= len(self.state.blocks) // INVARIANT_SPAN:
            self.unchecked = 0
            holds_invariants(self.state)

    def _stamp(self, violation: PropertyViolation, where: _Pending | None = None) -> None:
        """Record where ``violation`` happened (a failure in the drain is a leak): at the
        last call, or at the deferred call ``where``."""
        self.failed = True
        self.pending.clear()
        length = len(self.trace) if where is None else where.length
        phase = self.phase if where is None else where.phase
        if phase == "drain" and violation.prop == "rejection":
            violation.prop = "liveness"
            violation.message = "after every running copy completed, " + violation.message
        violation.trace = tuple(self.trace[:length])
        violation.generated = self.generated if where is None else where.generated
        violation.capacity = self.config.capacity
        violation.step = length

    def settle(self) -> None:
        """Compare the answers of the calls sent and not yet compared, in order; raise
        the first divergence, stamped at its own call."""
        while self.pending:
            sent = self.pending.popleft()
            try:
                self._compare_later(sent)
            except PropertyViolation as violation:
                self._stamp(violation, sent)
                raise

    def _compare_later(self, sent: _Pending) -> None:
        call = sent.call
        if sent.misuse is not None:
            now, self.state = self.state, sent.before
            try:
                answers = iter(self._collect([*sent.probes, call, *sent.probes]))
                self._judge_rejection(call, sent.misuse, sent.probes, answers)
            finally:
                self.state = now
            return
        try:
            value, error = self.adapter.collect(call.op), None  # type: ignore[attr-defined]  # deferring: a host's adapter
        except CallTimeout:
            raise overran(call, self.config.call_timeout, self.config.call_timeout) from None
        except (Interrupted, KeyboardInterrupt):
            raise
        except Exception as raised:  # the target's answer: an error, a host that failed
            value, error = None, raised
        now, self.state = self.state, sent.before
        try:
            if error is not None:
                compare.unexpected_error(self, call, error, sent.expected)
            if call.op is Op.PREPARE_STORE:  # one the spec rejects (see _dispatch)
                compare.check_store(self, call, sent.expected, value)
            else:
                self._check(call, sent.after, sent.expected, value)
        finally:
            self.state = now

    def drain(self, stale_completions: bool) -> None:
        """Complete every running copy, then store as many new keys as there are free or
        evictable slots: the spec accepts that store, so a target that leaked a slot
        (or a reader) rejects it ("liveness").

        Stale jobs (left running by a reset) are completed too when the configuration
        allows stale completions; otherwise they keep their slots, in the spec as well.
        No call names more keys than ``--max-keys-per-call`` allows (:meth:`_in_calls`).
        """
        self.phase = "drain"
        storing = tuple(b.key for b in sorted(self.state.blocks, key=_by_slot)
                        if b.phase is Phase.STORING)
        self._in_calls(Op.COMPLETE_STORE, storing)
        while readers := tuple(b.key for b in sorted(self.state.blocks, key=_by_slot)
                               if b.readers):
            self._in_calls(Op.COMPLETE_LOAD, readers)
        if stale_completions:
            named = self.adapter.capabilities.completion_tickets
            for orphan in sorted(self.state.orphans, key=lambda o: (o.epoch, o.slot)):
                op = Op.COMPLETE_STORE if orphan.kind.value == "store" else Op.COMPLETE_LOAD
                for ticket in orphan.tickets:
                    self.step(Call(op, (orphan.key,), ticket=ticket if named else None,
                                   job=ticket))
        room = len(self.state.free_slots()) + len(self.state.evictable())
        if room:
            fresh = tuple(k for k in (f"new{i}" for i in range(room + len(self.seen)))
                          if k not in self.seen)[:room]
            self._in_calls(Op.PREPARE_STORE, fresh)
        self.settle()
        self._check_invariants(now=True)
        self.phase = "run"

    def _in_calls(self, op: Op, keys: tuple[Key, ...]) -> None:
        """``op`` on ``keys``, in calls of at most ``--max-keys-per-call`` keys each (a
        target that stores one chunk per call is sent nothing it never gets). Storing
        the keys in turn fills the same free or evictable slots as one call would."""
        size = self.config.max_keys_per_call or len(keys)
        for start in range(0, len(keys), size or 1):
            self.step(Call(op, keys[start:start + size]))

    def call_target(self, call: Call) -> TargetAnswer:
        """Make ``call`` on the target: the one place the suite calls it. A ticket is
        the spec's: the target is told its own ticket for that job (and not the job,
        which is the environment's: ``job`` is left out)."""
        if call.ticket is not None:
            call = Call(call.op, call.keys, call.success,
                        ticket=self.target_ticket(call.ticket))
        return TargetAnswer(*guarded_call(send, self.adapter, call, self.timeout))

    def target_ticket(self, spec_ticket: int) -> int:
        """The target's ticket for the spec's ``spec_ticket``; for a ticket the spec never
        issued, one the target has not issued either."""
        mapped = self.to_target.get(spec_ticket)
        if mapped is not None:
            return mapped
        return max(self.to_spec, default=0) + 1_000_000 + spec_ticket

    def map_ticket(self, spec_ticket: int, target_ticket: int) -> bool:
        """Pair a plan's tickets; False if the target's was issued before (not fresh)."""
        if target_ticket in self.to_spec:
            return False
        self.to_spec[target_ticket] = spec_ticket
        self.to_target[spec_ticket] = target_ticket
        return True

    # --- one call --------------------------------------------------------------------

    def _dispatch(self, call: Call) -> Output | MisuseError:
        if self.background:  # never deferring: one call at a time
            return self._dispatch_observing(call)
        if call.op is Op.PREPARE_STORE:
            planned, exact = spec_apply(self.state, call)  # its own choices: never misuse
            if self.deferring:
                if isinstance(exact, StoreRejected):  # the target has no choice to make:
                    return self._defer(call, planned, exact)  # compared later
                answer = self._batch([call])[0]  # behind the calls pending: one round trip
            else:
                answer = self.call_target(call)
            return self._judge_store(call, exact, answer, planned)
        try:
            new_state, expected = spec_apply(self.state, call)
        except MisuseError as misuse:
            if self.deferring:  # nothing the target answers feeds the spec: judged later
                return self._defer_rejection(call, misuse)
            self._expect_rejection(call, misuse)
            return misuse
        if self.deferring and call.op in DEFERRED:
            return self._defer(call, new_state, expected)
        return self._judge_output(call, new_state, expected, self.call_target(call))

    def _judge_store(self, call: Call, exact: Output, answer: TargetAnswer,
                     planned: CacheState | None = None) -> Output:
        """Judge a store's ``answer`` against the spec's own choices ``exact`` (its next
        state ``planned``, where known)."""
        if answer.error is not None:
            compare.unexpected_error(self, call, answer.error, exact)
        self.state, plan = compare.check_store(self, call, exact, answer.value, planned)
        return plan

    def _judge_output(self, call: Call, new_state: CacheState, expected: Output,
                      answer: TargetAnswer) -> Output:
        """Judge ``answer`` against the spec's ``expected``; the state moves to ``new_state``."""
        if answer.error is not None:
            compare.unexpected_error(self, call, answer.error, expected)
        self._check(call, new_state, expected, answer.value)
        self.state = new_state
        return expected

    # --- background eviction (--eviction background, D14) ------------------------------

    def _dispatch_observing(self, call: Call) -> Output | MisuseError:
        """One call under ``--eviction background``: judged as usual, except that a
        divergence which READY blocks with no readers, gone from the target, explain is
        the spec's environment transition ``evict_in_background`` and not a failure: the
        spec evicts them, then judges the call again (a divergence left then is raised)."""
        try:
            apply(self.state, call)
        except MisuseError as misuse:
            self._expect_rejection(call, misuse)
            return misuse
        answer = self.call_target(call)
        kept = (set(self.subscriber), dict(self.to_target), dict(self.to_spec))
        try:
            return self._judge(call, answer)
        except PropertyViolation as violation:
            if violation.prop not in EXPLAINED_BY_EVICTION:
                raise
            return self._explain(call, answer, violation, kept)

    def _explain(self, call: Call, answer: TargetAnswer, violation: PropertyViolation,
                 kept: tuple[set[Key], dict[int, int], dict[int, int]]
                 ) -> Output | MisuseError:
        """Judge ``call`` again after the fewest background evictions of blocks the
        target no longer holds that make its answer the spec's (those the answer shows
        gone first, then as few as possible of those a lookup finds gone, which may have
        gone just after the call); if none does, raise the divergence seen first, naming
        the blocks tried and what was left after evicting them all."""
        first, rest = self._gone(call, answer)
        if not first and not rest:
            violation.message += self._pinned_note(call, answer)
            raise violation
        origin = self.state
        ordered = sorted(rest, key=repr)
        sizes = range(len(ordered) + 1) if len(ordered) <= MAX_EXPLAINED else (len(ordered),)
        left = violation
        for size in sizes:
            for extra in combinations(ordered, size):
                gone = tuple(sorted(first | frozenset(extra), key=repr))
                if not gone:
                    continue
                self.state, _ = apply(origin, Call(Op.EVICT_IN_BACKGROUND, gone))
                self.subscriber = set(kept[0])  # as before the judgement that failed
                self.to_target, self.to_spec = dict(kept[1]), dict(kept[2])
                try:
                    output = self._judge(call, answer)
                except PropertyViolation as again:
                    left = again
                    continue
                self.evicted.append((len(self.trace) - 1, gone))
                return output
        self.state = origin
        shown = f"{show(tuple(sorted(first, key=repr)))} shown gone by the answer" if first \
            else "none shown gone by the answer"
        violation.message += (
            f" (no background eviction explains it: of the blocks the target no longer "
            f"holds, {shown}, {show(tuple(ordered))} found gone by a lookup after it; "
            f"after evicting all of them: {left.message})")
        raise violation

    def _judge(self, call: Call, answer: TargetAnswer) -> Output | MisuseError:
        """Judge ``answer`` to ``call`` against the spec's state now; move the state on."""
        if call.op is Op.PREPARE_STORE:
            planned, exact = apply(self.state, call)
            return self._judge_store(call, exact, answer, planned)
        try:
            new_state, expected = apply(self.state, call)
        except MisuseError as misuse:  # only after an eviction: the key is gone now
            error = answer.error
            if error is None or not self.adapter.is_rejection(error) or not (
                    self.adapter.capabilities.rejects_with(error, misuse.code)):
                raise PropertyViolation(
                    "misuse", f"{call} breaks a precondition once the blocks gone are "
                    f"evicted and must be rejected; the target "
                    f"{'accepted it' if error is None else 'raised ' + error_text(error)}",
                    [call_row(call), ("answer", f"{type(misuse).__name__}: {misuse}",
                                      "returned normally" if error is None
                                      else error_text(error))]) from None
            return misuse
        return self._judge_output(call, new_state, expected, answer)

    def _gone(self, call: Call, answer: TargetAnswer) -> tuple[frozenset[Key], frozenset[Key]]:
        """The READY blocks with no readers that the target no longer holds: first those
        the answer itself shows gone (a lookup's MISS, a key stored again, a slot handed
        out again), then the others a lookup now finds absent."""
        evictable = self.state.evictable()
        value = answer.value
        if call.op is Op.LOOKUP:
            key = call.keys[0]
            return (frozenset({key}) if key in evictable and value is LookupResult.MISS
                    else frozenset()), frozenset()
        shown: set[Key] = set()
        skip: set[Key] = set()
        if call.op is Op.TAKE_EVENTS and isinstance(value, EventBatch):
            view = set(self.subscriber)  # what the target's events say it holds now
            value.replay_onto(view)
            shown = {k for k in evictable if k not in view}
            skip = set(evictable)
        if call.op is Op.PREPARE_STORE and getattr(value, "accepted", False):
            stored = tuple(getattr(value, "keys", ()) or ())
            slots = set(getattr(value, "slots", ()) or ())
            skip = set(stored) | set(getattr(value, "evicted", ()) or ())
            shown = {k for k in evictable - skip if self.state.table[k].slot in slots} | {
                k for k in evictable if k in stored}
        missing = {k for k in sorted(evictable - skip - shown, key=repr)
                   if self.call_target(Call(Op.LOOKUP, (k,))).value is LookupResult.MISS}
        first = frozenset(shown & evictable)
        return first, frozenset(missing) - first

    def _pinned_note(self, call: Call, answer: TargetAnswer) -> str:
        """Why a block with readers read as gone is still a failure (D14: a lease is a
        pin; one that ends by time before complete_load breaks loads-within-lease)."""
        block = self.state.table.get(call.keys[0]) if call.op is Op.LOOKUP else None
        if block is None or not block.loads or answer.value is not LookupResult.MISS:
            return ""
        return (f" (it has {block.readers} reader(s): background eviction may not take it; "
                "a lease that ended by time before complete_load breaks the scheduler's "
                "obligation loads-within-lease, docs/spec.md D14)")

    def _observe_eviction(self, keys: frozenset[Key]) -> None:
        """The spec's environment transition for ``keys``, observed at this call."""
        fresh = tuple(sorted((k for k in keys if k in self.state.evictable()), key=repr))
        if fresh:
            self.state, _ = apply(self.state, Call(Op.EVICT_IN_BACKGROUND, fresh))
            self.evicted.append((len(self.trace) - 1, fresh))

    def _check(self, call: Call, new_state: CacheState, expected: Output,
               value: object) -> None:
        try:
            compare.CHECKS[call.op](self, call, new_state, expected, value)
        except PropertyViolation as violation:
            if violation.prop not in self.silenced or violation.prop not in OBSERVATIONS:
                raise
            if violation.prop == "events":  # resynchronise the subscriber and go on
                self.subscriber = set(new_state.announced)

    def _defer(self, call: Call, new_state: CacheState, expected: Output) -> Output:
        """Send ``call`` to the host and go on; its answer is compared later."""
        sent = call
        if call.ticket is not None:
            if call.ticket not in self.to_target and self.pending:
                self.settle()  # the plan that issued it may be pending: its ticket first
            sent = replace(call, ticket=self.target_ticket(call.ticket), job=None)
        self.adapter.post(sent)  # type: ignore[attr-defined]  # deferring: a host's adapter
        self.pending.append(_Pending(call, self.state, new_state, expected, len(self.trace),
                                     self.generated, self.phase))
        self.state = new_state
        if len(self.pending) >= WINDOW:
            self.settle()
        if stop_requested():
            raise Interrupted("stopped by Ctrl-C")
        return expected

    def _expect_rejection(self, call: Call, misuse: MisuseError) -> None:
        """The spec rejects ``call``: the target must reject it too and change nothing.

        "Nothing changed" is checked by looking up every key seen so far just before
        and just after the call: the answers must not move (target against itself,
        so a lookup that was already wrong is reported as a lookup violation).
        """
        probes = self._probes()
        answers = (self.call_target(c) for c in [*probes, call, *probes])
        self._judge_rejection(call, misuse, probes, answers)

    def _probes(self) -> tuple[Call, ...]:
        """A lookup of every key seen so far, in the order of their reprs: made again
        only once a key is seen for the first time (``seen`` only grows)."""
        if len(self._probe_calls) != len(self.seen):
            self._probe_calls = tuple(Call(Op.LOOKUP, (key,))
                                      for key in sorted(self.seen, key=repr))
        return self._probe_calls

    def _defer_rejection(self, call: Call, misuse: MisuseError) -> MisuseError:
        """:meth:`_expect_rejection` for a host: the probes, the call and the probes again
        are sent without waiting, and judged in order with the calls pending (the spec's
        state does not move: a rejected call changes nothing)."""
        probes = self._probes()
        self._post([*probes, call, *probes])
        self.pending.append(_Pending(call, self.state, self.state, None, len(self.trace),
                                     self.generated, self.phase, misuse, probes))
        if len(self.pending) >= WINDOW:
            self.settle()
        if stop_requested():
            raise Interrupted("stopped by Ctrl-C")
        return misuse

    def _judge_rejection(self, call: Call, misuse: MisuseError, probes: Sequence[Call],
                         answers: Iterator[TargetAnswer]) -> None:
        """The target's answers to ``probes``, ``call`` and ``probes`` again: it must
        reject ``call`` as the spec does, and its lookups must not move."""
        before = self._probe(call, probes, answers, None)
        error = next(answers).error
        if isinstance(error, Untranslatable) and error.prop == "arguments":  # not an answer
            raise PropertyViolation("arguments", f"{call}: {error.message}",
                                    [call_row(call), ("answer", "rejected", error.message)])
        if error is None or isinstance(error, Untranslatable):
            raise PropertyViolation(
                "misuse", f"{call} breaks a precondition and must be rejected; the target "
                f"accepted it", [call_row(call),
                                 ("answer", f"{type(misuse).__name__}: {misuse}",
                                  "returned normally" if error is None else "returned a value"),
                                 *ex.context(self.state, call.keys)])
        if not self.adapter.is_rejection(error):
            raise compare.crash(self, call, error, f"{type(misuse).__name__} [{misuse.code}]")
        if not self.adapter.capabilities.rejects_with(error, misuse.code):
            code = getattr(error, "code", None)
            raise PropertyViolation(
                "misuse", f"{call} must be rejected with [{misuse.code}]; the target raised "
                f"{type(error).__name__} [{code}]",
                [call_row(call), ("error", f"{type(misuse).__name__} [{misuse.code}]",
                                  f"{type(error).__name__} [{code}]")])
        self._probe(call, probes, answers, before)

    def _batch(self, calls: list[Call]) -> list[TargetAnswer]:
        """Send ``calls`` to the host at once, behind the calls pending, compare the
        answers of the calls pending (:meth:`settle`), then read the answers of ``calls``
        in order (a call that overruns the timeout is a liveness violation). One write
        and one wait: settling first would cost a round trip more (before a store, the
        commonest: about 2,400 in 9,300 steps, issue 22)."""
        self._post(calls)
        self.settle()  # their answers come first on the channel
        return self._collect(calls)

    def _post(self, calls: list[Call]) -> None:
        """Send ``calls`` to the host without waiting, with the target's tickets."""
        if self.pending and any(c.ticket is not None and c.ticket not in self.to_target
                                for c in calls):
            self.settle()  # the plan that issued it may be pending: its ticket first
        last = len(calls) - 1
        for index, call in enumerate(calls):
            sent = call
            if call.ticket is not None:
                sent = replace(call, ticket=self.target_ticket(call.ticket), job=None)
            # one write for the batch, with its last call (when the adapter writes at once)
            self.adapter.post(sent, now=index == last)  # type: ignore[attr-defined]  # deferring: a host's adapter

    def _collect(self, calls: list[Call]) -> list[TargetAnswer]:
        """The answers of ``calls``, sent and next on the channel, in order."""
        answers = []
        for call in calls:
            try:
                answers.append(TargetAnswer(self.adapter.collect(call.op)))  # type: ignore[attr-defined]  # deferring
            except CallTimeout:
                raise overran(call, self.config.call_timeout, self.config.call_timeout) from None
            except (Interrupted, KeyboardInterrupt):
                raise
            except Exception as raised:  # the target's answer: an error, a host that failed
                answers.append(TargetAnswer(error=raised))
        if stop_requested():
            raise Interrupted("stopped by Ctrl-C")
        return answers

    def _probe(self, call: Call, probes: Sequence[Call], answers: Iterator[TargetAnswer],
               before: dict[Key, Reported] | None) -> dict[Key, Reported]:
        """Look up every key seen so far (``probes``, answered by ``answers``). Before the
        call (``before`` is None) the answers must agree with the spec; after it, they
        must equal the answers before."""
        read: dict[Key, Reported] = {}
        for probe in probes:
            key = probe.keys[0]
            state, known = self._probed
            if state is not self.state:  # (a background eviction observed moves it)
                state, known = self._probed = (self.state, {})
            expected = known.get(key)
            if expected is None:
                _, expected = apply(state, probe)
                known[key] = expected
            answer = next(answers)
            if answer.error is not None:
                raise compare.crash(self, probe, answer.error, show(expected))
            got = answer.value
            if not compare.is_reported(got) or not isinstance(expected, LookupResult):
                raise PropertyViolation("lookup", f"{probe} returned {got!r}", [call_row(probe)])
            if self._evicted_meanwhile(key, expected, got):
                pass  # --eviction background: the tier dropped it on its own (D14)
            elif before is None:
                self._probe_agrees(call, probe, expected, got)
            elif before.get(key) is not got:
                raise PropertyViolation(
                    "misuse", f"the rejected call {call} changed the state: lookup({key!r}) "
                    f"answered {show(before.get(key))} before it and {show(got)} after",
                    [call_row(call),
                     (f"lookup({key!r}) before the call", show(expected), show(before.get(key))),
                     (f"lookup({key!r}) after the call", show(expected), show(got)),
                     *ex.context(self.state, (key,))])
            read[key] = got
        return read

    def _evicted_meanwhile(self, key: Key, expected: LookupResult, got: Reported) -> bool:
        """Under ``--eviction background``, a probe that finds a READY block with no
        readers gone is the spec's ``evict_in_background``: observed, not a failure."""
        if not (self.background and expected is LookupResult.HIT
                and got is LookupResult.MISS and key in self.state.evictable()):
            return False
        self._observe_eviction(frozenset({key}))
        return True

    def _probe_agrees(self, call: Call, probe: Call, expected: LookupResult,
                      got: Reported) -> None:
        if "lookup" in self.silenced or lookup_agrees(self.config.profile, expected, got):
            return
        key = probe.keys[0]
        violation = PropertyViolation(
            "lookup", f"lookup({key!r}) must answer {show(expected)} "
            f"({self.config.profile.value} profile); the target answered {show(got)} "
            f"(asked just before {call})",
            [call_row(probe), ("answer", show(expected), show(got)),
             *ex.context(self.state, (key,))])
        violation.probe = True
        raise violation


@dataclass(frozen=True)
class _Construction:
    """A construction of the target, as the guard names it in a liveness message."""

    capacity: int

    def __str__(self) -> str:
        return f"constructing a target of {self.capacity} slot{'s' * (self.capacity != 1)}"


def _build(make: Callable[[int], Adapter], what: _Construction) -> Adapter:
    return make(what.capacity)


def construct(make_adapter: Callable[[int], Adapter], capacity: int, timeout: float) -> Adapter:
    """A fresh target for an example or a replay, built under the call timeout.

    The run has built the target once already (to read its capabilities), so a
    construction that raises now is the target's failure (``crash``), and one that
    overruns the timeout a ``liveness`` failure, each with an empty trace.
    """
    what = _Construction(capacity)
    ended = False
    if getattr(make_adapter, "times_itself", False) is True:
        timeout = 0  # a host's builder times itself (its start-up is not construction)
    try:
        adapter, error = guarded_call(_build, make_adapter, what, timeout)
    except TargetLoadError as load_error:  # the constructor raised (its class and message)
        text = str(load_error)
    except PropertyViolation as violation:  # the constructor overran the timeout
        violation.capacity = capacity
        raise
    else:
        if error is None and adapter is not None:
            return adapter  # type: ignore[return-value]  # what make_adapter built
        text = f"{what} failed: {error_text(error) if error is not None else 'no target'}"
        ended = getattr(type(error), "HOST_ENDED", False) is True
    failed = PropertyViolation(
        "crash", f"{text} ({what}; an earlier construction succeeded)",
        [("call", str(what), str(what)), ("answer", "a target", text)])
    failed.capacity = capacity
    failed.host_ended = ended
    raise failed


def _by_slot(block: object) -> int:
    return int(getattr(block, "slot", 0))


def replay(
    adapter: Adapter, config: CheckConfig, calls: Iterable[Call], drain: bool = False
) -> Lockstep:
    """Replay ``calls`` in lockstep, then (``drain``) complete every running copy and
    check nothing leaked; raises PropertyViolation at the first divergence."""
    run = Lockstep(adapter, config)
    for call in calls:
        run.step(call)
    if drain:
        run.drain(stale_completions=not config.assumes("no-stale-completions"))
    run.settle()
    return run
