"""The environment: every call the scheduler and the workers may make in a node.

In any node the environment may look keys up, touch, prepare stores and loads, complete
any outstanding job (success or failure for stores; a lone key may be named twice),
take events, reset (within the bound), under the opt-in background-eviction setting let
the tier evict a key on its own (D14), where node failure is on fail the node that holds
the tier (D15; the copies running on its blocks end with it, :mod:`.step`), and make
mistakes: calls that break a precondition, and completions of a job that is not running
(a duplicate or late report of a finished job, one never issued) for every key, busy or
not. Completions come in two
forms (:class:`~.node.Form`): the ticket form (``ticket=`` the job's ticket) and vLLM's
(no job identity: the manager is told ``ticket=None``; ``Call.job`` records which job
really reported). A completion names one key (or one key twice): the spec matches each
key of a completion on its own, so a completion of several keys is, key by key, several
one-key completions; this keeps the keys of one plan independent (:mod:`.symmetry`).
What each call must do is checked by :mod:`.step`; which calls are renamings of each
other, by :mod:`.symmetry`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import permutations

from kvoffload.spec import (
    CacheState,
    Call,
    Eviction,
    KvOffloadError,
    Op,
    Phase,
    StorePlan,
)

from . import step, symmetry
from .bounds import Bounds
from .model import Model
from .node import (
    LOAD,
    STORE,
    Action,
    Form,
    Job,
    Node,
    Outcome,
    finished_ticket,
    jobs_on_free_slots,
)


class Environment:
    """The calls the environment may make in a node, and one call's outcome."""

    def __init__(self, model: Model, bounds: Bounds, form: Form,
                 rules: frozenset[str] = step.DEFAULT_RULES,
                 eviction: Eviction = Eviction.ON_STORE, node_failure: bool = False) -> None:
        self.model = model
        self.eviction = eviction
        """``BACKGROUND``: the tier may also evict on its own, between calls (D14)."""
        self.node_failure = node_failure
        """True: the node that holds the tier may fail in any node (``fail_node``, D15)."""
        self.bounds = bounds
        self.form = form
        self.rules = rules
        """The call rules :meth:`step` checks (:mod:`.step`); the others are not computed."""
        self._sequences = bounds.sequences()
        self._renaming = symmetry.CallRenaming(bounds.keys)
        # The calls that depend on no node, made once: a TINY exploration asks for about
        # 50 actions in each of thousands of nodes, and building and validating each
        # Call anew was a tenth of its time.
        self._lookups = tuple(Action(Call(Op.LOOKUP, (key,))) for key in bounds.keys)
        self._touches = tuple(Action(Call(Op.TOUCH, seq)) for seq in self._sequences)
        self._stores = {seq: Action(Call(Op.PREPARE_STORE, seq)) for seq in self._sequences}
        self._loads = {seq: Action(Call(Op.PREPARE_LOAD, seq)) for seq in self._sequences}
        self._reset = Action(Call(Op.RESET_CACHE))
        self._take_events = Action(Call(Op.TAKE_EVENTS))
        self._evictions = tuple(Action(Call(Op.EVICT_IN_BACKGROUND, (key,)))
                                for key in bounds.keys)
        self._fail_node = Action(Call(Op.FAIL_NODE))
        self._made: dict[tuple[object, ...], Action] = {}
        """The completions made so far (:meth:`_completion`), each made once."""
        self._late: dict[int, tuple[Action, ...]] = {}
        """Ticket form: per ticket, the completions of every key and kind by it
        (:meth:`_not_running`), made once."""
        self._finishing: dict[tuple[tuple[Job, ...], str], tuple[Action, ...]] = {}
        """Per outstanding jobs and kind, their completions (:meth:`_completions`), made
        once: a few hundred sets of jobs recur in thousands of nodes."""

    def actions(self, node: Node, classes: Sequence[int] | None) -> Iterator[Action]:
        """Every call the environment may make in ``node``, up to symmetry.

        ``classes`` gives each key of the universe (in order) its symmetry class: keys
        of one class are interchangeable in ``node``, so of two calls that differ only
        by such a renaming one is enough. None turns the reduction off.
        """
        yield from self.calls(node, classes)
        yield from self.faults(node, classes)

    def calls(self, node: Node, classes: Sequence[int] | None) -> Iterator[Action]:
        """:meth:`actions` but for the faults: the calls every setting of the environment
        makes in ``node`` (the scheduler's and the workers', their mistakes included)."""
        if classes is None or len(set(classes)) == len(classes):
            return self._all_calls(node)
        return self._reduced(self._all_calls(node), node, classes)

    def faults(self, node: Node, classes: Sequence[int] | None) -> Iterator[Action]:
        """:meth:`actions` but for :meth:`calls`: what this setting adds, background
        evictions (D14) and the node's failure (D15). No fault is a renaming of a call."""
        if classes is None or len(set(classes)) == len(classes):
            return self._all_faults()
        return self._reduced(self._all_faults(), node, classes)

    def _reduced(self, actions: Iterator[Action], node: Node, classes: Sequence[int]
                 ) -> Iterator[Action]:
        """``actions`` where some keys are interchangeable: one call per renaming."""
        seen: set[object] = set()
        for action in actions:
            reduced = self._renaming.form(node, action, classes)
            if reduced not in seen:
                seen.add(reduced)
                yield action

    def step(self, node: Node, action: Action) -> Outcome:
        """Run ``action`` on ``node`` with the model; check the call's rules."""
        return step.step(self.model, self.form, node, action, self.rules)

    def _all_calls(self, node: Node) -> Iterator[Action]:
        s = node.state
        table = s.table
        yield from self._lookups
        yield from self._touches
        dangling = jobs_on_free_slots(node)
        copies = _running_copies(node)
        # no store or load that would start more copies of a key than the workers run at
        # once (_running_copies): the keys where one would, made once per node
        most_stores = self.bounds.resets + 1
        most_loads = self.bounds.readers * (self.bounds.resets + 1)
        no_store = {k for (kind, k), n in copies.items()
                    if kind == STORE and n >= most_stores and k not in table}
        for seq in self._sequences:
            if no_store and not no_store.isdisjoint(seq):
                continue
            store = self._stores[seq]
            if dangling:
                yield from self._slot_choices(s, store.call, dangling)
            else:
                yield store
        ready = s.keys_in(Phase.READY)  # a load of other keys starts nothing: it raises
        no_load = {k for k in self.bounds.keys if k in ready and (
            table[k].readers >= self.bounds.readers or copies.get((LOAD, k), 0) >= most_loads)}
        for seq in self._sequences:
            if not no_load or no_load.isdisjoint(seq) or not ready.issuperset(seq):
                yield self._loads[seq]
        yield from self._completions(node, STORE)
        yield from self._completions(node, LOAD)
        yield from self._not_running(node)
        if s.epoch < self.bounds.resets:
            yield self._reset
        yield self._take_events

    def _all_faults(self) -> Iterator[Action]:
        if self.eviction is Eviction.BACKGROUND:
            # one key at a time (several at once are several one-key evictions), every
            # key: those not evictable must raise NotEvictable and change nothing
            yield from self._evictions
        if self.node_failure:
            # in any node, any number of times: every block goes, whatever its phase
            yield self._fail_node

    def _slot_choices(self, s: CacheState, call: Call, dangling: frozenset[int]
                      ) -> Iterator[Action]:
        """``call`` with every distinct choice of free slots (those no copy uses are
        interchangeable, so one order of them is enough)."""
        try:
            _, plan = self.model.apply(s, call)
        except KvOffloadError:
            plan = None
        if not isinstance(plan, StorePlan) or not plan.keys:
            yield Action(call)
            return
        free = sorted(set(s.free_slots()) | {s.table[k].slot for k in plan.evicted})
        seen: set[tuple[object, ...]] = set()
        for choice in permutations(free, len(plan.keys)):
            shape = tuple(slot if slot in dangling else -1 - choice.index(slot)
                          for slot in choice)
            if shape not in seen:
                seen.add(shape)
                yield Action(call, slots=choice)

    def _completion(self, op: Op, keys: tuple[str, ...], ticket: int | None, success: bool,
                    jobs: tuple[Job, ...] = ()) -> Action:
        """A completion of ``keys`` by job ``ticket`` (None: no job behind it), reporting
        ``jobs`` finished; made once per environment, as the few hundred completions a
        TINY exploration makes recur in thousands of nodes."""
        made = (op, keys, ticket, success, jobs)
        found = self._made.get(made)
        if found is None:
            call = (Call(op, keys, success=success, ticket=ticket) if self.form is Form.TICKET
                    else Call(op, keys, success=success, job=ticket))
            found = self._made[made] = Action(call, jobs=jobs)
        return found

    def _completions(self, node: Node, kind: str) -> tuple[Action, ...]:
        """Completions of outstanding jobs, one key each; a lone key may also be named
        twice (duplicates)."""
        found = self._finishing.get((node.jobs, kind))
        if found is None:
            found = self._finishing[node.jobs, kind] = tuple(self._finish(node.jobs, kind))
        return found

    def _finish(self, outstanding: tuple[Job, ...], kind: str) -> Iterator[Action]:
        """:meth:`_completions` of these outstanding jobs."""
        op = Op.COMPLETE_STORE if kind == STORE else Op.COMPLETE_LOAD
        jobs = sorted(set(j for j in outstanding if j[0] == kind))
        outcomes = (True, False) if kind == STORE else (True,)
        for job in jobs:
            for success in outcomes:
                yield self._completion(op, (job[1],), job[2], success, (job,))
        if self.bounds.duplicates and self.bounds.width >= 2:
            for job in jobs:
                for success in outcomes:
                    yield self._completion(op, (job[1], job[1]), job[2], success, (job,))

    def _not_running(self, node: Node) -> Iterator[Action]:
        """Completions of a job that is not running. Ticket form: for every key and kind,
        the latest ticket whose job finished (else one never issued); the spec compares
        tickets for equality only, so it stands for every ticket of no running job.
        vLLM's form: the last finished job of each kind and key reported again (a
        duplicate or late report), and, for keys with no job of that kind running, a
        report with no job behind it (as in the old alphabet)."""
        if self.form is Form.TICKET:
            ticket = finished_ticket(node)
            late = self._late.get(ticket)
            if late is None:
                late = self._late[ticket] = tuple(
                    self._completion(op, (key,), ticket, success)
                    for op in (Op.COMPLETE_STORE, Op.COMPLETE_LOAD)
                    for key in self.bounds.keys for success in _OUTCOMES[op])
            yield from late
            return
        for kind, key, ticket in node.done:
            op = _OPS[kind]
            for success in _OUTCOMES[op]:
                yield self._completion(op, (key,), ticket, success)
        for kind, op in _OPS.items():
            busy = {j[1] for j in node.jobs if j[0] == kind}
            for key in self.bounds.keys:
                if key not in busy:
                    for success in _OUTCOMES[op]:
                        yield self._completion(op, (key,), None, success)


def _running_copies(node: Node) -> dict[tuple[str, str], int]:
    """How many copies of each kind each key has running (pre-reset ones included).

    The workers run at most ``resets + 1`` stores and ``readers * (resets + 1)`` loads
    of one key at once (one store and ``readers`` loads per epoch): the environment
    issues no ``prepare_store`` or ``prepare_load`` that would start more. While the
    model's accounting is right that bound is never reached, so it removes nothing;
    once it is wrong (vLLM's form, where a duplicate or late report is taken for a
    running job's, which keeps running) each stale report would let one more copy
    start, and without the bound the search would never end.
    """
    counts: dict[tuple[str, str], int] = {}
    for kind, key, _, _ in node.jobs:
        counts[kind, key] = counts.get((kind, key), 0) + 1
    return counts


_OPS = {STORE: Op.COMPLETE_STORE, LOAD: Op.COMPLETE_LOAD}
_OUTCOMES = {Op.COMPLETE_STORE: (True, False), Op.COMPLETE_LOAD: (True,)}
