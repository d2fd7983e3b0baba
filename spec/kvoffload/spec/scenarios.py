"""Scenario vectors: short call sequences with the outputs the spec demands.

Each step is a call and its expected output, or the misuse error it must raise (the
state then stays as it was). The spec's tests replay them on the spec; the reference
manager's tests and the conformance suite replay them on implementations.
"""

from __future__ import annotations

from dataclasses import dataclass

from .calls import Call, Op, Output
from .errors import MisuseError, NotReadable, UnmatchedCompleteLoad
from .outputs import Completion, Events, LoadPlan, StorePlan, StoreRejected
from .vocabulary import LookupResult, Policy

MISS, PENDING, HIT = LookupResult.MISS, LookupResult.PENDING, LookupResult.HIT


@dataclass(frozen=True)
class Step:
    call: Call
    expect: Output | type[MisuseError]


@dataclass(frozen=True)
class Scenario:
    name: str
    about: str
    capacity: int
    steps: tuple[Step, ...]
    policy: Policy = Policy.LRU


def _s(op: Op, *keys: object, expect: Output | type[MisuseError] = None, **kw: object) -> Step:
    return Step(Call(op, tuple(keys), **kw), expect)  # type: ignore[arg-type]  # keys and options as written in a scenario; Call checks them


L, PL, CL, T = Op.LOOKUP, Op.PREPARE_LOAD, Op.COMPLETE_LOAD, Op.TOUCH
PS, CS, R, E = Op.PREPARE_STORE, Op.COMPLETE_STORE, Op.RESET_CACHE, Op.TAKE_EVENTS

_ARC_BEFORE_RESET = (
    _s(PS, "a", "b", expect=StorePlan(("a", "b"), (0, 1), (), 0, 0)),
    _s(CS, "a", "b", expect=Completion(applied=("a", "b"))),
    _s(T, "a", expect=None),  # a to t2
    _s(PS, "c", expect=StorePlan(("c",), (1,), ("b",), 0, 1)),  # b from t1 to ghost b1
    _s(CS, "c", expect=Completion(applied=("c",))),
    _s(PS, "b", expect=StorePlan(("b",), (0,), ("a",), 0, 2)),  # a ghost hit: p 1; a to b2
    _s(CS, "b", expect=Completion(applied=("b",))),
    _s(R, expect=1),
)
"""ARC on 2 slots, up to a reset that finds p at 1 and a in ghost list b2."""

