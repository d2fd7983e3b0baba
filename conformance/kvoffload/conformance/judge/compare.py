"""Comparing one answer of the target with the spec's: which property, if any, it breaks.

Each function takes the lockstep run (for the spec's state before the call, the
configuration and the subscriber's view of the events), the call, and both answers,
and raises :class:`PropertyViolation` naming one property; the tables' wording comes
from :mod:`.explain`. Nothing here calls the target.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeGuard

from kvoffload.spec import (
    CacheState,
    Call,
    ChoiceNotAllowed,
    Completion,
    Key,
    LookupResult,
    Op,
    StorePlan,
    StoreRejected,
    apply,
)

from ..adapter_api import RETRY, EventBatch, LoadOutcome, Reported, StoreOutcome
from ..config import Level, Profile
from ..errors import PropertyViolation, Untranslatable
from . import explain as ex
from .explain import call_row, show

if TYPE_CHECKING:
    from .lockstep import Lockstep

NEVER_MISUSE = frozenset({Op.LOOKUP, Op.TOUCH, Op.PREPARE_STORE, Op.RESET_CACHE,
                          Op.TAKE_EVENTS})
"""Operations the spec never rejects: a rejection from the target there is a crash."""


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


def is_reported(value: object) -> TypeGuard[Reported]:
    return isinstance(value, LookupResult) or value is RETRY


# --- errors ------------------------------------------------------------------------


def crash(run: Lockstep, call: Call, error: BaseException, expected: str) -> PropertyViolation:
    violation = PropertyViolation(
        "crash", f"{call} raised {ex.error_text(error)}",
        [call_row(call), ("answer", expected, ex.error_text(error)),
         *ex.context(run.state, call.keys)])
    violation.host_ended = getattr(type(error), "HOST_ENDED", False) is True
    return violation


def unexpected_error(run: Lockstep, call: Call, error: BaseException, expected: object) -> None:
    """The target raised on a call the spec accepts: which property that breaks."""
    if isinstance(error, Untranslatable):
        raise PropertyViolation(error.prop, f"{call}: {error.message}",
                                [call_row(call), ("answer", show(expected), error.message)])
    if run.adapter.is_rejection(error) and call.op not in NEVER_MISUSE:
        raise PropertyViolation(
            "misuse", f"{call} is legal but the target rejected it: {ex.error_text(error)}",
            [call_row(call), ("answer", show(expected), ex.error_text(error)),
             *ex.context(run.state, call.keys)])
    raise crash(run, call, error, show(expected))


# --- per-operation comparisons -----------------------------------------------------


def check_lookup(run: Lockstep, call: Call, new: CacheState, expected: object,
                 got: object) -> None:
    if not isinstance(expected, LookupResult):
        raise TypeError("the spec's lookup returned a non-LookupResult")  # suite bug
    if not is_reported(got) or not lookup_agrees(run.config.profile, expected, got):
        key = call.keys[0]
        raise PropertyViolation(
            "lookup", f"lookup({key!r}) must answer {show(expected)} "
            f"({run.config.profile.value} profile); the target answered {show(got)}",
            [call_row(call), ("answer", show(expected), show(got)),
             *ex.context(run.state, (key,))])


def check_prepare_load(run: Lockstep, call: Call, new: CacheState, expected: object,
                       got: object) -> None:
    if not isinstance(got, LoadOutcome):
        raise TypeError("adapter returned a non-LoadOutcome")  # suite bug
    spec_keys: tuple[Key, ...] = tuple(getattr(expected, "keys", ()))
    table = run.state.table
    if got.keys is None:
        # The API reports only where to read, one slot per key named in the call.
        wanted = tuple(table[k].slot for k in call.keys)
        if got.slots != wanted:
            prop = "slots" if len(got.slots) == len(call.keys) else "load-plan"
            raise PropertyViolation(
                prop, f"{call} must read slots {show(list(wanted))} (where those blocks were "
                f"stored); the target gave {show(list(got.slots))}",
                [call_row(call), ("slots", show(wanted), show(got.slots)),
                 *ex.context(run.state, call.keys)])
        return
    if got.keys != spec_keys:
        raise PropertyViolation(
            "load-plan", f"{call} must pin {show(spec_keys)} (each key once, in call "
            f"order); the target pinned {show(got.keys)}",
            [call_row(call), ("keys", show(spec_keys), show(got.keys))])
    wanted = tuple(table[k].slot for k in spec_keys)
    if got.slots != wanted:
        raise PropertyViolation(
            "slots", f"{call} must read {show(list(wanted))}, the slots those blocks were "
            f"stored in; the target gave {show(list(got.slots))}",
            [call_row(call), ("slots", show(wanted), show(got.slots)),
             *ex.context(run.state, spec_keys)])
    # The ticket first: a wrong epoch (an observation, passed over once silenced) must
    # not leave the job unpaired, or its completions would be judged against no ticket.
    check_ticket(run, call, getattr(expected, "ticket", None), got.ticket)
    check_epoch(call, getattr(expected, "epoch", None), got.epoch)


def check_ticket(run: Lockstep, call: Call, expected: int | None, got: int | None) -> None:
    """A plan's ticket must be one the target never issued before; it is paired with the
    spec's ticket for the same job."""
    if expected is None or got is None:
        return
    if not run.map_ticket(expected, got):
        raise PropertyViolation(
            "tickets", f"{call} named its job with ticket {got}, which the target had "
            f"already issued (to the job the spec calls {run.to_spec[got]}); every plan "
            "needs a fresh ticket",
            [call_row(call), ("ticket", f"fresh (spec's {expected})", str(got))])


