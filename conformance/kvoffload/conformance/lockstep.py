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

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from kvoffload.spec import (
    CacheState,
    Call,
    Key,
    LookupResult,
    MisuseError,
    Op,
    Phase,
    check_invariants,
    initial_state,
)
from kvoffload.spec.calls import Output, apply, send

from . import compare
from . import explain as ex
from .adapter_api import Adapter, Reported
from .compare import lookup_agrees
from .config import CheckConfig
from .errors import PropertyViolation, TargetLoadError, Untranslatable
from .explain import call_row, error_text, show
from .guard import CallTimeout, Interrupted, guarded_call, overran, stop_requested

__all__ = ["Lockstep", "TargetAnswer", "construct", "lookup_agrees", "replay", "show"]

DEFERRED = frozenset({Op.LOOKUP, Op.TOUCH, Op.COMPLETE_STORE, Op.COMPLETE_LOAD,
                      Op.RESET_CACHE, Op.TAKE_EVENTS, Op.PREPARE_LOAD})
"""Calls whose answer the spec's next state does not depend on: to a target in a host
(an adapter with ``post``), they are sent without waiting, and their answers compared,
in order, before the next call whose answer the spec needs (a store plan: the target's
victims and slots; a completion naming a load's ticket not read yet), a rejected call,
or at the end."""
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

OBSERVATIONS = frozenset({"lookup", "events", "epochs"})
"""Properties whose check only observes an answer: the spec's state moves on the same
whether it agrees or not, so a silenced one can be passed over without ending the run."""


@dataclass(frozen=True)
class _Pending:
    """A call sent to a host whose answer is not read yet, with what its comparison
    needs: the spec's state before and after it, its expected answer, and where it
    stands in the trace."""

    call: Call
    before: CacheState
    after: CacheState
    expected: Output
    length: int
    generated: int
    phase: str


@dataclass
class TargetAnswer:
    """What one call to the target gave: its value, or the exception it raised."""

    value: object = None
    error: BaseException | None = None


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
        self.state: CacheState = initial_state(config.capacity, config.policy)
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
        self.deferring = callable(getattr(adapter, "post", None))
        self.times_itself = getattr(adapter, "times_itself", False) is True
        """A host's adapter times each call itself (the judge's timer stays off)."""
        self.unchecked = 0
        """Calls that changed the spec's state since its invariants were last checked."""

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
            check_invariants(self.state)

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
        the spec's: the target is told its own ticket for that job."""
        if call.ticket is not None:
            call = replace(call, ticket=self.target_ticket(call.ticket), job=None)
        timeout = 0 if self.times_itself else self.config.call_timeout
        return TargetAnswer(*guarded_call(send, self.adapter, call, timeout))

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
        if self.pending and call.op not in DEFERRED:
            self.settle()
        if call.op is Op.PREPARE_STORE:
            if self.deferring:  # sent first: the host works while the spec chooses
                chosen: list[tuple[CacheState, Output]] = []
                answer = self._batch([call], lambda: chosen.append(apply(self.state, call)))[0]
                _, exact = chosen[0]
            else:
                _, exact = apply(self.state, call)  # the spec's own choices: never misuse
                answer = self.call_target(call)
            if answer.error is not None:
                compare.unexpected_error(self, call, answer.error, exact)
            self.state, plan = compare.check_store(self, call, exact, answer.value)
            return plan
        try:
            new_state, expected = apply(self.state, call)
        except MisuseError as misuse:
            if self.pending:
                self.settle()
            self._expect_rejection(call, misuse)
            return misuse
        if self.deferring and call.op in DEFERRED:
            return self._defer(call, new_state, expected)
        answer = self.call_target(call)
        if answer.error is not None:
            compare.unexpected_error(self, call, answer.error, expected)
        self._check(call, new_state, expected, answer.value)
        self.state = new_state
        return expected

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
        probes = [Call(Op.LOOKUP, (key,)) for key in sorted(self.seen, key=repr)]
        answers: Iterator[TargetAnswer]
        if self.deferring:  # one round trip: the probes, the call, the probes again
            answers = iter(self._batch([*probes, call, *probes]))
        else:
            answers = (self.call_target(c) for c in [*probes, call, *probes])
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

    def _batch(self, calls: list[Call],
                meanwhile: Callable[[], object] | None = None) -> list[TargetAnswer]:
        """Send ``calls`` to the host at once, run ``meanwhile``, then read their answers
        in order (a call that overruns the timeout is a liveness violation)."""
        for call in calls:
            sent = call
            if call.ticket is not None:
                sent = replace(call, ticket=self.target_ticket(call.ticket), job=None)
            self.adapter.post(sent)  # type: ignore[attr-defined]  # deferring: a host's adapter
        if meanwhile is not None:
            self.adapter.flush()  # type: ignore[attr-defined]  # deferring: a host's adapter
            meanwhile()
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

    def _probe(self, call: Call, probes: list[Call], answers: Iterator[TargetAnswer],
               before: dict[Key, Reported] | None) -> dict[Key, Reported]:
        """Look up every key seen so far (``probes``, answered by ``answers``). Before the
        call (``before`` is None) the answers must agree with the spec; after it, they
        must equal the answers before."""
        read: dict[Key, Reported] = {}
        for probe in probes:
            key = probe.keys[0]
            _, expected = apply(self.state, probe)
            answer = next(answers)
            if answer.error is not None:
                raise compare.crash(self, probe, answer.error, show(expected))
            got = answer.value
            if not compare.is_reported(got) or not isinstance(expected, LookupResult):
                raise PropertyViolation("lookup", f"{probe} returned {got!r}", [call_row(probe)])
            if before is None:
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
