"""Laws: the spec stated a second time, as relations over one call.

The transitions (:mod:`.transitions`) say what each operation *does*; the laws say what
a correct call must *satisfy*: a relation between the state before, the call, the answer
(an output, or the misuse error raised) and the state after. Each law is a total, pure
predicate over a :class:`Step`, named after the rule it states, with a docstring that
cites the decision of ``docs/spec.md`` (``docs/spec.md`` lists, per rule, its law). A
law about another operation holds vacuously. Together with the state invariants
(:mod:`.invariants`), :func:`broken_laws` names every rule one call breaks.

No law calls a transition or a method of the recency models (:mod:`.recency`): the laws
read the states' fields and derive what they need with helpers of their own, so a bug in
a transition is not repeated here. They assume the state before satisfies the
invariants. The model checker (``proofs/``) shows that the transitions satisfy every law
on every reachable state and call within its bounds, and that the laws alone catch every
spec mutant.

Two levels, as in conformance: :data:`LIFECYCLE_LAWS` accept any allowed victim (the
``--level any`` of the suite); :data:`POLICY_LAWS` demand the exact LRU or ARC victims and
recency order (``--level exact``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TypeVar, cast

from .calls import COMPLETIONS, Call, Op, Output
from .errors import NotEvictable, NotReadable, UnmatchedCompleteLoad
from .invariants import broken_invariants
from .outputs import Completion, Events, LoadPlan, StorePlan, StoreRejected
from .recency import ArcLists, LruOrder
from .state import Block, CacheState, Orphan
from .vocabulary import CopyKind, Key, LookupResult, Phase, Ticket

T = TypeVar("T")


@dataclass(frozen=True)
class Step:
    """One call as observed: the state before, the call, the answer, the state after.

    ``answer`` is the output, or the error the call raised; ``after`` is None when it
    raised (a raising call returns no state: the caller keeps ``before``).
    """

    before: CacheState
    call: Call
    answer: Output | Exception
    after: CacheState | None
    keys: tuple[Key, ...] = field(init=False, repr=False, compare=False)
    """The call's keys without repeats, first occurrence wins (D2)."""
    raised: bool = field(init=False, repr=False, compare=False)
    """Did the call raise?"""

    def __post_init__(self) -> None:
        seen: dict[Key, None] = {}
        for key in self.call.keys:
            seen.setdefault(key, None)
        # Derived once, on a frozen value: what several laws read.
        object.__setattr__(self, "keys", tuple(seen))
        object.__setattr__(self, "raised", isinstance(self.answer, Exception))
        object.__setattr__(self, "_derived", {})

    @property
    def new(self) -> CacheState:
        """The state after; the state before if the call raised."""
        return self.before if self.after is None else self.after

    def derived(self, compute: Callable[[Step], T]) -> T:
        """``compute(self)``, computed once per step (several laws read the same view)."""
        memo: dict[object, object] = self.__dict__["_derived"]
        if compute not in memo:
            memo[compute] = compute(self)
        return cast(T, memo[compute])


Law = Callable[[Step], bool]

_SPEAKS_OF: dict[str, frozenset[Op]] = {}
"""The operations each law is about, by the law's name (it holds vacuously on others)."""


def speaks_of(*ops: Op) -> Callable[[Law], Law]:
    """Mark a law as one about calls of ``ops``: :func:`laws_of` then hands it only
    those calls. The law itself stays total (on other calls it holds)."""
    def mark(law: Law) -> Law:
        _SPEAKS_OF[law.__name__] = frozenset(ops)
        return law
    return mark


# --- reading a state (the laws' own helpers, never the transitions') --------------


def _block(state: CacheState, key: Key) -> Block | None:
    return state.table.get(key)


def _phase(state: CacheState, key: Key) -> Phase:
    block = _block(state, key)
    return Phase.ABSENT if block is None else block.phase


def _ready(state: CacheState) -> frozenset[Key]:
    return frozenset(b.key for b in state.blocks if b.phase is Phase.READY)


def _evictable(state: CacheState) -> frozenset[Key]:
    """READY blocks no copy reads (D4)."""
    return frozenset(b.key for b in state.blocks if b.phase is Phase.READY and not b.loads)


def _free(state: CacheState) -> frozenset[int]:
    """Slots held by no live block and no copy a reset left running."""
    held = {b.slot for b in state.blocks} | {o.slot for o in state.orphans}
    return frozenset(range(state.capacity)) - held


def _is(step: Step, op: Op) -> bool:
    """Is this an answered call of ``op``?"""
    return step.call.op is op and not step.raised and step.after is not None


def _minus_one(tickets: tuple[Ticket, ...], ticket: Ticket) -> tuple[Ticket, ...]:
    """``tickets`` less one occurrence of ``ticket``: a job finishes once."""
    at = tickets.index(ticket)
    return tickets[:at] + tickets[at + 1:]


# --- every call: errors and the frame ----------------------------------------------