def check_completion(run: Lockstep, call: Call, new: CacheState, expected: object,
                     got: object) -> None:
    if got is None or not isinstance(expected, Completion):
        return  # vLLM's completions return nothing to compare
    if not isinstance(got, Completion):
        raise TypeError("adapter returned a non-Completion")  # suite bug
    if (got.applied == expected.applied and got.released == expected.released
            and got.ignored == expected.ignored):
        return  # the same keys in the same order (the commonest answer)
    fields = ("applied", "released", "ignored")
    diff = [(f, set(getattr(expected, f)), set(getattr(got, f))) for f in fields]
    wrong = [(f, e, g) for f, e, g in diff if e != g]
    if wrong:
        f, e, g = wrong[0]
        raise PropertyViolation(
            "completion", f"{call} must report {f}={show(frozenset(e))}; the target "
            f"reported {show(frozenset(g))}",
            [call_row(call),
             *((name, show(frozenset(ev)), show(frozenset(gv))) for name, ev, gv in diff),
             *ex.context(run.state, call.keys)])


def check_nothing(run: Lockstep, call: Call, new: CacheState, expected: object,
                  got: object) -> None:
    """touch returns nothing observable; its effect shows in later evictions. Nor does
    an injected fail_node (D15): what the failure lost shows in every later answer."""


def check_reset(run: Lockstep, call: Call, new: CacheState, expected: object,
                got: object) -> None:
    check_epoch(call, expected if isinstance(expected, int) else None,
                got if isinstance(got, int) else None)


def check_events(run: Lockstep, call: Call, new: CacheState, expected: object,
                 got: object) -> None:
    if not isinstance(got, EventBatch):
        raise TypeError("adapter returned a non-EventBatch")  # suite bug
    subscriber = run.subscriber
    broken = got.not_net_text(subscriber)
    got.replay_onto(subscriber)
    ready = new.announced
    if broken:
        raise PropertyViolation(
            "events", broken, [call_row(call), ("events this call", ex.show_events(expected),
                                                ex.show_batch(got.items))])
    if subscriber != ready:
        seen = frozenset(subscriber)
        raise PropertyViolation(
            "events", "a subscriber replaying the events must see exactly the READY set "
            f"{show(ready)}; it sees {show(seen)} (READY but never announced: "
            f"{show(ready - seen)}; announced but not READY: {show(seen - ready)})",
            [call_row(call), ("subscriber's READY set", show(ready), show(seen)),
             ("events this call", ex.show_events(expected), ex.show_batch(got.items))])


def check_epoch(call: Call, expected: int | None, got: int | None) -> None:
    if got is not None and expected is not None and got != expected:
        raise PropertyViolation(
            "epochs", f"{call} must report epoch {expected}; the target reported {got}",
            [call_row(call), ("epoch", str(expected), str(got))])


Check = Callable[["Lockstep", Call, CacheState, object, object], None]

CHECKS: dict[Op, Check] = {
    Op.LOOKUP: check_lookup,
    Op.PREPARE_LOAD: check_prepare_load,
    Op.COMPLETE_LOAD: check_completion,
    Op.TOUCH: check_nothing,
    Op.COMPLETE_STORE: check_completion,
    Op.RESET_CACHE: check_reset,
    Op.TAKE_EVENTS: check_events,
    Op.FAIL_NODE: check_nothing,
}
"""The comparison for each operation but prepare_store (see :func:`check_store`)."""


# --- prepare_store -----------------------------------------------------------------


