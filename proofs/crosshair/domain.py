"""The bounded domains CrossHair draws states and calls from.

A domain is every state the spec reaches from an empty tier within a bound, found
breadth first with the spec's own transitions (so every state in it is one the
transitions really produce), one state per class of states equal up to renaming keys
and tickets (the spec only compares keys and tickets for equality), each with the
shortest call sequence that reaches it (a manager is driven along it). The domain's
states are the first real ones found, never renamed ones, so each trace replays to its
state exactly.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from functools import cache
from itertools import permutations, product
from pathlib import Path

from kvoffload.spec import (
    CacheState,
    Call,
    CopyKind,
    Key,
    LruOrder,
    MisuseError,
    Op,
    Phase,
    Policy,
    apply,
    initial_state,
    renumbered,
)


@dataclass(frozen=True)
class Bound:
    """What a domain explores: a tier, a key universe and the calls made."""

    name: str
    policy: Policy
    capacity: int
    keys: tuple[int, ...]
    width: int
    """Keys per store, touch and load call (duplicates included); completions name one."""
    resets: int
    readers: int
    vllm_form: bool
    """Completions in vLLM's form (no ticket) besides the ticket form."""
    loads: bool = True
    depth: int | None = None
    """At most this many calls from the empty tier (None: every reachable state)."""

    def describe(self) -> str:
        reach = ("every reachable state" if self.depth is None
                 else f"states within {self.depth} calls")
        forms = "ticket and vLLM completion forms" if self.vllm_form else "ticket completions"
        loads = f"{self.readers} reader(s)" if self.loads else "no loads"
        return (f"{self.policy.value.upper()}, capacity {self.capacity}, keys "
                f"{list(self.keys)}, {self.width} key(s) per call (duplicates included), "
                f"{self.resets} reset(s), {loads}, {forms}: {reach}")


ONE_SLOT = Bound("one-slot", Policy.LRU, capacity=1, keys=(0, 1), width=2, resets=1,
                 readers=2, vllm_form=True)
"""A confirmed bound: one slot, two keys, a reset (copies left running), two readers."""

NO_RESET = Bound("no-reset", Policy.LRU, capacity=2, keys=(0, 1, 2), width=2, resets=0,
                 readers=1, vllm_form=True)
"""A confirmed bound: two slots, three keys (eviction, rejection), no reset."""

LRU = Bound("lru", Policy.LRU, capacity=2, keys=(0, 1, 2), width=2, resets=1, readers=1,
            vllm_form=True)
"""The LRU bound of the power measurement: closed (every reachable state), too many
states times arguments for CrossHair to exhaust every contract in minutes."""

ARC = Bound("arc", Policy.ARC, capacity=2, keys=(0, 1, 2, 3), width=1, resets=0, readers=1,
            vllm_form=False, loads=False, depth=10)
"""ARC's space at capacity 2 is too large to close for CrossHair (22,071 states with three
keys and no resets before symmetry); four keys, so that both ghost lists fill, cut at ten
calls. Sampled, never confirmed."""

BOUNDS: dict[str, Bound] = {b.name: b for b in (ONE_SLOT, NO_RESET, LRU, ARC)}

FRESH = 9
"""A key no state of any domain has ever seen (ARC's ghosts make every universe key known)."""


@dataclass(frozen=True)
class Domain:
    bound: Bound
    states: tuple[CacheState, ...]
    traces: Mapping[CacheState, tuple[Call, ...]]
    """Each state's shortest call sequence from the empty tier."""

    @property
    def keys(self) -> tuple[int, ...]:
        """The keys a ``Key`` argument ranges over: the universe and one fresh key."""
        return (*self.bound.keys, FRESH)

    @property
    def key_lists(self) -> tuple[tuple[int, ...], ...]:
        """What a ``Keys`` argument ranges over: every list of 0 to ``width`` keys."""
        return tuple(seq for n in range(self.bound.width + 1)
                     for seq in product(self.keys, repeat=n))

    @property
    def tickets(self) -> tuple[int, ...]:
        """Every ticket a state of the domain holds, and the next one (never issued)."""
        return tuple(range(max(s.next_ticket for s in self.states) + 1))


def _calls(state: CacheState, bound: Bound) -> Iterator[Call]:
    seqs = [seq for n in range(1, bound.width + 1) for seq in product(bound.keys, repeat=n)]
    for seq in seqs:
        yield Call(Op.PREPARE_STORE, seq)
        yield Call(Op.TOUCH, seq)
        if bound.loads and all(state.phase(k) is Phase.READY
                               and state.table[k].readers < bound.readers for k in seq):
            yield Call(Op.PREPARE_LOAD, seq)
    forms: tuple[int | None, ...] = (None,) if bound.vllm_form else ()
    for key in bound.keys:
        stores, loads = _running(state, key)
        for ticket in (*stores, *forms):
            for success in (True, False):
                yield Call(Op.COMPLETE_STORE, (key,), success=success, ticket=ticket)
        for ticket in (*loads, *forms):
            yield Call(Op.COMPLETE_LOAD, (key,), ticket=ticket)
    if state.epoch < bound.resets:
        yield Call(Op.RESET_CACHE)
    yield Call(Op.TAKE_EVENTS)