_MISUSE: dict[Op, type[Exception]] = {Op.PREPARE_LOAD: NotReadable,
                                      Op.COMPLETE_LOAD: UnmatchedCompleteLoad,
                                      Op.EVICT_IN_BACKGROUND: NotEvictable}

_CHANGES: dict[Op, frozenset[str]] = {
    Op.LOOKUP: frozenset(),
    Op.PREPARE_LOAD: frozenset({"blocks", "recency", "next_ticket"}),
    Op.COMPLETE_LOAD: frozenset({"blocks", "orphans", "recency"}),
    Op.TOUCH: frozenset({"recency"}),
    Op.PREPARE_STORE: frozenset({"blocks", "recency", "next_ticket"}),
    Op.COMPLETE_STORE: frozenset({"blocks", "orphans", "recency"}),
    Op.RESET_CACHE: frozenset({"blocks", "orphans", "recency", "epoch"}),
    Op.TAKE_EVENTS: frozenset({"announced"}),
    Op.EVICT_IN_BACKGROUND: frozenset({"blocks", "recency"}),
    Op.FAIL_NODE: frozenset({"blocks", "recency"}),
}
"""The fields of the state each operation may change; capacity and policy never change."""

_KEPT = {op: tuple(f.name for f in fields(CacheState) if f.name not in may)
         for op, may in _CHANGES.items()}
"""The fields each operation leaves as they were."""


@speaks_of(*Op)
def errors_are_named_misuse(step: Step) -> bool:
    """D5, D6, D14: the only errors are ``NotReadable`` from ``prepare_load``,
    ``UnmatchedCompleteLoad`` from ``complete_load`` in vLLM's form and ``NotEvictable``
    from the environment's ``evict_in_background``; every other call answers."""
    if not step.raised:
        return True
    wanted = _MISUSE.get(step.call.op)
    if step.call.op is Op.COMPLETE_LOAD and step.call.ticket is not None:
        wanted = None
    return wanted is not None and type(step.answer) is wanted


@speaks_of(*Op)
def misuse_changes_nothing(step: Step) -> bool:
    """D6: a call that raises changes nothing (it leaves no new state, or an equal one)."""
    return not step.raised or step.after is None or step.after == step.before


@speaks_of(*Op)
def each_operation_changes_only_its_fields(step: Step) -> bool:
    """The model: an answered call changes only the fields of the state its operation
    may change (lookup none, touch the recency order, take_events the subscriber's
    view, ...); capacity and policy never."""
    if step.raised or step.after is None or step.after is step.before:
        return True
    before, after = step.before, step.after
    return all(getattr(after, name) == getattr(before, name) for name in _KEPT[step.call.op])


# --- lookup (D1) -----------------------------------------------------------------

_ANSWER = {Phase.ABSENT: LookupResult.MISS, Phase.STORING: LookupResult.PENDING,
           Phase.READY: LookupResult.HIT}


@speaks_of(Op.LOOKUP)
def lookup_answers_the_phase(step: Step) -> bool:
    """D1: lookup answers MISS iff the key is ABSENT, PENDING iff STORING, HIT iff READY."""
    if step.call.op is not Op.LOOKUP:
        return True
    return step.answer is _ANSWER[_phase(step.before, step.call.keys[0])]


@speaks_of(Op.LOOKUP)
def lookup_is_pure(step: Step) -> bool:
    """D1: lookup returns the state it was given, unchanged."""
    return step.call.op is not Op.LOOKUP or step.after == step.before


# --- prepare_load (D2, D6, D7) ----------------------------------------------------


@speaks_of(Op.PREPARE_LOAD)
def prepare_load_needs_ready_blocks(step: Step) -> bool:
    """D6: prepare_load raises ``NotReadable`` iff one of its keys is not READY (the whole
    call fails, no key gains a reader)."""
    if step.call.op is not Op.PREPARE_LOAD:
        return True
    unreadable = any(_phase(step.before, k) is not Phase.READY for k in step.keys)
    return unreadable == isinstance(step.answer, NotReadable)


@speaks_of(Op.PREPARE_LOAD)
def load_plan_reads_each_key_once(step: Step) -> bool:
    """D2, D7: a load plan names the call's keys once each, in call order, with the slot
    each block was stored in and the current epoch."""
    if not _is(step, Op.PREPARE_LOAD):
        return True
    plan = step.answer
    if not isinstance(plan, LoadPlan):
        return False
    slots = tuple(b.slot if (b := _block(step.before, k)) else -1 for k in step.keys)
    return (plan.keys, plan.slots, plan.epoch) == (step.keys, slots, step.before.epoch)