def check_store(run: Lockstep, call: Call, exact: object, got: object,
                planned: CacheState | None = None) -> tuple[CacheState, StorePlan | StoreRejected]:
    """Compare a store's answer with the spec's own plan ``exact``; the spec's next state
    and plan, made with the target's victims (at --level any) and slots. ``planned``:
    the spec's next state for ``exact`` where the caller has it, taken as it is when
    the target chose as the spec did (the same victims in the same order, the same
    slots), rather than applied a second time."""
    if not isinstance(got, StoreOutcome):
        raise TypeError("adapter returned a non-StoreOutcome")  # suite bug
    if isinstance(exact, StoreRejected):
        _check_rejected(run, call, exact, got)
        return run.state, exact
    if not isinstance(exact, StorePlan):
        raise TypeError("the spec's prepare_store returned neither plan nor rejection")
    state = run.state
    if not got.accepted:
        free = ex.room(state, call)
        raise PropertyViolation(
            "rejection", f"{call} must be accepted: it needs {ex.slots_text(len(exact.keys))} "
            f"and {free} {'is' if free == 1 else 'are'} free or evictable; the target "
            "rejected it",
            [call_row(call),
             ("answer", show(exact), f"rejected (needed={got.needed}, "
                                     f"available={got.available})"),
             *ex.state_rows(state, call)])
    if got.keys != exact.keys:
        raise PropertyViolation(
            "store-plan", f"{call} must store {show(exact.keys)} (the absent keys, once "
            f"each, in call order); the target stores {show(got.keys)}",
            [call_row(call), ("keys to store", show(exact.keys), show(got.keys)),
             *ex.context(state, call.keys)])
    _check_victims(run, call, exact, got)
    victims = got.evicted if run.config.level is Level.ANY else exact.evicted
    _check_slots(state, call, victims, got)
    plan: object
    if planned is not None and victims == exact.evicted and got.slots == exact.slots:
        new, plan = planned, exact  # the spec's own choices: its plan, applied once
    else:
        new, plan = _apply_choices(state, call, victims, got.slots)
    if not isinstance(plan, StorePlan):
        raise TypeError("the spec rejected a store it had accepted")  # suite bug
    check_ticket(run, call, plan.ticket, got.ticket)  # before the epoch, as for a load
    check_epoch(call, plan.epoch, got.epoch)
    return new, plan


def _apply_choices(state: CacheState, call: Call, victims: Sequence[Key],
                   slots: Sequence[int]) -> tuple[CacheState, object]:
    """The spec's store ``call`` with the target's ``victims`` and ``slots``."""
    try:
        return apply(state, call, victims=victims, slots=slots)
    except ChoiceNotAllowed as refused:  # the checks above should have named it
        raise PropertyViolation("eviction-choice", f"{call}: {refused}",
                                [call_row(call)]) from refused


def _check_rejected(run: Lockstep, call: Call, exact: StoreRejected, got: StoreOutcome) -> None:
    if got.accepted:
        raise PropertyViolation(
            "rejection", f"{call} cannot fit (needs {exact.needed}, only "
            f"{exact.available} free or evictable) and must be rejected; the target "
            f"accepted it, evicting {show(got.evicted)} into slots {show(list(got.slots))}",
            [call_row(call),
             ("answer", show(exact), f"stores {show(got.keys)} in {show(list(got.slots))}, "
                                     f"evicts {show(got.evicted)}"),
             *ex.state_rows(run.state, call)])
    for name, spec_n, target_n in (("needed", exact.needed, got.needed),
                                   ("available", exact.available, got.available)):
        if target_n is not None and target_n != spec_n:
            raise PropertyViolation(
                "rejection", f"{call} is rejected with {name}={spec_n}; the target "
                f"reported {name}={target_n}",
                [call_row(call), (name, str(spec_n), str(target_n)),
                 *ex.state_rows(run.state, call)])


def _check_victims(run: Lockstep, call: Call, exact: StorePlan, got: StoreOutcome) -> None:
    if not exact.evicted and not got.evicted:  # the commonest store: nothing to judge
        return
    state = run.state
    candidates = state.evictable() - frozenset(call.keys)

    def rows() -> list[tuple[str, str, str]]:  # words only when a check fails (a wide tier)
        return [call_row(call), ("evicted", show(exact.evicted), show(got.evicted)),
                ("allowed victims", show(candidates), ""),
                *ex.recency_rows(state, run.config)]

    needed = len(exact.evicted)
    if len(got.evicted) != needed or len(set(got.evicted)) != len(got.evicted):
        raise PropertyViolation(
            "eviction-choice", f"{call} must evict exactly {needed} distinct block(s); "
            f"the target evicted {show(got.evicted)}", rows())
    for victim in got.evicted:
        if victim not in candidates:
            raise PropertyViolation(
                "eviction-choice", f"{call} evicted {victim!r}, which may not be evicted: "
                f"{ex.why_not_evictable(state, victim)}", rows())
    if run.config.level is Level.EXACT and set(got.evicted) != set(exact.evicted):
        raise PropertyViolation(
            "eviction-choice", f"{call} must evict {show(exact.evicted)} under "
            f"{run.config.policy.value.upper()} (--level exact); the target evicted "
            f"{show(got.evicted)}", rows())


def _check_slots(state: CacheState, call: Call, victims: Sequence[Key],
                 got: StoreOutcome) -> None:
    cap = state.capacity
    free = set(state.free_slots()) | {state.table[k].slot for k in victims}

    def rows() -> list[tuple[str, str, str]]:  # words only when a check fails (a wide tier)
        return [call_row(call),
                ("free slots (after evictions)", show(tuple(sorted(free))), show(got.slots))]

    if len(got.slots) != len(got.keys) or len(set(got.slots)) != len(got.slots):
        raise PropertyViolation(
            "slots", f"{call} must give each of {show(got.keys)} its own slot; the target "
            f"gave {show(list(got.slots))}", rows())
    for slot in got.slots:
        if not 0 <= slot < cap:
            raise PropertyViolation(
                "slots", f"{call} handed out slot {slot}, outside 0..{cap - 1}", rows())
        if slot not in free:
            raise PropertyViolation(
                "slots", f"{call} handed out slot {slot}, which is {ex.holder(state, slot)}",
                rows())
