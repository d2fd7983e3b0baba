"""Symmetry reduction: one canonical form per class of nodes equal up to renaming.

Keys are interchangeable in the spec (it only hashes and compares them), and so are
slots (it only asks which are free; the lowest free slot it hands out is one choice
among equivalent ones, and any other free slot gives a renamed state). So nodes that
differ only by a renaming of keys and slots behave alike, and the explorer keeps one.

The canonical form used here is the multiset of per-key *components*: everything the
node says about one key (its block, orphans, jobs, recency positions, whether it was
announced), with the key's slots renumbered in the order its component lists them (a
form names each component by a number, :data:`_NUMBERS`).
When no slot is shared between keys, a node is the disjoint union of its components,
so this multiset (with the epoch and ARC's ``p``) determines the node up to renaming,
and two renamings of one node give the same multiset: the form is exact and needs no
search over permutations. When two keys share a slot (only in states that already
break a property) the form falls back to the least encoding over every permutation of
keys and slots (:func:`exact_form`), which is exact too, only slower.

The argument that the lowest free slot stands for every free slot needs the free slots
to be unreferenced. A job running on a slot the state counts as free (only after a
reset that does not hold slots back, or after a vLLM-form completion was attributed to
another copy) makes that slot distinguishable; in such nodes the environment tries
every free-slot choice instead (:func:`~.environment.jobs_on_free_slots`), so the
explored behaviour is the spec's "any free slot" in every node, which is symmetric under
every renaming of slots, and such nodes take the exact form.

Keys with equal components are interchangeable in that node; :func:`canonical` returns
these classes, and :class:`CallRenaming` gives each call its form up to such renamings,
so the environment can skip calls that are renamings of each other.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from functools import lru_cache
from itertools import count, permutations

from kvoffload.spec import ArcLists, Block, LruOrder, Orphan

from .node import Action, Job, Node

Form = Hashable


@lru_cache(maxsize=1 << 12)
def _recency(rec: LruOrder | ArcLists) -> tuple[dict[object, tuple[tuple[int, int], ...]], int]:
    """Each key's positions in the recency lists, and ARC's ``p`` (-1 under LRU); once
    per distinct model (spec-arc's TINY search meets 386 in its 36,004 nodes). Read
    only: a cached answer is shared."""
    where: dict[object, list[tuple[int, int]]] = {}
    if isinstance(rec, LruOrder):
        for i, key in enumerate(rec.order):
            where.setdefault(key, []).append((0, i))
        p = -1
    else:
        for list_id, keys in enumerate((rec.t1, rec.t2, rec.b1, rec.b2), start=1):
            for i, key in enumerate(keys):
                where.setdefault(key, []).append((list_id, i))
        p = rec.p
    return {key: tuple(found) for key, found in where.items()}, p


def canonical(node: Node, keys: tuple[str, ...]) -> tuple[Form, tuple[int, ...] | None]:
    """The node's canonical form, and each key's symmetry class (None: not computed).

    ``keys`` is the key universe; keys outside every component all get the empty one.
    """
    s = node.state
    blocks = {b.key: b for b in s.blocks}
    orphans: dict[object, list[Orphan]] = {}
    jobs: dict[object, list[Job]] = {}
    done: dict[object, list[tuple[str, int]]] = {}
    for kind, key, ticket in node.done:
        done.setdefault(key, []).append((kind, ticket))
    owner: dict[int, object] = {}
    shared = False
    for b in s.blocks:
        shared |= owner.setdefault(b.slot, b.key) != b.key
    for o in s.orphans:
        orphans.setdefault(o.key, []).append(o)
        shared |= owner.setdefault(o.slot, o.key) != o.key
    for job in node.jobs:
        if job[3] not in owner:
            return ("dangling", exact_form(node, keys)), None
        jobs.setdefault(job[1], []).append(job)
        shared |= owner[job[3]] != job[1]
    if shared:
        return ("shared", exact_form(node, keys)), None
    where, p = _recency(s.recency)
    announced = s.announced
    sigs = []
    for key in keys:
        block, own, running, finished = (blocks.get(key), orphans.get(key, ()),
                                         jobs.get(key, ()), done.get(key, ()))
        component = 0 if block is None and not own and not running and not finished \
            else _own_component(block, tuple(own), tuple(running), tuple(finished))
        sigs.append((component, where.get(key, ()), key in announced))
    ordered = sorted(sigs)
    # a key's class is named by its signature's first place in that order: keys of one
    # class have equal signatures (compared, not hashed: they are deep tuples)
    return (s.epoch, p, tuple(ordered)), tuple(ordered.index(sig) for sig in sigs)


@lru_cache(maxsize=1 << 16)
def _own_component(block: Block | None, orphans: tuple[Orphan, ...], jobs: tuple[Job, ...],
                   done: tuple[tuple[str, int], ...]) -> int:
    """The number of :func:`_component` with the key's own slot numbering
    (:data:`_NUMBERS`), computed once per distinct argument (a key with nothing gets 0
    without it): a TINY exploration of spec-arc asks for 59,132 components, of which 291
    are distinct."""
    return _NUMBERS.setdefault(_component(block, orphans, jobs, done, {}), next(_NEXT))


_NUMBERS: dict[tuple[object, ...], int] = {(): 0}
"""Each component met in this process, by a number of its own (the empty one 0): a form
holds these numbers, not the components, which are deep tuples that a search would hash
and compare again each time it meets the form. Equal components get one number and
distinct ones distinct numbers, so the forms are equal exactly when the components'
multisets are, and keys get the same classes; the order of a form's signatures is by
number, one fixed order as good as any."""
_NEXT = count(1)
"""The numbers handed out: one per call (``next`` is atomic), so two threads never give
two components one number."""


def _component(block: Block | None, orphans: Iterable[Orphan], jobs: Iterable[Job],
               done: Iterable[tuple[str, int]], slots: dict[int, int]) -> tuple[object, ...]:
    """Everything the node says about one key, with its tickets numbered in the order
    they appear (the live block first, then the orphans by kind and epoch, then the
    jobs) and its slots numbered likewise unless ``slots`` already names them.

    Tickets are compared for equality only (the spec never orders them), and a key's
    behaviour depends on its own tickets only: the environment's completions name one
    key, so the tickets one plan shares between keys link nothing.
    """
    local = not slots
    tickets: dict[int, int] = {}

    def slot(n: int) -> int:
        return slots.setdefault(n, len(slots)) if local else slots[n]

    def named(ts: Iterable[int]) -> tuple[int, ...]:
        return tuple(tickets.setdefault(t, len(tickets)) for t in ts)

    items: list[tuple[object, ...]] = []
    if block is not None:
        own = () if block.ticket is None else (block.ticket,)
        items.append((0, block.phase.value, slot(block.slot), named(own), named(block.loads)))
    for o in sorted(orphans, key=lambda o: (o.kind.value, o.epoch)):
        items.append((1, o.kind.value, o.epoch, slot(o.slot), named(o.tickets)))
    unknown = 1 << 30
    order = sorted(jobs, key=lambda j: (j[0], slots.get(j[3], unknown),
                                        tickets.get(j[2], unknown)))
    items.extend((2, kind, slot(n), named((t,))) for kind, _, t, n in order)
    items.extend((3, kind, named((t,))) for kind, t in sorted(done, key=lambda d: d[0]))
    return tuple(items)


_Parts = tuple[Block | None, tuple[Orphan, ...], tuple[Job, ...], tuple[tuple[str, int], ...]]
"""What a node says about one key, as :func:`_component` takes it: its live block, its
orphans, its running jobs and its finished copies."""


def _parts(node: Node, keys: Iterable[object]) -> dict[object, _Parts]:
    """Each key's :data:`_Parts`."""
    s = node.state
    blocks = {b.key: b for b in s.blocks}
    return {key: (blocks.get(key), tuple(o for o in s.orphans if o.key == key),
                  tuple(j for j in node.jobs if j[1] == key),
                  tuple((kind, t) for kind, k, t in node.done if k == key))
            for key in keys}


def _components(parts: dict[object, _Parts], smap: dict[int, int]
                ) -> dict[object, tuple[object, ...]]:
    """Each key's :func:`_component`, its slots numbered by ``smap``, which names every
    slot: a key's component then reads nothing of the other keys', so one per key and
    slot numbering serves every renaming of the keys."""
    return {key: _component(*of_key, smap) for key, of_key in parts.items()}


def _encode(node: Node, kmap: dict[object, int], components: dict[object, tuple[object, ...]]
            ) -> tuple[object, ...]:
    """The node with its keys renamed by ``kmap``, given each key's component."""
    s = node.state
    rec = s.recency
    order: tuple[object, ...]
    if isinstance(rec, ArcLists):
        order = (tuple(kmap[k] for k in rec.t1), tuple(kmap[k] for k in rec.t2),
                 tuple(kmap[k] for k in rec.b1), tuple(kmap[k] for k in rec.b2), rec.p)
    else:
        order = tuple(kmap[k] for k in rec.order)
    parts = tuple(components[key] for key in sorted(kmap, key=lambda k: kmap[k]))
    return (s.epoch, order, parts, tuple(sorted(kmap[k] for k in s.announced)))


def ticket_form(node: Node, keys: tuple[str, ...]) -> tuple[object, ...]:
    """The node up to a renaming of its tickets only (numbered per key as in
    :func:`_component`), keys and slots kept: the form of the search without symmetry
    reduction. Tickets are fresh numbers, so without this abstraction even that search
    never ends (every store issues a new one).
    """
    capacity = node.state.capacity
    components = {key: _component_as_is(*of_key, capacity)
                  for key, of_key in _parts(node, keys).items()}
    return _encode(node, {k: i for i, k in enumerate(keys)}, components)


@lru_cache(maxsize=1 << 16)
def _component_as_is(block: Block | None, orphans: tuple[Orphan, ...], jobs: tuple[Job, ...],
                     done: tuple[tuple[str, int], ...], capacity: int) -> tuple[object, ...]:
    """:func:`_component` with the slots numbered as they are, once per distinct argument:
    the search without symmetry reduction asks for a form of every node it meets."""
    return _component(block, orphans, jobs, done, {n: n for n in range(capacity)})


def exact_form(node: Node, keys: tuple[str, ...]) -> tuple[object, ...]:
    """The least encoding of the node over every renaming of keys and slots (tickets
    numbered per key as in :func:`_component`).

    Exact by construction, and slow (|keys|! x capacity! encodings): the reference the
    fast form is tested against, and the form of nodes where keys share slots or jobs
    run on free slots. The keys' components are computed once per renaming of slots
    (:func:`_components`), not once per renaming of keys and slots.
    """
    slots = range(node.state.capacity)
    parts = _parts(node, keys)
    per_slots = [_components(parts, dict(zip(sperm, slots, strict=True)))
                 for sperm in permutations(slots)]
    return min(_encode(node, dict(zip(kperm, range(len(keys)), strict=True)), components)
               for kperm in permutations(keys) for components in per_slots)


class CallRenaming:
    """The form of a call up to the renamings of keys that leave its node unchanged."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        self._index = {k: i for i, k in enumerate(keys)}
        self._renamed: dict[tuple[Sequence[int], tuple[object, ...]], object] = {}

    def form(self, node: Node, action: Action, classes: Sequence[int]) -> object:
        """Equal for two calls in ``node`` that differ by such a renaming only.

        ``classes`` gives each key of the universe its symmetry class (:func:`canonical`).
        """
        call = action.call
        canon = self._renamed.get((classes, call.keys))
        if canon is None:
            assigned: dict[object, int] = {}
            used: dict[int, int] = {}
            names: list[tuple[int, int]] = []
            for key in call.keys:
                cls = classes[self._index[str(key)]]
                if key not in assigned:
                    assigned[key] = used.get(cls, 0)
                    used[cls] = assigned[key] + 1
                names.append((cls, assigned[key]))
            canon = self._renamed[classes, call.keys] = tuple(names)
        jobs = tuple(_job_relation(node, j) for j in action.jobs)
        own = {j[2] for j in action.jobs}
        done = {d[2] for d in node.done}
        roles = tuple(None if t is None else "job" if t in own else "done" if t in done
                      else "other" for t in (call.ticket, call.job))
        return (call.op, canon, call.success, roles, jobs, action.slots)


def _job_relation(node: Node, job: Job) -> object:
    """A job as seen from its key: which of the key's copies runs it, and where among
    that copy's jobs, named without slot numbers or tickets."""
    kind, key, ticket, slot = job
    s = node.state
    block = s.table.get(key)
    if block is not None and block.slot == slot:
        place = block.loads.index(ticket) if ticket in block.loads else -1
        return (kind, "block", block.ticket == ticket, place)
    for orphan in s.orphans:
        if orphan.key == key and orphan.slot == slot:
            place = orphan.tickets.index(ticket) if ticket in orphan.tickets else -1
            return (kind, "orphan", orphan.kind.value, orphan.epoch, place)
    return (kind, "slot", slot)