@speaks_of(Op.PREPARE_LOAD)
def prepare_load_adds_one_reader(step: Step) -> bool:
    """D2, D7: each key of an accepted prepare_load gains exactly one reader, the plan's
    job (its ticket, last); no other block changes."""
    if not _is(step, Op.PREPARE_LOAD) or not isinstance(step.answer, LoadPlan):
        return True
    ticket = step.answer.ticket
    expected = {b.key: b for b in step.before.blocks}
    for key in step.keys:
        b = expected.get(key)
        if b is None:
            return False  # no block to read: not a load of the spec's
        expected[key] = Block(b.key, b.phase, b.slot, b.ticket, (*b.loads, ticket))
    return step.new.blocks == frozenset(expected.values())


@speaks_of(Op.PREPARE_LOAD, Op.PREPARE_STORE)
def plans_issue_a_fresh_ticket(step: Step) -> bool:
    """D7: every accepted plan (store or load) issues the next ticket, never issued
    before, and the next plan gets the one after it."""
    plan = step.answer
    if not isinstance(plan, StorePlan | LoadPlan) or step.after is None:
        return True
    return plan.ticket == step.before.next_ticket == step.after.next_ticket - 1


# --- completions (D5, D7) --------------------------------------------------------

_KIND = {Op.COMPLETE_LOAD: CopyKind.LOAD, Op.COMPLETE_STORE: CopyKind.STORE}
APPLIED, RELEASED, IGNORED = "applied", "released", "ignored"


def _live_jobs(state: CacheState, key: Key, kind: CopyKind) -> tuple[Ticket, ...]:
    """The jobs of ``kind`` running on ``key``'s live block, oldest first."""
    b = _block(state, key)
    if b is None:
        return ()
    if kind is CopyKind.LOAD:
        return b.loads
    return (b.ticket,) if b.phase is Phase.STORING and b.ticket is not None else ()


def _orphan_for(state: CacheState, key: Key, kind: CopyKind, ticket: Ticket | None
                ) -> Orphan | None:
    """The copy a reset left running that the completion finishes: the one holding
    ``ticket``, or in vLLM's form (None) the oldest (lowest epoch)."""
    found = [o for o in state.orphans if o.key == key and o.kind is kind
             and (ticket is None or ticket in o.tickets)]
    return min(found, key=lambda o: o.epoch, default=None)


def _landing(state: CacheState, key: Key, kind: CopyKind, ticket: Ticket | None
             ) -> tuple[str, Ticket | None]:
    """Where a completion lands for ``key`` and the job it finishes there (D5, D7):
    the live block running the job (vLLM's form: its oldest), else a copy a reset left
    running, else nowhere."""
    live = _live_jobs(state, key, kind)
    if ticket is None and live:
        return APPLIED, live[0]
    if ticket is not None and ticket in live:
        return APPLIED, ticket
    orphan = _orphan_for(state, key, kind, ticket)
    if orphan is not None:
        return RELEASED, orphan.tickets[0] if ticket is None else ticket
    return IGNORED, None


def _landings(step: Step) -> dict[Key, tuple[str, Ticket | None]]:
    """Where the completion lands for each of its keys, and the job it finishes there."""
    return step.derived(_landings_of)


def _landings_of(step: Step) -> dict[Key, tuple[str, Ticket | None]]:
    kind = _KIND[step.call.op]
    return {k: _landing(step.before, k, kind, step.call.ticket) for k in step.keys}


@speaks_of(*COMPLETIONS)
def completions_sort_keys_by_job(step: Step) -> bool:
    """D5, D7: a completion lists each key once: ``applied`` where the job runs on the
    live block (ticket form: job T; vLLM's form: the block's running job, for loads the
    oldest reader), ``released`` where it runs on a copy a reset left running (vLLM's
    form: the oldest), ``ignored`` where no such job runs; in call order."""
    if not (_is(step, Op.COMPLETE_LOAD) or _is(step, Op.COMPLETE_STORE)):
        return True
    done = step.answer
    if not isinstance(done, Completion):
        return False
    landed = _landings(step)
    return all(getattr(done, where) == tuple(k for k in step.keys if landed[k][0] == where)
               for where in (APPLIED, RELEASED, IGNORED))


@speaks_of(Op.COMPLETE_LOAD)
def complete_load_needs_a_load(step: Step) -> bool:
    """D5, D6: in vLLM's form complete_load raises ``UnmatchedCompleteLoad`` iff one of
    its keys has no load running, live or left by a reset; the ticket form never
    raises."""
    if step.call.op is not Op.COMPLETE_LOAD:
        return True
    unmatched = step.call.ticket is None and any(
        where == IGNORED for where, _ in _landings(step).values())
    return unmatched == isinstance(step.answer, UnmatchedCompleteLoad)


@speaks_of(Op.COMPLETE_LOAD)
def complete_load_removes_the_finished_reader(step: Step) -> bool:
    """D5, D7: each applied key's block loses exactly the finished load (job T, or in
    vLLM's form the oldest reader); no other block changes."""
    if not _is(step, Op.COMPLETE_LOAD):
        return True
    expected = {b.key: b for b in step.before.blocks}
    for key, (where, ticket) in _landings(step).items():
        if where == APPLIED and ticket is not None:
            b = expected[key]
            expected[key] = Block(b.key, b.phase, b.slot, b.ticket, _minus_one(b.loads, ticket))
    return step.new.blocks == frozenset(expected.values())


