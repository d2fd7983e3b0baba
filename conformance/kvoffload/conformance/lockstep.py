"""The lockstep driver: one call at a time to the spec and to the target, compared.

This is the suite's core and it does not need Hypothesis: the stateful machine
generates calls and hands them to :meth:`Lockstep.step`; a reproducer replays a saved
trace with :func:`replay`. The first divergence raises :class:`PropertyViolation`
naming one property (see :mod:`.properties`), with the spec-versus-target table.

The spec takes the target's choices where it leaves freedom: the target's victims (at
``--level any``; the spec rejects victims it does not allow) and the target's slots
(any free slot; the spec then tracks the target's own slot numbers, so "a load reads
the slot its block was stored in" compares the target with itself through the spec).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeGuard

from kvoffload.spec import (
    CacheState,
    Call,
    ChoiceNotAllowed,
    Completion,
    Events,
    Key,
    LookupResult,
    LruOrder,
    MisuseError,
    Op,
    Phase,
    StorePlan,
    StoreRejected,
    check_invariants,
    initial_state,
)
from kvoffload.spec.calls import Output, apply

from .adapter_api import RETRY, Adapter, EventBatch, LoadOutcome, Reported, StoreOutcome
from .config import CheckConfig, Level, Profile
from .errors import PropertyViolation, Untranslatable
from .guard import Answer, call_target

# Operations the spec never rejects: a rejection from the target there is a crash.
_NEVER_MISUSE = frozenset({Op.LOOKUP, Op.TOUCH, Op.PREPARE_STORE, Op.RESET_CACHE,
                           Op.TAKE_EVENTS})


def lookup_agrees(profile: Profile, spec: LookupResult, got: Reported) -> bool:
    """Does the target's lookup answer agree with the spec's under ``profile``?

    RETRY ("ask again") is accepted exactly where the spec says PENDING, in both
    profiles: anywhere else it defers a request the manager could answer, forever.
    """
    if got is spec:
        return True
    if spec is LookupResult.PENDING:
        return got is RETRY or (profile is Profile.SAFE and got is LookupResult.MISS)
    return False


def show(value: object) -> str:
    """A short, stable rendering of outputs and keys for tables."""
    if isinstance(value, LookupResult):
        return value.name
    if value is RETRY:
        return "RETRY"
    if isinstance(value, frozenset | set):
        return "{" + ", ".join(sorted(map(repr, value))) + "}"
    if isinstance(value, tuple) and value and all(not isinstance(v, tuple) for v in value):
        return "(" + ", ".join(map(repr, value)) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


class Lockstep:
    """The spec and one target instance, driven together; raises at the first divergence."""

    def __init__(self, adapter: Adapter, config: CheckConfig) -> None:
        self.adapter = adapter
        self.config = config
        self.state: CacheState = initial_state(config.capacity, config.policy)
        self.subscriber: set[Key] = set()
        self.trace: list[Call] = []
        self.seen: dict[Key, None] = {}
        self.failed = False
        self.phase = "run"
        self.generated = 0
        """How many calls came before the drain (the rest of ``trace`` is the drain)."""

    # --- driving -------------------------------------------------------------------

    def step(self, call: Call) -> Output | MisuseError:
        """Make ``call`` on both sides and compare; raise PropertyViolation on divergence.

        Returns the spec's output (with the target's choices), or the spec's misuse error
        when both sides rejected the call.
        """
        self.trace.append(call)
        if self.phase == "run":
            self.generated = len(self.trace)
        self.seen.update(dict.fromkeys(call.keys))
        try:
            output = self._dispatch(call)
            check_invariants(self.state)
        except PropertyViolation as violation:
            self.failed = True
            if self.phase == "drain" and violation.prop == "rejection":
                violation.prop = "liveness"
                violation.message = ("after every running copy completed, " + violation.message)
            violation.trace = tuple(self.trace)
            violation.generated = self.generated
            violation.capacity = self.config.capacity
            violation.step = len(self.trace)
            raise
        return output

    def drain(self, stale_completions: bool) -> None:
        """Complete every running copy, then store as many new keys as there are free or
        evictable slots: the spec accepts that store, so a target that leaked a slot
        (or a reader) rejects it ("liveness").

        Stale jobs (left running by a reset) are completed too when the configuration
        allows stale completions; otherwise they keep their slots, in the spec as well.
        """
        self.phase = "drain"
        storing = tuple(b.key for b in sorted(self.state.blocks, key=_by_slot)
                        if b.phase is Phase.STORING)
        if storing:
            self.step(Call(Op.COMPLETE_STORE, storing))
        while readers := tuple(b.key for b in sorted(self.state.blocks, key=_by_slot)
                               if b.readers):
            self.step(Call(Op.COMPLETE_LOAD, readers))
        if stale_completions:
            for orphan in sorted(self.state.orphans, key=lambda o: (o.epoch, o.slot)):
                epoch = orphan.epoch if self.adapter.capabilities.completion_epochs else None
                op = Op.COMPLETE_STORE if orphan.kind.value == "store" else Op.COMPLETE_LOAD
                for _ in range(orphan.count):
                    self.step(Call(op, (orphan.key,), epoch=epoch, origin=orphan.epoch))
        room = len(self.state.free_slots()) + len(self.state.evictable())
        if room:
            fresh = tuple(k for k in (f"new{i}" for i in range(room + len(self.seen)))
                          if k not in self.seen)[:room]
            self.step(Call(Op.PREPARE_STORE, fresh))
        self.phase = "run"

    # --- one call --------------------------------------------------------------------

    def _dispatch(self, call: Call) -> Output | MisuseError:
        if call.op is Op.PREPARE_STORE:
            return self._prepare_store(call)
        try:
            new_state, expected = apply(self.state, call)
        except MisuseError as misuse:
            self._expect_rejection(call, misuse)
            return misuse
        answer = self._call_target(call)
        if answer.error is not None:
            self._unexpected_error(call, answer.error, expected)
        check = _CHECKS[call.op]
        check(self, call, new_state, expected, answer.value)
        self.state = new_state
        return expected

    def _call_target(self, call: Call) -> Answer:
        a = self.adapter
        keys = list(call.keys)
        actions: dict[Op, Callable[[], object]] = {
            Op.LOOKUP: lambda: a.lookup(call.keys[0]),
            Op.PREPARE_LOAD: lambda: a.prepare_load(keys),
            Op.COMPLETE_LOAD: lambda: a.complete_load(keys, call.epoch),
            Op.TOUCH: lambda: a.touch(keys),
            Op.PREPARE_STORE: lambda: a.prepare_store(keys),
            Op.COMPLETE_STORE: lambda: a.complete_store(keys, call.success, call.epoch),
            Op.RESET_CACHE: a.reset_cache,
            Op.TAKE_EVENTS: a.take_events,
        }
        return call_target(actions[call.op], call, self.config.call_timeout)

    # --- errors ----------------------------------------------------------------------

    def _expect_rejection(self, call: Call, misuse: MisuseError) -> None:
        """The spec rejects ``call``: the target must reject it too and change nothing.

        "Nothing changed" is checked by looking up every key seen so far just before
        and just after the call: the answers must not move (target against itself,
        so a lookup that was already wrong is reported as a lookup violation).
        """
        before = self._probe(call, None)
        answer = self._call_target(call)
        error = answer.error
        if error is None or isinstance(error, Untranslatable):
            raise PropertyViolation(
                "misuse", f"{call} breaks a precondition and must be rejected; the target "
                f"accepted it", [("call", str(call), str(call)),
                                 ("answer", f"{type(misuse).__name__}: {misuse}",
                                  "returned normally" if error is None else "returned a value"),
                                 *self._context(call.keys)])
        if not self.adapter.is_rejection(error):
            raise self._crash(call, error, f"{type(misuse).__name__} [{misuse.code}]")
        code = getattr(error, "code", None)
        if self.adapter.capabilities.typed_misuse and code != misuse.code:
            raise PropertyViolation(
                "misuse", f"{call} must be rejected with [{misuse.code}]; the target raised "
                f"{type(error).__name__} [{code}]",
                [("call", str(call), str(call)),
                 ("error", f"{type(misuse).__name__} [{misuse.code}]",
                  f"{type(error).__name__} [{code}]")])
        self._probe(call, before)

    def _probe(self, call: Call, before: dict[Key, Reported] | None) -> dict[Key, Reported]:
        """Look up every key seen so far. Before the call (``before`` is None) the answers
        must agree with the spec; after it, they must equal the answers before."""
        answers: dict[Key, Reported] = {}
        for key in sorted(self.seen, key=repr):
            probe = Call(Op.LOOKUP, (key,))
            _, expected = apply(self.state, probe)
            answer = self._call_target(probe)
            if answer.error is not None:
                raise self._crash(probe, answer.error, show(expected))
            got = answer.value
            if not _is_reported(got) or not isinstance(expected, LookupResult):
                raise PropertyViolation("lookup", f"{probe} returned {got!r}",
                                        [("call", str(probe), str(probe))])
            if before is None and not lookup_agrees(self.config.profile, expected, got):
                raise _probed(PropertyViolation(
                    "lookup", f"lookup({key!r}) must answer {show(expected)} "
                    f"({self.config.profile.value} profile); the target answered {show(got)} "
                    f"(asked just before {call})",
                    [("call", str(probe), str(probe)), ("answer", show(expected), show(got)),
                     *self._context((key,))]))
            if before is not None and before.get(key) is not got:
                raise PropertyViolation(
                    "misuse", f"the rejected call {call} changed the state: lookup({key!r}) "
                    f"answered {show(before.get(key))} before it and {show(got)} after",
                    [("call", str(call), str(call)),
                     (f"lookup({key!r}) before the call", show(expected),
                      show(before.get(key))),
                     (f"lookup({key!r}) after the call", show(expected), show(got)),
                     *self._context((key,))])
            answers[key] = got
        return answers

    def _unexpected_error(self, call: Call, error: BaseException, expected: object) -> None:
        if isinstance(error, Untranslatable):
            raise PropertyViolation(error.prop, f"{call}: {error.message}",
                                    [("call", str(call), str(call)),
                                     ("answer", show(expected), error.message)])
        if self.adapter.is_rejection(error) and call.op not in _NEVER_MISUSE:
            raise PropertyViolation(
                "misuse", f"{call} is legal but the target rejected it: "
                f"{type(error).__name__}: {error}",
                [("call", str(call), str(call)),
                 ("answer", show(expected), f"{type(error).__name__}: {error}"),
                 *self._context(call.keys)])
        raise self._crash(call, error, show(expected))

    def _crash(self, call: Call, error: BaseException, expected: str) -> PropertyViolation:
        return PropertyViolation(
            "crash", f"{call} raised {type(error).__name__}: {error}",
            [("call", str(call), str(call)),
             ("answer", expected, f"{type(error).__name__}: {error}"),
             *self._context(call.keys)])

    # --- per-operation comparisons ---------------------------------------------------

    def _check_lookup(self, call: Call, new: CacheState, expected: object, got: object) -> None:
        if not isinstance(expected, LookupResult):
            raise TypeError("the spec's lookup returned a non-LookupResult")  # suite bug
        if not _is_reported(got) or not lookup_agrees(self.config.profile, expected, got):
            key = call.keys[0]
            raise PropertyViolation(
                "lookup", f"lookup({key!r}) must answer {show(expected)} "
                f"({self.config.profile.value} profile); the target answered {show(got)}",
                [("call", str(call), str(call)), ("answer", show(expected), show(got)),
                 *self._context((key,))])

    def _check_prepare_load(
        self, call: Call, new: CacheState, expected: object, got: object
    ) -> None:
        if not isinstance(got, LoadOutcome):
            raise TypeError("adapter returned a non-LoadOutcome")  # suite bug
        plan = expected
        spec_keys: tuple[Key, ...] = tuple(getattr(plan, "keys", ()))
        spec_slot = {b.key: b.slot for b in self.state.blocks}
        if got.keys is None:
            # The API reports only where to read, one slot per key named in the call.
            wanted = tuple(spec_slot[k] for k in call.keys)
            if got.slots != wanted:
                prop = "slots" if len(got.slots) == len(call.keys) else "load-plan"
                raise PropertyViolation(
                    prop, f"{call} must read slots {list(wanted)} (where those blocks were "
                    f"stored); the target gave {list(got.slots)}",
                    [("call", str(call), str(call)),
                     ("slots", show(wanted), show(got.slots)), *self._context(call.keys)])
            return
        if got.keys != spec_keys:
            raise PropertyViolation(
                "load-plan", f"{call} must pin {show(spec_keys)} (each key once, in call "
                f"order); the target pinned {show(got.keys)}",
                [("call", str(call), str(call)), ("keys", show(spec_keys), show(got.keys))])
        wanted = tuple(spec_slot[k] for k in spec_keys)
        if got.slots != wanted:
            raise PropertyViolation(
                "slots", f"{call} must read {list(wanted)}, the slots those blocks were "
                f"stored in; the target gave {list(got.slots)}",
                [("call", str(call), str(call)), ("slots", show(wanted), show(got.slots)),
                 *self._context(spec_keys)])
        self._check_epoch(call, getattr(plan, "epoch", None), got.epoch)

    def _check_completion(
        self, call: Call, new: CacheState, expected: object, got: object
    ) -> None:
        if got is None or not isinstance(expected, Completion):
            return  # vLLM's completions return nothing to compare
        if not isinstance(got, Completion):
            raise TypeError("adapter returned a non-Completion")  # suite bug
        fields = ("applied", "released", "ignored")
        diff = [(f, set(getattr(expected, f)), set(getattr(got, f))) for f in fields]
        wrong = [(f, e, g) for f, e, g in diff if e != g]
        if wrong:
            f, e, g = wrong[0]
            raise PropertyViolation(
                "completion", f"{call} must report {f}={show(frozenset(e))}; the target "
                f"reported {show(frozenset(g))}",
                [("call", str(call), str(call)),
                 *((name, show(frozenset(ev)), show(frozenset(gv))) for name, ev, gv in diff),
                 *self._context(call.keys)])

    def _check_nothing(self, call: Call, new: CacheState, expected: object, got: object) -> None:
        """touch returns nothing observable; its effect shows in later evictions."""

    def _check_reset(self, call: Call, new: CacheState, expected: object, got: object) -> None:
        self._check_epoch(call, expected if isinstance(expected, int) else None,
                          got if isinstance(got, int) else None)

    def _check_events(self, call: Call, new: CacheState, expected: object, got: object) -> None:
        if not isinstance(got, EventBatch):
            raise TypeError("adapter returned a non-EventBatch")  # suite bug
        for removed, keys in got.items:
            if removed:
                self.subscriber.difference_update(keys)
            else:
                self.subscriber.update(keys)
        ready = new.announced
        if self.subscriber != ready:
            missing = ready - self.subscriber
            extra = frozenset(self.subscriber) - ready
            raise PropertyViolation(
                "events", "a subscriber replaying the events must see exactly the READY set "
                f"{show(ready)}; it sees {show(frozenset(self.subscriber))} (READY but never "
                f"announced: {show(missing)}; announced but not READY: {show(extra)})",
                [("call", str(call), str(call)),
                 ("subscriber's READY set", show(ready), show(frozenset(self.subscriber))),
                 ("events this call", _show_events(expected), _show_batch(got.items))])

    def _check_epoch(self, call: Call, expected: int | None, got: int | None) -> None:
        if got is not None and expected is not None and got != expected:
            raise PropertyViolation(
                "epochs", f"{call} must report epoch {expected}; the target reported {got}",
                [("call", str(call), str(call)), ("epoch", str(expected), str(got))])

    # --- prepare_store ---------------------------------------------------------------

    def _prepare_store(self, call: Call) -> StorePlan | StoreRejected:
        _, exact = apply(self.state, call)  # the spec's own choices: rejection or plan
        answer = self._call_target(call)
        if answer.error is not None:
            self._unexpected_error(call, answer.error, exact)
        got = answer.value
        if not isinstance(got, StoreOutcome):
            raise TypeError("adapter returned a non-StoreOutcome")  # suite bug
        if isinstance(exact, StoreRejected):
            self._check_rejected(call, exact, got)
            return exact
        if not isinstance(exact, StorePlan):
            raise TypeError("the spec's prepare_store returned neither plan nor rejection")
        if not got.accepted:
            raise PropertyViolation(
                "rejection", f"{call} must be accepted: it needs {_slots(len(exact.keys))} and "
                f"{self._room(call)} {'is' if self._room(call) == 1 else 'are'} free or "
                "evictable; the target rejected it",
                [("call", str(call), str(call)),
                 ("answer", show(exact), f"rejected (needed={got.needed}, "
                                         f"available={got.available})"),
                 *self._state_rows(call)])
        if got.keys != exact.keys:
            raise PropertyViolation(
                "store-plan", f"{call} must store {show(exact.keys)} (the absent keys, once "
                f"each, in call order); the target stores {show(got.keys)}",
                [("call", str(call), str(call)), ("keys to store", show(exact.keys),
                                                  show(got.keys)), *self._context(call.keys)])
        self._check_victims(call, exact, got)
        victims = got.evicted if self.config.level is Level.ANY else exact.evicted
        self._check_slots(call, victims, got)
        try:
            new, plan = apply(self.state, call, victims=victims, slots=got.slots)
        except ChoiceNotAllowed as refused:  # our checks above should have named it
            raise PropertyViolation("eviction-choice", f"{call}: {refused}",
                                    [("call", str(call), str(call))]) from refused
        if not isinstance(plan, StorePlan):
            raise TypeError("the spec rejected a store it had accepted")  # suite bug
        self._check_epoch(call, plan.epoch, got.epoch)
        self.state = new
        return plan

    def _check_rejected(self, call: Call, exact: StoreRejected, got: StoreOutcome) -> None:
        if got.accepted:
            raise PropertyViolation(
                "rejection", f"{call} cannot fit (needs {exact.needed}, only "
                f"{exact.available} free or evictable) and must be rejected; the target "
                f"accepted it, evicting {show(got.evicted)} into slots {list(got.slots)}",
                [("call", str(call), str(call)),
                 ("answer", show(exact), f"stores {show(got.keys)} in {list(got.slots)}, "
                                         f"evicts {show(got.evicted)}"),
                 *self._state_rows(call)])
        for name, spec_n, target_n in (("needed", exact.needed, got.needed),
                                       ("available", exact.available, got.available)):
            if target_n is not None and target_n != spec_n:
                raise PropertyViolation(
                    "rejection", f"{call} is rejected with {name}={spec_n}; the target "
                    f"reported {name}={target_n}",
                    [("call", str(call), str(call)), (name, str(spec_n), str(target_n)),
                     *self._state_rows(call)])

    def _check_victims(self, call: Call, exact: StorePlan, got: StoreOutcome) -> None:
        candidates = self.state.evictable() - frozenset(call.keys)
        rows = [("call", str(call), str(call)),
                ("evicted", show(exact.evicted), show(got.evicted)),
                ("allowed victims", show(candidates), ""), *self._recency_rows()]
        needed = len(exact.evicted)
        if len(got.evicted) != needed or len(set(got.evicted)) != len(got.evicted):
            raise PropertyViolation(
                "eviction-choice", f"{call} must evict exactly {needed} distinct block(s); "
                f"the target evicted {show(got.evicted)}", rows)
        for victim in got.evicted:
            if victim not in candidates:
                raise PropertyViolation(
                    "eviction-choice", f"{call} evicted {victim!r}, which may not be evicted: "
                    f"{self._why_not_evictable(call, victim)}", rows)
        if self.config.level is Level.EXACT and set(got.evicted) != set(exact.evicted):
            raise PropertyViolation(
                "eviction-choice", f"{call} must evict {show(exact.evicted)} under "
                f"{self.config.policy.value.upper()} (--level exact); the target evicted "
                f"{show(got.evicted)}", rows)

    def _check_slots(self, call: Call, victims: Sequence[Key], got: StoreOutcome) -> None:
        cap = self.state.capacity
        freed = {self.state.table[k].slot for k in victims}
        free = set(self.state.free_slots()) | freed
        rows = [("call", str(call), str(call)),
                ("free slots (after evictions)", show(tuple(sorted(free))), show(got.slots))]
        if len(got.slots) != len(got.keys) or len(set(got.slots)) != len(got.slots):
            raise PropertyViolation(
                "slots", f"{call} must give each of {show(got.keys)} its own slot; the target "
                f"gave {list(got.slots)}", rows)
        for slot in got.slots:
            if not 0 <= slot < cap:
                raise PropertyViolation(
                    "slots", f"{call} handed out slot {slot}, outside 0..{cap - 1}", rows)
            if slot not in free:
                raise PropertyViolation(
                    "slots", f"{call} handed out slot {slot}, which is {self._holder(slot)}",
                    rows)

    # --- explanations ----------------------------------------------------------------

    def _why_not_evictable(self, call: Call, key: Key) -> str:
        block = self.state.table.get(key)
        if block is None:
            return "it is not in the cache"
        if block.phase is Phase.STORING:
            return "its store is still in flight"
        if block.readers:
            return f"it is being read ({block.readers} reader(s))"
        return "it is named in the call"

    def _holder(self, slot: int) -> str:
        for block in self.state.blocks:
            if block.slot == slot:
                return f"still held by {block.key!r} ({block.phase.value})"
        for orphan in self.state.orphans:
            if orphan.slot == slot:
                return (f"still used by a {orphan.kind.value} of {orphan.key!r} that "
                        f"reset_cache left running (epoch {orphan.epoch})")
        return "not free"

    def _room(self, call: Call) -> int:
        candidates = self.state.evictable() - frozenset(call.keys)
        return len(self.state.free_slots()) + len(candidates)

    def _context(self, keys: Iterable[Key]) -> list[tuple[str, str, str]]:
        rows = []
        for key in dict.fromkeys(keys):
            block = self.state.table.get(key)
            if block is None:
                text = "ABSENT"
            else:
                text = f"{block.phase.name}, slot {block.slot}"
                if block.readers:
                    text += f", {block.readers} reader(s)"
            rows.append((f"spec state of {key!r}", text, ""))
        return rows

    def _state_rows(self, call: Call) -> list[tuple[str, str, str]]:
        return [("free slots", show(self.state.free_slots()), ""),
                ("evictable, not in call",
                 show(self.state.evictable() - frozenset(call.keys)), ""),
                *self._context(call.keys)]

    def _recency_rows(self) -> list[tuple[str, str, str]]:
        recency = self.state.recency
        if self.config.level is not Level.EXACT:
            return []
        if isinstance(recency, LruOrder):
            return [("LRU order (least recent first)", show(recency.order), "")]
        return [("ARC t1 / t2", f"{show(recency.t1)} / {show(recency.t2)}", ""),
                ("ARC ghosts b1 / b2", f"{show(recency.b1)} / {show(recency.b2)}", ""),
                ("ARC p", str(recency.p), "")]


Check = Callable[[Lockstep, Call, CacheState, object, object], None]

_CHECKS: dict[Op, Check] = {
    Op.LOOKUP: Lockstep._check_lookup,
    Op.PREPARE_LOAD: Lockstep._check_prepare_load,
    Op.COMPLETE_LOAD: Lockstep._check_completion,
    Op.TOUCH: Lockstep._check_nothing,
    Op.COMPLETE_STORE: Lockstep._check_completion,
    Op.RESET_CACHE: Lockstep._check_reset,
    Op.TAKE_EVENTS: Lockstep._check_events,
}


def _slots(count: int) -> str:
    return f"{count} slot{'' if count == 1 else 's'}"


def _probed(violation: PropertyViolation) -> PropertyViolation:
    violation.probe = True
    return violation


def _is_reported(value: object) -> TypeGuard[Reported]:
    return isinstance(value, LookupResult) or value is RETRY


def _by_slot(block: object) -> int:
    return int(getattr(block, "slot", 0))


def _show_events(expected: object) -> str:
    if not isinstance(expected, Events):
        return repr(expected)
    return f"stored {show(expected.stored)}, removed {show(expected.removed)}"


def _show_batch(items: Sequence[tuple[bool, tuple[Key, ...]]]) -> str:
    parts = [f"{'removed' if removed else 'stored'} {show(frozenset(keys))}"
             for removed, keys in items if keys]
    return "; ".join(parts) or "none"


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
    return run