def _running(state: CacheState, key: Key) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The tickets of the store and load jobs running on ``key``, live or orphaned."""
    block = state.table.get(key)
    stores = [] if block is None or block.ticket is None else [block.ticket]
    loads = [] if block is None else list(block.loads)
    for orphan in state.orphans:
        if orphan.key == key:
            (stores if orphan.kind is CopyKind.STORE else loads).extend(orphan.tickets)
    return tuple(stores), tuple(loads)


def relabel(state: CacheState, names: Mapping[Key, Key]) -> CacheState:
    """``state`` with every key renamed by ``names``."""
    recency = state.recency
    if isinstance(recency, LruOrder):
        recency = LruOrder(tuple(names[k] for k in recency.order))
    else:
        recency = replace(recency, t1=tuple(names[k] for k in recency.t1),
                          t2=tuple(names[k] for k in recency.t2),
                          b1=tuple(names[k] for k in recency.b1),
                          b2=tuple(names[k] for k in recency.b2))
    return replace(state, recency=recency,
                   blocks=frozenset(replace(b, key=names[b.key]) for b in state.blocks),
                   orphans=frozenset(replace(o, key=names[o.key]) for o in state.orphans),
                   announced=frozenset(names[k] for k in state.announced))


def _sortable(state: CacheState) -> tuple[object, ...]:
    recency = state.recency
    lists = ((recency.order,) if isinstance(recency, LruOrder)
             else (recency.t1, recency.t2, recency.b1, recency.b2, recency.p))
    keyed = [(repr(b.key), b.phase.value, b.slot, -1 if b.ticket is None else b.ticket, b.loads)
             for b in state.blocks]
    orphans = [(repr(o.key), o.kind.value, o.epoch, o.slot, o.tickets) for o in state.orphans]
    return (tuple(sorted(keyed)), tuple(sorted(orphans)), lists, state.epoch,
            tuple(sorted(map(repr, state.announced))), state.next_ticket)


def canonical(state: CacheState, keys: tuple[int, ...]) -> tuple[object, ...]:
    """The least form of ``state`` over every renaming of its keys and tickets."""
    return min(_sortable(renumbered(relabel(state, dict(zip(keys, perm, strict=True))))[0])
               for perm in permutations(keys))


def _digest(bound: Bound) -> str:
    """What a domain depends on: the bound, this module and the spec's source."""
    root = Path(__file__).resolve().parents[2] / "spec" / "kvoffload" / "spec"
    text = [repr(bound), Path(__file__).read_text()]
    text += [p.read_text() for p in sorted(root.glob("*.py"))]
    return hashlib.sha256("\0".join(text).encode()).hexdigest()[:16]


CACHE = Path(__file__).resolve().parents[2] / ".cache" / "crosshair"
"""Where built domains are kept (git ignores ``.cache/``)."""


@cache
def load(bound: Bound, write: bool = False) -> Domain:
    """:func:`reachable`, cached on disk by :func:`_digest`: every CrossHair run of a
    measurement needs the same domains. Inside CrossHair (whose audit wall forbids
    writing files) the cache is only read; ``python -m proofs.crosshair_check`` builds
    and writes it first (``write=True``)."""
    path = CACHE / f"{bound.name}-{_digest(bound)}.pickle"
    if path.exists():
        found = pickle.loads(path.read_bytes())
        if isinstance(found, Domain):
            return found
    domain = reachable(bound)
    if write:
        CACHE.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(domain))
    return domain


def reachable(bound: Bound) -> Domain:
    """Every state the spec reaches within ``bound``, breadth first, one per class."""
    root = initial_state(bound.capacity, bound.policy)
    traces: dict[CacheState, tuple[Call, ...]] = {root: ()}
    seen = {canonical(root, bound.keys)}
    forms: dict[CacheState, tuple[object, ...]] = {}
    """Each state met, its form: most calls lead to a state met before (no-reset's 4,052
    calls that do not raise lead to 443 states), and a form tries every renaming."""
    level = [root]
    depth = 0
    while level and (bound.depth is None or depth < bound.depth):
        depth += 1
        grown = []
        for state in level:
            for call in _calls(state, bound):
                try:
                    new, _ = apply(state, call)
                except MisuseError:
                    continue
                form = forms.get(new)
                if form is None:
                    form = forms[new] = canonical(new, bound.keys)
                if form not in seen:
                    seen.add(form)
                    traces[new] = (*traces[state], call)
                    grown.append(new)
        level = grown
    return Domain(bound, tuple(traces), traces)


class Keys(tuple[int, ...]):
    """A ``Keys`` argument: a list of 0 to ``width`` keys of the domain's universe (and
    the fresh key), duplicates included. A tuple, so a :class:`Call` takes it as is."""

    def __repr__(self) -> str:
        return repr(list(self))


class TicketNumber(int):
    """A ticket argument: one a state of the domain may hold, or the next one (never
    issued). An int, so the spec compares it with its tickets as it does any ticket."""

    def __repr__(self) -> str:
        return repr(int(self))
