"""The native adapter: any manager offering ``docs/native-api.md`` (kvoffload's own API).

The API already speaks the spec's vocabulary, so this adapter mostly checks that each
answer has the documented type, and says so precisely when it does not.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from operator import is_not
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

from ..adapter_api import (
    Capabilities,
    EventBatch,
    LoadOutcome,
    Reported,
    StoreOutcome,
    read_int,
)
from ..errors import Untranslatable
from ..judge.explain import show

KEPT_ANSWERS = 16
"""How many recent answers with mutable containers are checked at every call."""

NATIVE_METHODS = ("lookup", "prepare_load", "complete_load", "prepare_store",
                  "complete_store")


class NativeAdapter:
    """Drives a native manager; misuse must raise the spec's typed errors.

    Every answer is read into plain values before it is compared: keys must have the
    exact type of the keys the suite sent (an object that claims to equal everything is
    no key), slots, epochs and tickets must be integers (``operator.index``: a float or
    None is refused, an ``int`` subclass is read as the plain int it holds). The lists
    handed to the target must come back unchanged, and an answer must not change after
    it was returned (a buffer a later call overwrites; the last ``KEPT_ANSWERS``
    answers holding lists or sets are checked at every call but a lookup, which the
    suite also makes as a probe): both are ``arguments`` failures.
    """

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
        self._key_types: set[type] = set()
        """The exact types of the keys sent so far: a key in an answer must have one."""
        self._kept: deque[tuple[str, tuple[object, ...], tuple[object, ...]]] = deque(
            maxlen=KEPT_ANSWERS)
        """Recent answers' mutable containers as returned, with what they held then."""

    def lookup(self, key: Key) -> Reported:
        self._key_types.add(type(key))
        answer = self.manager.lookup(key)
        if not isinstance(answer, LookupResult):
            raise Untranslatable("lookup", f"lookup returned {answer!r}, not a LookupResult")
        return answer

    def prepare_load(self, keys: Sequence[Key]) -> LoadOutcome:
        plan = self._call("prepare_load", keys)
        if not isinstance(plan, LoadPlan):
            raise Untranslatable("load-plan", f"prepare_load returned {plan!r}, not a LoadPlan")
        keys_read = self._keys(plan.keys, "load-plan", "prepare_load")
        outcome = LoadOutcome(keys_read, _slots(plan.slots, len(keys_read), "prepare_load"),
                              read_int(plan.epoch, "epochs", "epoch"),
                              read_int(plan.ticket, "tickets", "ticket"))
        self._keep("prepare_load", plan.keys, plan.slots)
        return outcome

    def complete_load(self, keys: Sequence[Key], ticket: int | None) -> Completion | None:
        done = self._call("complete_load", keys, ticket=ticket)
        return self._completion(done, "complete_load")

    def touch(self, keys: Sequence[Key]) -> None:
        self._call("touch", keys)

    def prepare_store(self, keys: Sequence[Key]) -> StoreOutcome:
        plan = self._call("prepare_store", keys)
        if isinstance(plan, StoreRejected):
            return StoreOutcome(False, needed=read_int(plan.needed, "rejection", "needed"),
                                available=read_int(plan.available, "rejection", "available"))
        if not isinstance(plan, StorePlan):
            raise Untranslatable(
                "store-plan", f"prepare_store returned {plan!r}, not StorePlan/StoreRejected")
        keys_read = self._keys(plan.keys, "store-plan", "prepare_store")
        outcome = StoreOutcome(True, keys_read,
                               _slots(plan.slots, len(keys_read), "prepare_store"),
                               self._keys(plan.evicted, "eviction-choice", "prepare_store"),
                               read_int(plan.epoch, "epochs", "epoch"),
                               read_int(plan.ticket, "tickets", "ticket"))
        self._keep("prepare_store", plan.keys, plan.slots, plan.evicted)
        return outcome

    def complete_store(
        self, keys: Sequence[Key], success: bool, ticket: int | None
    ) -> Completion | None:
        done = self._call("complete_store", keys, success=success, ticket=ticket)
        return self._completion(done, "complete_store")

    def reset_cache(self) -> int | None:
        self._check_kept()
        epoch = self.manager.reset_cache()
        return read_int(epoch, "epochs", "epoch from reset_cache")

    def take_events(self) -> EventBatch:
        self._check_kept()
        events = self.manager.take_events()
        if not isinstance(events, Events):
            raise Untranslatable("events", f"take_events returned {events!r}, not Events")
        stored = self._keys(events.stored, "events", "take_events")
        removed = self._keys(events.removed, "events", "take_events")
        both = set(stored) & set(removed)
        if both:
            raise Untranslatable(
                "events", f"Events is a net change, yet {sorted(map(repr, both))} are both "
                "stored and removed")
        self._keep("take_events", events.stored, events.removed)
        return EventBatch(((True, removed), (False, stored)), net=True)

    def is_rejection(self, error: BaseException) -> bool:
        return isinstance(error, MisuseError)

    # --- reading answers --------------------------------------------------------------

    def _call(self, op: str, keys: Sequence[Key], *args: object, **kwargs: object) -> object:
        """Call ``op`` with a fresh list of the call's keys; whatever the call does
        (return or raise), the list must be as it was afterwards."""
        self._check_kept()
        self._key_types.update(map(type, keys))
        sent = list(keys)
        try:
            return getattr(self.manager, op)(sent, *args, **kwargs)
        finally:
            if len(sent) != len(keys) or any(map(is_not, sent, keys)):
                raise Untranslatable(  # the mutation is the failure, whatever the call raised
                    "arguments", f"{op} changed the list of keys it was given, from "
                    f"{list(keys)!r} to {sent!r}; the caller still owns it")

    def _keep(self, op: str, *containers: object) -> None:
        """Remember an answer's mutable containers (a list, a set: not a tuple or a
        frozenset), to see at the next calls that they still hold what they held."""
        mutable = tuple(c for c in containers if type(c) is not tuple and type(c) is not frozenset)
        if mutable:
            self._kept.append((op, mutable, tuple(_contents(c) for c in mutable)))

    def _check_kept(self) -> None:
        """Raise if a recent answer changed since it was returned."""
        kept = self._kept
        if not kept:
            return
        for op, containers, contents in kept:
            now = tuple(_contents(c) for c in containers)
            if now != contents:
                kept.clear()
                raise Untranslatable(
                    "arguments", f"an earlier answer (of {op}) changed after it was "
                    f"returned: {contents!r} became {now!r}; an answer is the caller's")

    def _keys(self, values: object, prop: str, op: str) -> tuple[Key, ...]:
        keys = _items(values)
        if keys is None:
            raise Untranslatable(prop, f"{op} returned keys {values!r}, not a sequence or set")
        known = self._key_types
        for key in keys:
            if type(key) not in known:
                raise Untranslatable(
                    prop, f"{op} returned {key!r} ({type(key).__name__}) as a key; the keys "
                    f"it was given are of type {sorted(t.__name__ for t in known)}")
        return keys

    def _completion(self, done: object, op: str) -> Completion:
        if not isinstance(done, Completion):
            raise Untranslatable("completion", f"{op} returned {done!r}, not a Completion")
        read = Completion(self._keys(done.applied, "completion", op),
                          self._keys(done.released, "completion", op),
                          self._keys(done.ignored, "completion", op))
        self._keep(op, done.applied, done.released, done.ignored)
        return read


def _contents(container: object) -> object:
    """What a returned container holds, as plain values (a set as a frozenset)."""
    if isinstance(container, (set, frozenset)):
        return frozenset(container)
    items = _items(container)
    return container if items is None else items


def _slots(slots: object, keys: int, op: str) -> tuple[int, ...]:
    """A plan's slots, one per key: a plan with more or fewer is refused before any slot
    is read (a hostile plan of millions of slots costs one length check, not a read of
    each)."""
    values = _items(slots)
    if values is None:
        raise Untranslatable("slots", f"slots {show(slots)} are not a sequence of ints")
    if len(values) != keys:
        raise Untranslatable("slots", f"{op} returned {len(values):,} slots for {keys:,} "
                                      f"key{'' if keys == 1 else 's'} (a plan holds one slot "
                                      f"per key): {show(values)}")
    return tuple(read_int(slot, "slots", "slot") for slot in values)


def _items(values: object) -> tuple[object, ...] | None:
    """The items of a returned container; None if it is none (a string is none). A
    tuple, the commonest answer, is read as it is (immutable: nothing to copy)."""
    if type(values) is tuple:
        return values
    if not isinstance(values, Iterable) or isinstance(values, (str, bytes)):
        return None
    return tuple(values)
