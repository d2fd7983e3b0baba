"""Every ``expect`` in the corpus is what the spec answers: the reading of the case
files that test_corpus.py and test_corpus_expect.py check them with.

``kvoffload corpus replay`` never reads a case's ``expect`` (the spec is its oracle,
through check's lockstep); replayers in other languages (``corpus/replayer/``) compare
with it. So the answers the writer puts in the files are checked here against the spec
by a reading of the format of its own (docs/corpus.md), not by the writer's code: each
call made on the spec, each answer compared with ``expect`` under the file's symbolic
names (slots and tickets bound at first sight), each ``held`` list with the slots the
spec holds, each events batch applied to a subscriber's set.
"""

from __future__ import annotations

from typing import Any

from kvoffload.spec import (
    CacheState,
    Call,
    Completion,
    Events,
    LoadPlan,
    LookupResult,
    MisuseError,
    Op,
    Policy,
    StorePlan,
    StoreRejected,
    apply,
    initial_state,
)


class Names:
    """A case's symbolic slot and ticket names, bound at first sight."""

    def __init__(self) -> None:
        self.slot_of: dict[str, int] = {}
        self.name_of: dict[int, str] = {}
        """Each slot's latest name (the ``held`` lists name slots by it)."""
        self.tickets: dict[str, int] = {}
        self.subscriber: set[object] = set()

    def new_slot(self, name: str, slot: int) -> None:
        assert name not in self.slot_of, f"slot name {name} bound twice"
        self.slot_of[name] = slot
        self.name_of[slot] = name

    def new_ticket(self, name: str, ticket: int) -> None:
        assert name not in self.tickets, f"ticket name {name} bound twice"
        assert ticket not in self.tickets.values()
        self.tickets[name] = ticket

    def held(self, state: CacheState) -> list[str]:
        return sorted(self.name_of[s] for s in state.used_slots() if s in self.name_of)


def _sorted(keys: Any) -> list[Any]:
    return sorted(keys, key=repr)


def check_answer(expect: dict[str, Any], before: CacheState, call: Call, out: object,
                 names: Names) -> None:
    """``expect`` says what the spec answered (``out``, to ``call`` in ``before``)."""
    kind = expect["kind"]
    if isinstance(out, LookupResult):
        assert expect == {"kind": "lookup", "result": out.name}
    elif isinstance(out, StorePlan):
        assert kind == "store_plan"
        assert expect["keys"] == list(out.keys)
        assert expect["evicted"] == _sorted(out.evicted)
        if "evicted_from" in expect:  # a choice: every allowed victim, with its slot
            allowed = _sorted(before.evictable() - frozenset(call.keys))
            assert expect["evicted_from"] == allowed
            assert [names.slot_of[n] for n in expect["evicted_from_slots"]] == [
                before.table[k].slot for k in allowed]
            assert len(allowed) > len(out.evicted)
        assert len(expect["slots"]) == len(out.slots)
        for name, slot in zip(expect["slots"], out.slots, strict=True):
            names.new_slot(name, slot)
        names.new_ticket(expect["ticket"], out.ticket)
    elif isinstance(out, StoreRejected):
        assert expect == {"kind": "rejected", "needed": out.needed, "available": out.available}
    elif isinstance(out, LoadPlan):
        assert kind == "load_plan"
        assert expect["keys"] == list(out.keys)
        assert [names.slot_of[n] for n in expect["slots"]] == list(out.slots)
        names.new_ticket(expect["ticket"], out.ticket)
    elif isinstance(out, Completion):
        assert expect == {"kind": "completion", "applied": _sorted(out.applied),
                          "released": _sorted(out.released), "ignored": _sorted(out.ignored)}
    elif isinstance(out, Events):
        names.subscriber = (names.subscriber - out.removed) | out.stored
        assert expect == {"kind": "events", "ready": _sorted(names.subscriber)}
    elif isinstance(out, int):
        assert expect == {"kind": "reset", "epoch": out}
    else:
        assert out is None
        assert expect == {"kind": "none"}


def spec_disagrees(case: dict[str, Any]) -> str | None:
    """The first step whose ``expect`` or ``held`` is not the spec's, else None."""
    state = initial_state(case["capacity"], Policy(case["policy"]))
    names = Names()
    for number, step in enumerate(case["steps"], 1):
        data, expect = step["call"], step["expect"]
        ticket = None
        if "ticket" in data:
            assert data["ticket"] in names.tickets or data["ticket"] == "u0"
            ticket = names.tickets.get(data["ticket"], state.next_ticket + 1_000_000)
        call = Call(Op(data["op"]), tuple(data.get("keys", ())),
                    success=data.get("success", True), ticket=ticket)
        before = state
        try:
            try:
                state, out = apply(state, call)
            except MisuseError as misuse:
                out = misuse
            if isinstance(out, MisuseError):
                assert expect == {"kind": "error", "family": out.code}
            else:
                check_answer(expect, before, call, out, names)
            assert step["held"] == names.held(state), "held"
        except AssertionError as wrong:
            return f"{case['name']} step {number} ({call}): {wrong}"
    return None