@speaks_of(Op.COMPLETE_STORE)
def complete_store_applies_the_outcome(step: Step) -> bool:
    """D5: each applied key's block becomes READY in its slot, holding no ticket
    (success), or is gone and its slot free (failure); no other block changes."""
    if not _is(step, Op.COMPLETE_STORE):
        return True
    expected = {b.key: b for b in step.before.blocks}
    for key, (where, _) in _landings(step).items():
        if where == APPLIED:
            b = expected.pop(key)
            if step.call.success:
                expected[key] = Block(key, Phase.READY, b.slot)
    return step.new.blocks == frozenset(expected.values())


@speaks_of(*COMPLETIONS)
def completions_release_orphan_jobs(step: Step) -> bool:
    """D7: each released key's copy (the one holding T; vLLM's form: the oldest) loses
    the finished job, and is gone with its last job, freeing its slot; no other copy
    changes."""
    if not (_is(step, Op.COMPLETE_LOAD) or _is(step, Op.COMPLETE_STORE)):
        return True
    kind = _KIND[step.call.op]
    expected = set(step.before.orphans)
    for key, (where, ticket) in _landings(step).items():
        orphan = _orphan_for(step.before, key, kind, step.call.ticket)
        if where == RELEASED and orphan is not None and ticket is not None:
            expected.discard(orphan)
            left = _minus_one(orphan.tickets, ticket)
            if left:
                expected.add(Orphan(orphan.key, orphan.kind, orphan.epoch, orphan.slot, left))
    return step.new.orphans == frozenset(expected)


# --- prepare_store (D3, D4, D12, D13) ---------------------------------------------


@dataclass(frozen=True)
class _Room:
    """What a prepare_store has to work with: its new keys, the free slots, and the
    blocks it may evict (READY, no readers, not named in the call)."""

    new: tuple[Key, ...]
    free: frozenset[int]
    candidates: frozenset[Key]

    @property
    def needed(self) -> int:
        """How many blocks must be evicted: never more than the free slots fall short."""
        return max(0, len(self.new) - len(self.free))


def _room(step: Step) -> _Room:
    return step.derived(_room_of)


def _room_of(step: Step) -> _Room:
    s = step.before
    new = tuple(k for k in step.keys if _phase(s, k) is Phase.ABSENT)
    return _Room(new, _free(s), _evictable(s) - frozenset(step.keys))


@speaks_of(Op.PREPARE_STORE)
def store_rejects_only_when_unavoidable(step: Step) -> bool:
    """D3: prepare_store rejects iff free slots plus evictable blocks not named in the call
    are fewer than its new keys; the rejection says how many were needed and available."""
    if not _is(step, Op.PREPARE_STORE):
        return True
    room = _room(step)
    if room.needed > len(room.candidates):
        return step.answer == StoreRejected(len(room.new), len(room.free) + len(room.candidates))
    return isinstance(step.answer, StorePlan)


@speaks_of(Op.PREPARE_STORE)
def rejection_changes_nothing(step: Step) -> bool:
    """D3: a rejected prepare_store leaves the state as it was: nothing evicted, no
    ticket issued, no events."""
    return not isinstance(step.answer, StoreRejected) or step.after == step.before


@speaks_of(Op.PREPARE_STORE)
def store_plan_names_the_absent_keys(step: Step) -> bool:
    """D2, D13: a store plan names the call's ABSENT keys once each, in call order (keys
    already STORING or READY are skipped), one slot each, and the current epoch."""
    plan = step.answer
    if not _is(step, Op.PREPARE_STORE) or not isinstance(plan, StorePlan):
        return True
    return (plan.keys == _room(step).new and len(plan.slots) == len(plan.keys)
            and plan.epoch == step.before.epoch)


@speaks_of(Op.PREPARE_STORE)
def store_evicts_exactly_what_is_needed(step: Step) -> bool:
    """D3: an accepted prepare_store evicts exactly as many distinct blocks as the free
    slots fall short of its new keys, never more."""
    plan = step.answer
    if not _is(step, Op.PREPARE_STORE) or not isinstance(plan, StorePlan):
        return True
    return len(plan.evicted) == len(set(plan.evicted)) == _room(step).needed


@speaks_of(Op.PREPARE_STORE)
def store_evicts_only_allowed_blocks(step: Step) -> bool:
    """D4: eviction takes only READY blocks without readers that the call does not name."""
    plan = step.answer
    if not _is(step, Op.PREPARE_STORE) or not isinstance(plan, StorePlan):
        return True
    return set(plan.evicted) <= _room(step).candidates