SCENARIOS: tuple[Scenario, ...] = (
    Scenario("pr41795", "a block whose store is in flight is PENDING, not a miss", 4, (
        _s(PS, "a", expect=StorePlan(("a",), (0,), (), 0, 0)),
        _s(L, "a", expect=PENDING),
        _s(CS, "a", expect=Completion(applied=("a",))),
        _s(L, "a", expect=HIT),
    )),
    Scenario("duplicate-keys", "a key twice in one call takes one slot; nothing leaks", 2, (
        _s(PS, "a", "a", expect=StorePlan(("a",), (0,), (), 0, 0)),
        _s(PS, "b", "b", expect=StorePlan(("b",), (1,), (), 0, 1)),
        _s(CS, "a", "a", "b", expect=Completion(applied=("a", "b"))),
        _s(PL, "a", "a", expect=LoadPlan(("a",), (0,), 0, 2)),
        _s(CL, "a", expect=Completion(applied=("a",))),
        _s(CL, "a", expect=UnmatchedCompleteLoad),
    )),
    Scenario("atomic-rejection", "a store that cannot fit changes nothing", 2, (
        _s(PS, "a", "b", expect=StorePlan(("a", "b"), (0, 1), (), 0, 0)),
        _s(CS, "a", "b", expect=Completion(applied=("a", "b"))),
        _s(E, expect=Events(stored=frozenset("ab"))),
        _s(PL, "a", expect=LoadPlan(("a",), (0,), 0, 1)),
        _s(PS, "c", "d", expect=StoreRejected(needed=2, available=1)),
        _s(L, "b", expect=HIT),
        _s(E, expect=Events()),
        _s(PS, "b", "c", expect=StoreRejected(needed=1, available=0)),
        _s(PS, "c", expect=StorePlan(("c",), (1,), ("b",), 0, 2)),
    )),
    Scenario("failed-store", "a failed store returns the key to ABSENT and frees its slot", 1, (
        _s(PS, "a", expect=StorePlan(("a",), (0,), (), 0, 0)),
        _s(CS, "a", success=False, expect=Completion(applied=("a",))),
        _s(L, "a", expect=MISS),
        _s(E, expect=Events()),
        _s(PS, "b", expect=StorePlan(("b",), (0,), (), 0, 1)),
        _s(CS, "a", expect=Completion(ignored=("a",))),
    )),
    Scenario("lru-touch", "touch makes a block most recent; the least recent is evicted", 2, (
        _s(PS, "a", "b", expect=StorePlan(("a", "b"), (0, 1), (), 0, 0)),
        _s(CS, "a", "b", expect=Completion(applied=("a", "b"))),
        _s(T, "a", expect=None),
        _s(PS, "c", expect=StorePlan(("c",), (1,), ("b",), 0, 1)),
        _s(E, expect=Events(stored=frozenset("a"))),
    )),
    Scenario("pinned-not-evicted", "a block being read is never evicted", 1, (
        _s(PS, "a", expect=StorePlan(("a",), (0,), (), 0, 0)),
        _s(CS, "a", expect=Completion(applied=("a",))),
        _s(PL, "a", expect=LoadPlan(("a",), (0,), 0, 1)),
        _s(PS, "b", expect=StoreRejected(needed=1, available=0)),
        _s(CL, "a", expect=Completion(applied=("a",))),
        _s(PS, "b", expect=StorePlan(("b",), (0,), ("a",), 0, 2)),
    )),
    Scenario("reset-holds-slots", "a reset keeps a running copy's slot until it completes", 1, (
        _s(PS, "a", expect=StorePlan(("a",), (0,), (), 0, 0)),
        _s(R, expect=1),
        _s(L, "a", expect=MISS),
        _s(PS, "b", expect=StoreRejected(needed=1, available=0)),
        _s(CS, "a", ticket=0, expect=Completion(released=("a",))),
        _s(PS, "b", expect=StorePlan(("b",), (0,), (), 1, 1)),
    )),
    Scenario("stale-completion", "the ticket form ignores a pre-reset completion", 2, (
        _s(PS, "a", expect=StorePlan(("a",), (0,), (), 0, 0)),
        _s(R, expect=1),
        _s(PS, "a", expect=StorePlan(("a",), (1,), (), 1, 1)),
        _s(CS, "a", ticket=0, expect=Completion(released=("a",))),
        _s(L, "a", expect=PENDING),
        _s(CS, "a", ticket=0, expect=Completion(ignored=("a",))),
        _s(CS, "a", ticket=1, expect=Completion(applied=("a",))),
        _s(L, "a", expect=HIT),
    )),
    Scenario("stale-completion-vllm-form", "without job identity a stale completion marks "
             "the re-allocated block READY: why vLLM relies on no-stale-completions", 2, (
        _s(PS, "a", expect=StorePlan(("a",), (0,), (), 0, 0)),
        _s(R, expect=1),
        _s(PS, "a", expect=StorePlan(("a",), (1,), (), 1, 1)),
        _s(CS, "a", job=0, expect=Completion(applied=("a",))),
        _s(L, "a", expect=HIT),
    )),
    Scenario("late-failure-report", "issue 10 A: a second failure report of a finished job "
             "is ignored in the ticket form; the slot stays with the job writing it", 1, (
        _s(PS, "a", expect=StorePlan(("a",), (0,), (), 0, 0)),
        _s(CS, "a", success=False, ticket=0, expect=Completion(applied=("a",))),
        _s(PS, "a", expect=StorePlan(("a",), (0,), (), 0, 1)),
        _s(CS, "a", success=False, ticket=0, expect=Completion(ignored=("a",))),
        _s(L, "a", expect=PENDING),
        _s(PS, "b", expect=StoreRejected(needed=1, available=0)),
    )),
    Scenario("late-failure-report-vllm-form", "issue 10 A in vLLM's form: the late report "
             "fails the second job and its slot is handed out while that job writes it "
             "(excluded by no-stale-completions)", 1, (
        _s(PS, "a", expect=StorePlan(("a",), (0,), (), 0, 0)),
        _s(CS, "a", success=False, expect=Completion(applied=("a",))),
        _s(PS, "a", expect=StorePlan(("a",), (0,), (), 0, 1)),
        _s(CS, "a", success=False, job=0, expect=Completion(applied=("a",))),
        _s(PS, "b", expect=StorePlan(("b",), (0,), (), 0, 2)),
    )),
    Scenario("late-success-report", "issue 10 A: a late success report of an evicted "
             "block's finished job is ignored in the ticket form; the new store stays PENDING",
             1, (
        _s(PS, "a", expect=StorePlan(("a",), (0,), (), 0, 0)),
        _s(CS, "a", ticket=0, expect=Completion(applied=("a",))),
        _s(PS, "b", expect=StorePlan(("b",), (0,), ("a",), 0, 1)),
        _s(CS, "b", ticket=1, expect=Completion(applied=("b",))),
        _s(PS, "a", expect=StorePlan(("a",), (0,), ("b",), 0, 2)),
        _s(CS, "a", ticket=0, expect=Completion(ignored=("a",))),
        _s(L, "a", expect=PENDING),
    )),
    Scenario("late-success-report-vllm-form", "issue 10 A in vLLM's form: the late report "
             "makes a block HIT while its store is still writing (excluded by "
             "no-stale-completions)", 1, (
        _s(PS, "a", expect=StorePlan(("a",), (0,), (), 0, 0)),
        _s(CS, "a", expect=Completion(applied=("a",))),
        _s(PS, "b", expect=StorePlan(("b",), (0,), ("a",), 0, 1)),
        _s(CS, "b", expect=Completion(applied=("b",))),
        _s(PS, "a", expect=StorePlan(("a",), (0,), ("b",), 0, 2)),
        _s(CS, "a", job=0, expect=Completion(applied=("a",))),
        _s(L, "a", expect=HIT),
    )),
    Scenario("stale-load-report", "issue 10 B: a pre-reset load's completion in the ticket "
             "form releases its own copy and leaves the new reader pinned", 2, (
        _s(PS, "a", expect=StorePlan(("a",), (0,), (), 0, 0)),
        _s(CS, "a", expect=Completion(applied=("a",))),
        _s(PL, "a", expect=LoadPlan(("a",), (0,), 0, 1)),
        _s(R, expect=1),
        _s(PS, "a", expect=StorePlan(("a",), (1,), (), 1, 2)),
        _s(CS, "a", ticket=2, expect=Completion(applied=("a",))),
        _s(PL, "a", expect=LoadPlan(("a",), (1,), 1, 3)),
        _s(CL, "a", ticket=1, expect=Completion(released=("a",))),
        _s(CL, "a", ticket=1, expect=Completion(ignored=("a",))),
        _s(PS, "x", expect=StorePlan(("x",), (0,), (), 1, 4)),
        _s(CL, "a", ticket=3, expect=Completion(applied=("a",))),
    )),
    Scenario("stale-load-report-vllm-form", "issue 10 B in vLLM's form: the pre-reset load's "
             "completion unpins the new reader, and its slot is reused while it reads "
             "(use-after-free; excluded by no-stale-completions)", 2, (
        _s(PS, "a", expect=StorePlan(("a",), (0,), (), 0, 0)),
        _s(CS, "a", expect=Completion(applied=("a",))),
        _s(PL, "a", expect=LoadPlan(("a",), (0,), 0, 1)),
        _s(R, expect=1),
        _s(PS, "a", expect=StorePlan(("a",), (1,), (), 1, 2)),
        _s(CS, "a", expect=Completion(applied=("a",))),
        _s(PL, "a", expect=LoadPlan(("a",), (1,), 1, 3)),
        _s(CL, "a", job=1, expect=Completion(applied=("a",))),
        _s(PS, "x", expect=StorePlan(("x",), (1,), ("a",), 1, 4)),
    )),
    Scenario("misuse", "misuse raises a typed error and changes nothing", 2, (
        _s(PL, "a", expect=NotReadable),
        _s(PS, "a", expect=StorePlan(("a",), (0,), (), 0, 0)),
        _s(PL, "a", expect=NotReadable),
        _s(CL, "a", expect=UnmatchedCompleteLoad),
        _s(CL, "a", ticket=0, expect=Completion(ignored=("a",))),
        _s(L, "a", expect=PENDING),
    )),
    Scenario("events-replay", "stored and removed events replay to the READY set", 1, (
        _s(PS, "a", expect=StorePlan(("a",), (0,), (), 0, 0)),
        _s(E, expect=Events()),
        _s(CS, "a", expect=Completion(applied=("a",))),
        _s(E, expect=Events(stored=frozenset("a"))),
        _s(PS, "b", expect=StorePlan(("b",), (0,), ("a",), 0, 1)),
        _s(CS, "b", expect=Completion(applied=("b",))),
        _s(E, expect=Events(stored=frozenset("b"), removed=frozenset("a"))),
        _s(R, expect=1),
        _s(E, expect=Events(removed=frozenset("b"))),
    )),
    Scenario("arc-ghost-hit", "ARC: a key found in ghost list b1 raises p and enters t2, "
             "so the next victim comes from t2", 2, (
        _s(PS, "a", "b", expect=StorePlan(("a", "b"), (0, 1), (), 0, 0)),
        _s(CS, "a", "b", expect=Completion(applied=("a", "b"))),
        _s(T, "a", expect=None),
        _s(PS, "c", expect=StorePlan(("c",), (1,), ("b",), 0, 1)),
        _s(CS, "c", expect=Completion(applied=("c",))),
        _s(PS, "b", expect=StorePlan(("b",), (0,), ("a",), 0, 2)),
        _s(CS, "b", expect=Completion(applied=("b",))),
        _s(PS, "d", expect=StorePlan(("d",), (0,), ("b",), 0, 3)),
    ), policy=Policy.ARC),
    Scenario("arc-replace-b2-tie", "ARC as published (issue 10 D): a new key found in b2 "
             "while |t1| == p evicts from t1; here t2's least recent block is still "
             "STORING, and the victim is t1's, not t2's next", 3, (
        _s(PS, "c", expect=StorePlan(("c",), (0,), (), 0, 0)),
        _s(CS, "c", expect=Completion(applied=("c",))),
        _s(PS, "f", expect=StorePlan(("f",), (1,), (), 0, 1)),
        _s(CS, "f", expect=Completion(applied=("f",))),
        _s(PS, "a", expect=StorePlan(("a",), (2,), (), 0, 2)),
        _s(T, "c", expect=None),
        _s(PS, "d", expect=StorePlan(("d",), (1,), ("f",), 0, 3)),
        _s(CS, "d", expect=Completion(applied=("d",))),
        _s(PS, "f", expect=StorePlan(("f",), (1,), ("d",), 0, 4)),
        _s(PS, "d", expect=StorePlan(("d",), (0,), ("c",), 0, 5)),
        _s(CS, "f", expect=Completion(applied=("f",))),
        _s(CS, "a", expect=Completion(applied=("a",))),
        _s(PS, "c", expect=StorePlan(("c",), (2,), ("a",), 0, 6)),
    ), policy=Policy.ARC),
    Scenario("arc-reset-forgets-p", "ARC: a reset sets p back to 0; a ghost hit had raised "
             "it to 1, with which the victim would be t2's x, not t1's y", 2, (
        *_ARC_BEFORE_RESET,
        _s(PS, "x", "y", expect=StorePlan(("x", "y"), (0, 1), (), 1, 3)),
        _s(CS, "x", "y", expect=Completion(applied=("x", "y"))),
        _s(T, "x", expect=None),
        _s(PS, "z", expect=StorePlan(("z",), (1,), ("y",), 1, 4)),
    ), policy=Policy.ARC),
    Scenario("arc-reset-forgets-ghosts", "ARC: a reset empties the ghost lists; a kept ghost "
             "of a would send it to t2, and y would be the victim", 2, (
        *_ARC_BEFORE_RESET,
        _s(PS, "a", "y", expect=StorePlan(("a", "y"), (0, 1), (), 1, 3)),
        _s(CS, "a", "y", expect=Completion(applied=("a", "y"))),
        _s(PS, "z", expect=StorePlan(("z",), (0,), ("a",), 1, 4)),
    ), policy=Policy.ARC),
    Scenario("arc-failed-store-leaves-no-ghost", "ARC: a failed store leaves no ghost; a ghost "
             "hit on the second store of a would raise p, and a would be the victim", 2, (
        _s(PS, "b", expect=StorePlan(("b",), (0,), (), 0, 0)),
        _s(CS, "b", expect=Completion(applied=("b",))),
        _s(PS, "a", expect=StorePlan(("a",), (1,), (), 0, 1)),
        _s(CS, "a", success=False, expect=Completion(applied=("a",))),
        _s(PS, "a", expect=StorePlan(("a",), (1,), (), 0, 2)),
        _s(CS, "a", expect=Completion(applied=("a",))),
        _s(T, "a", expect=None),
        _s(PS, "c", expect=StorePlan(("c",), (0,), ("b",), 0, 3)),
    ), policy=Policy.ARC),
)
