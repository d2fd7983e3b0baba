"""The native adapter: any manager offering ``docs/native-api.md`` (kvoffload's own API).

The API already speaks the spec's vocabulary, so this adapter mostly checks that each
answer has the documented type, and says so precisely when it does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kvoffload.spec import (
    Completion,
    Events,
    Key,
    LoadPlan,
    LookupResult,
    MisuseError,
    StorePlan,
    StoreRejected,
)

from .adapter_api import Capabilities, EventBatch, LoadOutcome, Reported, StoreOutcome
from .errors import Untranslatable

NATIVE_METHODS = ("lookup", "prepare_load", "complete_load", "prepare_store",
                  "complete_store")


class NativeAdapter:
    """Drives a native manager; misuse must raise the spec's typed errors."""

    name = "native"

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self.capabilities = Capabilities(
            touch=callable(getattr(manager, "touch", None)),
            reset=callable(getattr(manager, "reset_cache", None)),
            events=callable(getattr(manager, "take_events", None)),
            completion_tickets=True,
            typed_misuse=True,
            strict_lookup=True,
        )

    def lookup(self, key: Key) -> Reported:
        answer = self.manager.lookup(key)
        if not isinstance(answer, LookupResult):
            raise Untranslatable("lookup", f"lookup returned {answer!r}, not a LookupResult")
        return answer

    def prepare_load(self, keys: Sequence[Key]) -> LoadOutcome:
        plan = self.manager.prepare_load(list(keys))
        if not isinstance(plan, LoadPlan):
            raise Untranslatable("load-plan", f"prepare_load returned {plan!r}, not a LoadPlan")
        return LoadOutcome(tuple(plan.keys), _slots(plan.slots), plan.epoch,
                           _ticket(plan.ticket, "prepare_load"))

    def complete_load(self, keys: Sequence[Key], ticket: int | None) -> Completion | None:
        done = self.manager.complete_load(list(keys), ticket=ticket)
        return _completion(done, "complete_load")

    def touch(self, keys: Sequence[Key]) -> None:
        self.manager.touch(list(keys))

    def prepare_store(self, keys: Sequence[Key]) -> StoreOutcome:
        plan = self.manager.prepare_store(list(keys))
        if isinstance(plan, StoreRejected):
            return StoreOutcome(False, needed=plan.needed, available=plan.available)
        if not isinstance(plan, StorePlan):
            raise Untranslatable(
                "store-plan", f"prepare_store returned {plan!r}, not StorePlan/StoreRejected")
        return StoreOutcome(True, tuple(plan.keys), _slots(plan.slots), tuple(plan.evicted),
                            plan.epoch, _ticket(plan.ticket, "prepare_store"))

    def complete_store(
        self, keys: Sequence[Key], success: bool, ticket: int | None
    ) -> Completion | None:
        done = self.manager.complete_store(list(keys), success=success, ticket=ticket)
        return _completion(done, "complete_store")

    def reset_cache(self) -> int | None:
        epoch = self.manager.reset_cache()
        if not isinstance(epoch, int) or isinstance(epoch, bool):
            raise Untranslatable("epochs", f"reset_cache returned {epoch!r}, not an int epoch")
        return epoch

    def take_events(self) -> EventBatch:
        events = self.manager.take_events()
        if not isinstance(events, Events):
            raise Untranslatable("events", f"take_events returned {events!r}, not Events")
        both = events.stored & events.removed
        if both:
            raise Untranslatable(
                "events", f"Events is a net change, yet {sorted(map(repr, both))} are both "
                "stored and removed")
        return EventBatch(((True, tuple(events.removed)), (False, tuple(events.stored))))

    def is_rejection(self, error: BaseException) -> bool:
        return isinstance(error, MisuseError)


def _slots(slots: object) -> tuple[int, ...]:
    try:
        return tuple(map(int, slots))  # type: ignore[call-overload]  # any iterable; checked by the except
    except (TypeError, ValueError) as error:
        raise Untranslatable("slots", f"slots {slots!r} are not integers") from error


def _ticket(ticket: object, op: str) -> int:
    if not isinstance(ticket, int) or isinstance(ticket, bool):
        raise Untranslatable("tickets", f"{op} returned ticket {ticket!r}, not an int")
    return ticket


def _completion(done: object, op: str) -> Completion:
    if not isinstance(done, Completion):
        raise Untranslatable("completion", f"{op} returned {done!r}, not a Completion")
    return done