@speaks_of(Op.PREPARE_STORE)
def store_uses_free_slots(step: Step) -> bool:
    """D12: each new key gets its own slot, free before the call or freed by its
    evictions: never one a live block or a running copy holds."""
    plan = step.answer
    if not _is(step, Op.PREPARE_STORE) or not isinstance(plan, StorePlan):
        return True
    s = step.before
    freed = {b.slot for k in plan.evicted if (b := _block(s, k)) is not None}
    return len(set(plan.slots)) == len(plan.slots) and set(plan.slots) <= _free(s) | freed


@speaks_of(Op.PREPARE_STORE)
def prepare_store_starts_the_stores(step: Step) -> bool:
    """D3, D7: after an accepted prepare_store the evicted blocks are gone and each new
    key is STORING in its planned slot under the plan's ticket; no other block changes."""
    plan = step.answer
    if not _is(step, Op.PREPARE_STORE) or not isinstance(plan, StorePlan):
        return True
    kept = frozenset(b for b in step.before.blocks if b.key not in plan.evicted)
    started = frozenset(Block(k, Phase.STORING, s, plan.ticket)
                        for k, s in zip(plan.keys, plan.slots, strict=False))
    return step.new.blocks == kept | started


# --- reset_cache (D7) and take_events (D8) ----------------------------------------


@speaks_of(Op.RESET_CACHE)
def reset_drops_every_block(step: Step) -> bool:
    """D7: reset_cache drops every block and starts the next epoch, which it returns."""
    if not _is(step, Op.RESET_CACHE):
        return True
    epoch = step.before.epoch + 1
    return not step.new.blocks and step.new.epoch == epoch and step.answer == epoch


@speaks_of(Op.RESET_CACHE)
def reset_holds_running_copies(step: Step) -> bool:
    """D7: reset_cache keeps every running copy as a copy holding its slot and its jobs'
    tickets, in the epoch it started in: a store for each STORING block, a load for
    each block with readers; copies left by earlier resets stay."""
    if not _is(step, Op.RESET_CACHE):
        return True
    s = step.before
    stores = {Orphan(b.key, CopyKind.STORE, s.epoch, b.slot, (b.ticket,))
              for b in s.blocks if b.phase is Phase.STORING and b.ticket is not None}
    loads = {Orphan(b.key, CopyKind.LOAD, s.epoch, b.slot, b.loads)
             for b in s.blocks if b.loads}
    return step.new.orphans == s.orphans | stores | loads


@speaks_of(Op.TAKE_EVENTS)
def events_are_the_net_change(step: Step) -> bool:
    """D8: take_events reports as stored the READY keys not yet announced, and as removed
    the announced keys no longer READY."""
    if not _is(step, Op.TAKE_EVENTS):
        return True
    ready, told = _ready(step.before), step.before.announced
    return step.answer == Events(stored=ready - told, removed=told - ready)


@speaks_of(Op.TAKE_EVENTS)
def subscribers_learn_the_ready_set(step: Step) -> bool:
    """D8: after take_events the subscriber's view is the READY set (replaying the
    events from the start gives exactly the READY keys)."""
    return not _is(step, Op.TAKE_EVENTS) or step.new.announced == _ready(step.before)


# --- the environment's background eviction (D14) ---------------------------------


@speaks_of(Op.EVICT_IN_BACKGROUND)
def background_eviction_needs_evictable_blocks(step: Step) -> bool:
    """D14: evict_in_background raises ``NotEvictable`` iff one of its keys is not READY
    with no readers (absent, STORING or being read): the whole call fails."""
    if step.call.op is not Op.EVICT_IN_BACKGROUND:
        return True
    pinned = any(k not in _evictable(step.before) for k in step.keys)
    return pinned == isinstance(step.answer, NotEvictable)


@speaks_of(Op.EVICT_IN_BACKGROUND)
def background_eviction_drops_the_blocks(step: Step) -> bool:
    """D14: an answered evict_in_background removes exactly its keys' blocks (their
    slots free again), answers nothing, and leaves every other block, the copies a
    reset left running, the tickets and the subscriber's view as they were (the removal
    is announced at the next take_events)."""
    if not _is(step, Op.EVICT_IN_BACKGROUND):
        return True
    kept = frozenset(b for b in step.before.blocks if b.key not in step.keys)
    return step.answer is None and step.new.blocks == kept


# --- a node's failure (D15) -------------------------------------------------------


@speaks_of(Op.FAIL_NODE)
def node_failure_loses_every_block(step: Step) -> bool:
    """D15: fail_node answers nothing and leaves no block, in any phase (the copies
    running on them end with the node: no orphan is made for them); the copies a reset
    left running, the epoch, the tickets and the subscriber's view stay as they were
    (the loss is announced at the next take_events)."""
    if not _is(step, Op.FAIL_NODE):
        return True
    return step.answer is None and not step.new.blocks and (
        step.new.orphans == step.before.orphans)


# --- exact policies (D10) --------------------------------------------------------


def _became_evictable(step: Step) -> tuple[Key, ...]:
    """The call's keys that are evictable after it and were not before, in call order."""
    return step.derived(_became_evictable_of)


def _became_evictable_of(step: Step) -> tuple[Key, ...]:
    if step.new.blocks is step.before.blocks:
        return ()
    before, after = _evictable(step.before), _evictable(step.new)
    return tuple(k for k in step.keys if k in after and k not in before)


def _lru(step: Step) -> tuple[LruOrder, LruOrder] | None:
    """The LRU queues before and after an answered call (None: another policy)."""
    if step.raised or step.after is None:
        return None
    a, b = step.before.recency, step.after.recency
    return (a, b) if isinstance(a, LruOrder) and isinstance(b, LruOrder) else None


def _arc(step: Step) -> tuple[ArcLists, ArcLists] | None:
    """The ARC lists before and after an answered call (None: another policy)."""
    if step.raised or step.after is None:
        return None
    a, b = step.before.recency, step.after.recency
    return (a, b) if isinstance(a, ArcLists) and isinstance(b, ArcLists) else None


@speaks_of(Op.RESET_CACHE, Op.FAIL_NODE)
def reset_forgets_the_order(step: Step) -> bool:
    """D7, D10, D15: reset_cache and a node's failure empty the eviction order (ARC:
    lists, ghosts and ``p``)."""
    if not (_is(step, Op.RESET_CACHE) or _is(step, Op.FAIL_NODE)):
        return True
    order = step.new.recency
    if isinstance(order, LruOrder):
        return order == LruOrder()
    return order == ArcLists(step.before.capacity)


@speaks_of(*(op for op in Op if op is not Op.TOUCH))
def lru_queue_follows_evictability(step: Step) -> bool:
    """D10 (LRU): on every call but touch, a block that stays evictable keeps its place,
    one no longer evictable leaves the queue, and one that becomes evictable joins the
    most-recent end, in call order; lookup, prepare_load and prepare_store are no uses."""
    lru = _lru(step)
    if lru is None or step.call.op is Op.TOUCH:
        return True
    before, after = lru
    if step.new.blocks is step.before.blocks:  # the same blocks: the same evictable ones
        return after.order == before.order
    still = _evictable(step.new)
    return after.order == tuple(k for k in before.order if k in still) + _became_evictable(step)


@speaks_of(Op.TOUCH)
def lru_touch_moves_keys_to_the_recent_end(step: Step) -> bool:
    """D10 (LRU): touch moves its evictable keys to the most-recent end, the call's first
    key most recent; other keys keep their order."""
    lru = _lru(step)
    if lru is None or step.call.op is not Op.TOUCH:
        return True
    before, after = lru
    touched = [k for k in step.keys if k in before.order]
    rest = tuple(k for k in before.order if k not in touched)
    return after.order == rest + tuple(reversed(touched))


@speaks_of(Op.PREPARE_STORE)
def lru_evicts_the_least_recent(step: Step) -> bool:
    """D10 (LRU): prepare_store evicts the least recent evictable blocks not named in
    the call, least recent first."""
    lru = _lru(step)
    plan = step.answer
    if lru is None or not isinstance(plan, StorePlan):
        return True
    room = _room(step)
    return plan.evicted == tuple(k for k in lru[0].order if k in room.candidates)[:room.needed]


def _moved_to_recent_end(keys: tuple[Key, ...], moved: tuple[Key, ...],
                         live: frozenset[Key]) -> tuple[Key, ...]:
    """``keys`` less those no longer live, the ``moved`` ones (in their order) last."""
    return (tuple(k for k in keys if k in live and k not in moved)
            + tuple(k for k in moved if k in keys))


@speaks_of(Op.LOOKUP, Op.PREPARE_LOAD, *COMPLETIONS, Op.TAKE_EVENTS)
def arc_lists_follow_evictability(step: Step) -> bool:
    """D10 (ARC): on lookup, loads, completions and take_events, a block that becomes
    evictable moves to the most-recent end of its list (``t1`` or ``t2``), in call
    order; a block no longer live leaves its list, with no ghost (a failed store); ghosts
    and ``p`` stay."""
    arc = _arc(step)
    if arc is None or step.call.op in (Op.TOUCH, Op.PREPARE_STORE, Op.RESET_CACHE):
        return True
    before, after = arc
    if step.new.blocks is step.before.blocks:  # the same blocks: nothing moves
        return after == before
    live, moved = frozenset(step.new.table), _became_evictable(step)
    return (after.t1 == _moved_to_recent_end(before.t1, moved, live)
            and after.t2 == _moved_to_recent_end(before.t2, moved, live)
            and (after.b1, after.b2, after.p) == (before.b1, before.b2, before.p))


@speaks_of(Op.TOUCH)
def arc_touch_moves_keys_to_the_recent_end(step: Step) -> bool:
    """D10 (ARC): touch moves a READY key of ``t1`` and any key of ``t2`` to the
    most-recent end of ``t2``, a STORING key of ``t1`` to the most-recent end of
    ``t1``, the call's first key most recent; ghosts and ``p`` stay."""
    arc = _arc(step)
    if arc is None or step.call.op is not Op.TOUCH:
        return True
    before, after = arc
    ready = _ready(step.before)
    stay = tuple(k for k in reversed(step.keys) if k in before.t1 and k not in ready)
    up = tuple(k for k in reversed(step.keys)
               if k in before.t2 or (k in before.t1 and k in ready))
    return (after.t1 == tuple(k for k in before.t1 if k not in stay + up) + stay
            and after.t2 == tuple(k for k in before.t2 if k not in up) + up
            and (after.b1, after.b2, after.p) == (before.b1, before.b2, before.p))


@speaks_of(Op.EVICT_IN_BACKGROUND)
def arc_background_eviction_makes_ghosts(step: Step) -> bool:
    """D10, D14 (ARC): a block evicted in the background leaves ``t1`` or ``t2`` and
    becomes the most recent ghost of that list (``b1`` or ``b2``), in call order, as a
    victim of REPLACE does; ``p`` stays."""
    arc = _arc(step)
    if arc is None or step.call.op is not Op.EVICT_IN_BACKGROUND:
        return True
    before, after = arc
    gone = frozenset(step.keys)
    return (after.t1 == tuple(k for k in before.t1 if k not in gone)
            and after.t2 == tuple(k for k in before.t2 if k not in gone)
            and after.b1 == before.b1 + tuple(k for k in step.keys if k in before.t1)
            and after.b2 == before.b2 + tuple(k for k in step.keys if k in before.t2)
            and after.p == before.p)


def _arc_target(arc: ArcLists, key: Key) -> int:
    """ARC's adaptation for a request of ``key``: a ghost hit in ``b1`` raises the target
    size ``p`` of ``t1`` by ``max(1, |b2| // |b1|)``, one in ``b2`` lowers it by
    ``max(1, |b1| // |b2|)``, within ``0 .. c`` (the paper's deltas, rounded down)."""
    b1, b2 = len(arc.b1), len(arc.b2)
    if key in arc.b1:
        return min(arc.capacity, arc.p + max(1, b2 // b1))
    if key in arc.b2:
        return max(0, arc.p - max(1, b1 // b2))
    return arc.p


def _arc_replace(arc: ArcLists, key: Key, allowed: frozenset[Key]) -> Key | None:
    """ARC's REPLACE: the least recent allowed key of ``t1`` if ``|t1| > p``, or if
    ``key`` is in ``b2`` and ``|t1| == p``; else of ``t2``; the other list's when the
    preferred one has none allowed."""
    t1_first = len(arc.t1) > arc.p or (key in arc.b2 and len(arc.t1) == arc.p)
    lists = (arc.t1, arc.t2) if t1_first else (arc.t2, arc.t1)
    return next((k for keys in lists for k in keys if k in allowed), None)


def _arc_trimmed(t1: tuple[Key, ...], t2: tuple[Key, ...], b1: tuple[Key, ...],
                 b2: tuple[Key, ...], c: int) -> tuple[tuple[Key, ...], tuple[Key, ...]]:
    """The ghosts after ARC's case IV deletions, oldest first: ``b1`` while
    ``|t1| + |b1| > c``, then ``b2`` (``b1`` once ``b2`` is empty) while the four lists
    hold more than ``2c`` keys."""
    while b1 and len(t1) + len(b1) > c:
        b1 = b1[1:]
    while len(t1) + len(t2) + len(b1) + len(b2) > 2 * c:
        b1, b2 = (b1, b2[1:]) if b2 else (b1[1:], b2)
    return b1, b2


def _arc_requests(step: Step) -> tuple[ArcLists, tuple[Key, ...]] | None:
    """The ARC lists and victims after a prepare_store's new keys, each one request of
    the paper in call order: adapt ``p``; if no slot is free for it, REPLACE (the victim
    becomes the most recent ghost of its list); insert it (a ghost into ``t2``, any other
    key into ``t1``) and trim the ghosts. None if REPLACE finds no victim."""
    return step.derived(_arc_requests_of)


def _arc_requests_of(step: Step) -> tuple[ArcLists, tuple[Key, ...]] | None:
    arc = step.before.recency
    if not isinstance(arc, ArcLists):
        return None
    room = _room(step)
    t1, t2, b1, b2, p, c = arc.t1, arc.t2, arc.b1, arc.b2, arc.p, arc.capacity
    victims: list[Key] = []
    for number, key in enumerate(room.new):
        p = _arc_target(ArcLists(c, t1, t2, b1, b2, p), key)
        if number >= len(room.free):
            victim = _arc_replace(ArcLists(c, t1, t2, b1, b2, p), key,
                                  room.candidates - frozenset(victims))
            if victim is None:
                return None
            if victim in t1:
                t1, b1 = tuple(k for k in t1 if k != victim), (*b1, victim)
            else:
                t2, b2 = tuple(k for k in t2 if k != victim), (*b2, victim)
            victims.append(victim)
        if key in b1 or key in b2:
            b1, b2 = tuple(k for k in b1 if k != key), tuple(k for k in b2 if k != key)
            t2 = (*t2, key)
        else:
            t1 = (*t1, key)
        b1, b2 = _arc_trimmed(t1, t2, b1, b2, c)
    return ArcLists(c, t1, t2, b1, b2, p), tuple(victims)


@speaks_of(Op.PREPARE_STORE)
def arc_evicts_the_replace_victim(step: Step) -> bool:
    """D10 (ARC): each new key of prepare_store is one request of the paper, in call
    order; when no slot is free for it, the victim is REPLACE's, taken among the
    evictable blocks not named in the call (the other list's when the preferred one has
    none)."""
    plan = step.answer
    if _arc(step) is None or not isinstance(plan, StorePlan):
        return True
    found = _arc_requests(step)
    return found is not None and plan.evicted == found[1]


@speaks_of(Op.PREPARE_STORE)
def arc_store_updates_the_lists(step: Step) -> bool:
    """D10 (ARC): after an accepted prepare_store the lists, ghosts and ``p`` are those
    of the paper's requests, one per new key in call order: adapt, replace, insert
    (ghost hits into ``t2``, others into ``t1``), trim the ghosts."""
    arc = _arc(step)
    if arc is None or not isinstance(step.answer, StorePlan):
        return True
    found = _arc_requests(step)
    return found is not None and arc[1] == found[0]


# --- all of them ---------------------------------------------------------------

LIFECYCLE_LAWS: tuple[Law, ...] = (
    lookup_answers_the_phase,
    lookup_is_pure,
    prepare_load_needs_ready_blocks,
    load_plan_reads_each_key_once,
    prepare_load_adds_one_reader,
    plans_issue_a_fresh_ticket,
    complete_load_needs_a_load,
    completions_sort_keys_by_job,
    complete_load_removes_the_finished_reader,
    complete_store_applies_the_outcome,
    completions_release_orphan_jobs,
    store_rejects_only_when_unavoidable,
    rejection_changes_nothing,
    store_plan_names_the_absent_keys,
    store_evicts_exactly_what_is_needed,
    store_evicts_only_allowed_blocks,
    store_uses_free_slots,
    prepare_store_starts_the_stores,
    reset_drops_every_block,
    reset_holds_running_copies,
    events_are_the_net_change,
    subscribers_learn_the_ready_set,
    background_eviction_needs_evictable_blocks,
    background_eviction_drops_the_blocks,
    node_failure_loses_every_block,
    errors_are_named_misuse,
    misuse_changes_nothing,
    each_operation_changes_only_its_fields,
)
"""The laws any allowed victim satisfies (``--level any``): per operation, then those of
every call."""

POLICY_LAWS: tuple[Law, ...] = (
    reset_forgets_the_order,
    lru_queue_follows_evictability,
    lru_touch_moves_keys_to_the_recent_end,
    lru_evicts_the_least_recent,
    arc_lists_follow_evictability,
    arc_touch_moves_keys_to_the_recent_end,
    arc_evicts_the_replace_victim,
    arc_store_updates_the_lists,
    arc_background_eviction_makes_ghosts,
)
"""The exact LRU and ARC laws (``--level exact``): which victims, and how recency moves."""

LAWS: tuple[Law, ...] = LIFECYCLE_LAWS + POLICY_LAWS
"""Every law, lifecycle first."""

LAW_NAMES: tuple[str, ...] = tuple(law.__name__ for law in LAWS)

_BY_OP: dict[tuple[Op, bool], tuple[Law, ...]] = {
    (op, exact): tuple(law for law in (LAWS if exact else LIFECYCLE_LAWS)
                       if op in _SPEAKS_OF[law.__name__])
    for op in Op for exact in (True, False)}


def laws_of(op: Op, exact: bool = True) -> tuple[Law, ...]:
    """The laws about calls of ``op``, in :data:`LAWS` order (the others hold on them
    vacuously); ``exact=False`` leaves the policy laws out."""
    return _BY_OP[op, exact]


def broken_laws(before: CacheState, call: Call, answer: Output | Exception,
                after: CacheState | None, *, exact: bool = True) -> tuple[str, ...]:
    """The names of the laws one call breaks, then of the invariants its state after
    breaks; empty if it is a step the spec allows. ``exact=False`` leaves the policy
    laws out (any allowed victim and order). ``after`` is None when the call raised."""
    step = Step(before, call, answer, after)
    broken = tuple(law.__name__ for law in laws_of(call.op, exact) if not law(step))
    return broken + (() if after is None else broken_invariants(after))
