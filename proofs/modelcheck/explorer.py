"""Breadth-first exploration of every reachable node, liveness, and shortest traces.

The search keeps, for each canonical form, the first node found with it (a real,
unrenamed node) and the call that led there from its parent's real node. A trace is
read back along these parents, so every printed trace is a sequence of calls that
really leads from the initial state to the node it ends in: no renaming is ever
replayed (the pitfall of TOOLING-NOTES.md). Breadth-first order makes it a shortest one.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from kvoffload.spec import Assumption, Eviction, Op, Policy, excluded_by, initial_state

from .bounds import Bounds
from .environment import Environment
from .model import Model
from .node import Action, Form, Node, Outcome
from .properties import (
    EDGE_PROPERTIES,
    LIVENESS,
    NODE_PROPERTIES,
    WITHOUT_LAWS,
    broken,
    is_quiescent,
)
from .step import step
from .symmetry import canonical, ticket_form

S = TypeVar("S")
L = TypeVar("L")


@dataclass(frozen=True)
class Setup:
    """What one exploration checks: a model, a completion form, a policy, assumptions."""

    model: Model
    form: Form
    policy: Policy
    assumptions: tuple[Assumption, ...] = ()
    properties: frozenset[str] | None = None
    """The properties that count (None: every one but the laws, which have rows of their
    own, ``--laws-only``; liveness included if asked)."""
    liveness: bool = True
    eviction: Eviction = Eviction.ON_STORE
    """``BACKGROUND``: in every node the environment may also evict any key in the
    background (the spec's ``evict_in_background``, D14), the opt-in setting."""
    node_failure: bool = False
    """True: in every node the environment may also fail the node that holds the tier
    (the spec's ``fail_node``, D15: every block lost, the copies running on them ended
    with it), the fault a test injects."""


@dataclass(frozen=True)
class Violation:
    """A property broken, why, and the shortest trace that breaks it."""

    prop: str
    detail: str
    trace: tuple[Action, ...]


@dataclass
class Tree(Generic[L]):
    """The breadth-first tree: each node's parent and the label (call) that reached it."""

    parent: list[int]
    via: list[L | None]

    def trace(self, i: int) -> tuple[L, ...]:
        """The labels from the initial node to node ``i``: a shortest trace."""
        steps: list[L] = []
        while i > 0:
            label = self.via[i]
            if label is None:  # pragma: no cover - only the root has no call
                break
            steps.append(label)
            i = self.parent[i]
        return tuple(reversed(steps))


class Search(Generic[S, L]):
    """Breadth-first search of a graph given by its edges, one node per canonical form.

    The one bounded-search engine of the proofs and of the doc generators
    (``docs/tools``): the caller walks :meth:`frontier` and reports each edge with
    :meth:`reach`; the search numbers the nodes in the order found, keeps the first real
    node of each form (never a renamed one), its parent and the label of the edge that
    found it, so :attr:`tree` reads back shortest traces.
    """

    def __init__(self, root: S, form: Callable[[S], tuple[Hashable, object]]) -> None:
        self._form = form
        key, info = form(root)
        self.ids: dict[Hashable, int] = {key: 0}
        self.nodes: list[S] = [root]
        self.tree: Tree[L] = Tree([-1], [None])
        self.depth_of: list[int] = [0]
        self._queue: list[tuple[S, int, object]] = [(root, 0, info)]
        self._next = 0

    def frontier(self) -> Iterator[tuple[S, int, object]]:
        """Every node found, once, in breadth-first order: ``(node, number, info)``,
        ``info`` being what the form function said besides the form."""
        while self._next < len(self._queue):
            self._next += 1
            yield self._queue[self._next - 1]

    @property
    def queued(self) -> int:
        return len(self._queue) - self._next

    def reach(self, i: int, label: L, node: S) -> tuple[int, bool]:
        """Node ``i``'s edge ``label`` leads to ``node``: its number, and is it new?"""
        key, info = self._form(node)
        j = len(self.nodes)
        found = self.ids.setdefault(key, j)  # one hash of the deep form, not two
        if found != j:
            return found, False
        self.nodes.append(node)
        self.tree.parent.append(i)
        self.tree.via.append(label)
        self.depth_of.append(self.depth_of[i] + 1)
        self._queue.append((node, j, info))
        return j, True


@dataclass
class Result:
    """What one exploration found, with its figures."""

    verdict: str
    """``holds`` or ``violated``."""
    violation: Violation | None
    states: int
    transitions: int
    depth: int
    """The greatest number of calls from the initial node to a node found."""
    seconds: float
    checked: tuple[str, ...] = field(default=())
    tree: Tree[Action] | None = None
    graph: Graph | None = None
    """What liveness reads (``explore(keep_graph=True)`` only): see :func:`liveness_of`."""
    nodes: Sequence[Node] | None = None
    """The node found first with each form, by number (``explore(keep_nodes=True)``
    only): the real nodes the search expanded."""


@dataclass(frozen=True)
class Graph:
    """The searched graph as liveness sees it: which nodes are quiescent, and the edges
    that deliver completions, by node number."""

    quiet: Sequence[bool]
    edges_from: Sequence[int]
    edges_to: Sequence[int]


Progress = Callable[[int, int, int, float], None]
Visit = Callable[[int, Node, Action, Outcome], None]


def stderr_progress(states: int, depth: int, queued: int, seconds: float) -> None:
    """Print one progress line on stderr."""
    rate = states / seconds if seconds else 0.0
    print(f"  ... {states:,} states, depth {depth}, {queued:,} queued, "
          f"{rate:,.0f} states/s", file=sys.stderr, flush=True)


def initial_node(bounds: Bounds, policy: Policy) -> Node:
    return Node(initial_state(bounds.capacity, policy))


def _selected(setup: Setup) -> frozenset[str]:
    chosen = WITHOUT_LAWS if setup.properties is None else setup.properties
    return chosen if setup.liveness else chosen - {LIVENESS}


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector, as it was before afterwards.

    A search allocates millions of small values (states, nodes, calls, forms), none of
    them in a reference cycle (a TINY exploration leaves ``gc.collect()`` nothing to
    free; :func:`~.step.step` keeps no traceback), and keeps a growing share of them:
    the collector's passes over them found nothing and cost about a tenth of an
    exploration. Reference counting still frees every value the search drops.

    What the search kept (its result, what a :class:`Shared` holds: 550,000 values
    after spec-arc's TINY search) then joins the oldest generation at once, without a
    pass over it: ``gc.freeze()`` then ``gc.unfreeze()`` move every tracked value there
    (the caller's younger ones too; the oldest generation's full collections still go
    over them). Else the first young collection after the search went over all of it
    (0.27 s of CPU after spec-arc's), and a middle one again. Not where the caller froze
    values itself (``gc.get_freeze_count()``): those stay frozen.
    """
    enabled = gc.isenabled()
    frozen = gc.get_freeze_count()
    gc.disable()
    try:
        yield
    finally:
        if not frozen:
            gc.freeze()
            gc.unfreeze()
        if enabled:
            gc.enable()


@dataclass(frozen=True)
class Made:
    """The calls one search made in one node (its faults left out), and where each led."""

    assumed: frozenset[Assumption]
    """The search's assumptions: the calls they rule out are not among these."""
    model: Model
    """The search's model: where the calls of an operation it replaces led is its own."""
    calls: tuple[Action, ...]
    led: tuple[Node | None, ...]
    """The node each call led to; None: it raised."""


class Shared:
    """What the searches of one family of setups share: the calls made in each node and
    where each led, each node's canonical form, and the node property it breaks.

    The setups of a family (:func:`family_of`) differ only in the faults the environment
    may inject (background eviction, the node's failure: the calls of
    :meth:`~.environment.Environment.faults`), in their assumptions, in the node
    properties they check, and in the operations their model replaces (a mutant's; not
    ``prepare_store``, whose plan decides which free-slot choices the environment
    offers). None of these changes what a call of an operation neither model replaces
    does (a mutant answers it with the spec's transition, and the comparison with the
    spec has nothing to compare), or which calls are made besides the faults; the
    assumptions only leave some out. So a search takes the calls made in a node from an
    earlier search of the family that assumed no more than it does (leaving out those
    its own assumptions rule out, and making again those of an operation either model
    replaces) instead of making them again: it finds what it would find alone, at a
    fraction of the cost. The TINY searches of spec-arc with background eviction and
    with the node's failure go through the 8,371 nodes of spec-arc and make its 430,740
    calls again; the TINY mutants in vLLM's form that an assumption hides go through
    the 2,347 nodes of spec-vllm-form+no-stale-completions.
    """

    def __init__(self, family: Hashable) -> None:
        self.family = family
        self.made: dict[Node, Made] = {}
        """Per node, the calls a search made in it: only nodes where no call broke a rule."""
        self.forms: dict[Node, tuple[Hashable, object]] = {}
        """Per node, its canonical form and its keys' classes (:func:`canonical`)."""
        self.broken: dict[frozenset[str], dict[Hashable, str | None]] = {}
        """Per selection of properties and per canonical form, the first one broken by
        the nodes of that form (None: none broken), as :func:`~.properties.broken` says:
        node properties do not tell renamings apart, as the search counts on (it checks
        one node per form), so a later search of the family that met the form first in
        another renaming of the node (spec-arc+background-eviction's 9,323 forms: in
        4,922 of them the first node met is not spec-arc's) has its answer already."""


def family_of(setup: Setup, bounds: Bounds, symmetry: bool = True) -> Hashable:
    """What the searches that may share a :class:`Shared` have in common: everything a
    call's outcome and the calls made depend on but the faults, the assumptions and the
    operations the model replaces; ``prepare_store``'s transition is kept, as the free-slot
    choices the environment offers are read from its plan."""
    rules = _selected(setup) & frozenset(EDGE_PROPERTIES)
    store = setup.model.replaced.get(Op.PREPARE_STORE)
    return store, setup.form, setup.policy, rules, bounds, symmetry


def explore(setup: Setup, bounds: Bounds, *, symmetry: bool = True,
            progress: Progress | None = None, every: float = 2.0,
            visit: Visit | None = None, keep_graph: bool = False,
            keep_nodes: bool = False, shared: Shared | None = None) -> Result:
    """Explore every node reachable within ``bounds``; stop at the first violation.

    ``visit(i, node, action, outcome)`` is called for every call made from every node
    (``i`` is the node's number in the tree), for checks that need every edge.
    ``keep_graph``: the result keeps the graph liveness reads (:func:`liveness_of`);
    ``keep_nodes``, the nodes it found.
    ``shared``: what the searches of this setup's family (:func:`family_of`) made so
    far, taken from and added to; the result is the one a search without it finds.
    """
    if shared is not None and shared.family != family_of(setup, bounds, symmetry):
        raise ValueError("a search shares only with the searches of its own family")
    with _collector_paused():
        return _explore(setup, bounds, symmetry, progress, every, visit, keep_graph,
                        keep_nodes, shared)


def _explore(setup: Setup, bounds: Bounds, symmetry: bool, progress: Progress | None,
             every: float, visit: Visit | None, keep_graph: bool, keep_nodes: bool,
             shared: Shared | None) -> Result:
    start = time.perf_counter()
    selected = _selected(setup)
    env = Environment(setup.model, bounds, setup.form, selected, setup.eviction,
                      setup.node_failure)
    keys = bounds.keys
    root = initial_node(bounds, setup.policy)
    forms = None if shared is None else shared.forms
    verdicts = None if shared is None else shared.broken.setdefault(selected, {})
    made = None if shared is None or visit is not None else shared.made
    """The calls made in each node so far (not with ``visit``, which reads their outputs)."""

    def canon(node: Node) -> tuple[Hashable, object]:
        found = None if forms is None else forms.get(node)
        if found is None:
            found = (ticket_form(node, keys), None) if not symmetry else canonical(node, keys)
            if forms is not None:
                forms[node] = found
        return found

    search: Search[Node, Action] = Search(root, canon)
    number: dict[Node, tuple[int, Node]] = {root: (0, root)}
    """Each real node met so far, the number of its canonical form, and the first node
    met with its value (the one ``shared`` keeps): most successors were met before, and
    looking the node up is cheaper than computing its form and looking that up (a form
    is a deep tuple, hashed anew each time)."""
    tree = search.tree
    quiet: list[bool] = [is_quiescent(root)]
    edges_from: list[int] = []
    edges_to: list[int] = []
    transitions = 0
    last = start

    def trace(i: int, extra: Action | None = None) -> tuple[Action, ...]:
        return tree.trace(i) + (() if extra is None else (extra,))

    def result(violation: Violation | None) -> Result:
        graph = Graph(quiet, edges_from, edges_to) if keep_graph else None
        return Result("holds" if violation is None else "violated", violation,
                      len(search.nodes), transitions, search.depth_of[-1],
                      time.perf_counter() - start, tuple(sorted(selected)), tree, graph,
                      search.nodes if keep_nodes else None)

    def met_first(i: int, action: Action, new: Node) -> Violation | None:
        """Node ``i`` led by ``action`` to ``new``, a node this search had not met: number
        it, check it if its form is new, keep the edge for liveness; returns the node
        property it breaks, if any."""
        j, fresh = search.reach(i, action, new)
        number[new] = j, new
        if fresh:
            quiet.append(is_quiescent(new))
            if verdicts is None:
                bad = broken(new, selected)
            else:  # by its form: checked by an earlier search of the family, if any
                form = canon(new)[0]
                if form in verdicts:
                    bad = verdicts[form]
                else:
                    bad = verdicts[form] = broken(new, selected)
            if bad is not None:
                return Violation(bad, _doc(bad), trace(j))
        if action.jobs and j != i:  # action.delivers_jobs
            edges_from.append(i)
            edges_to.append(j)
        return None

    def reached(i: int, action: Action, new: Node) -> tuple[Node, Violation | None]:
        """Node ``i`` led by ``action`` to ``new``, another node: :func:`met_first` if
        this search had not met it, else the edge kept for liveness. Returns the node
        first met with ``new``'s value (the one ``shared`` keeps) and the node property
        broken, if any."""
        met = number.get(new)
        if met is None:
            return new, met_first(i, action, new)
        j, first = met
        if action.jobs and j != i:  # action.delivers_jobs
            edges_from.append(i)
            edges_to.append(j)
        return first, None

    bad = broken(root, selected)
    if bad is not None:
        return result(Violation(bad, _doc(bad), ()))
    model, form, assumptions = setup.model, setup.form, setup.assumptions
    assumed = frozenset(assumptions)
    for node, i, info in search.frontier():
        classes = info if isinstance(info, tuple) else None
        known = None if made is None else made.get(node)
        if known is not None and known.assumed <= assumed:
            # the calls made here before, less those only this search's assumptions rule
            # out (the others ruled out none of them); those of an operation that either
            # search's model replaces are made again
            extra = tuple(a for a in assumptions if a not in known.assumed)
            redo = () if known.model == model else {*known.model.replaced, *model.replaced}
            for action, new in zip(known.calls, known.led, strict=True):
                if extra and excluded_by(node.state, action.call, extra):
                    continue
                transitions += 1
                if redo and action.call.op in redo:
                    outcome = step(model, form, node, action, selected)
                    if outcome.violation is not None and outcome.violation[0] in selected:
                        prop, detail = outcome.violation
                        return result(Violation(prop, detail, trace(i, action)))
                    new = outcome.node
                if new is None or new is node:
                    continue
                _, violation = reached(i, action, new)
                if violation is not None:
                    return result(violation)
            batches: tuple[Iterable[Action], ...] = (env.faults(node, classes),)
            calls: list[Action] | None = None
        else:
            batches = (env.calls(node, classes), env.faults(node, classes))
            calls = None if made is None else []
        led: list[Node | None] = []
        for batch in batches:
            for action in batch:
                if assumptions and excluded_by(node.state, action.call, assumptions):
                    continue
                transitions += 1
                outcome = step(model, form, node, action, selected)  # env.step, one call less
                if visit is not None:
                    visit(i, node, action, outcome)
                if outcome.violation is not None and outcome.violation[0] in selected:
                    prop, detail = outcome.violation
                    return result(Violation(prop, detail, trace(i, action)))
                new = outcome.node
                if new is not None and new is not node:
                    new, violation = reached(i, action, new)
                    if violation is not None:
                        return result(violation)
                if calls is not None:
                    calls.append(action)
                    led.append(new)
            if calls is not None and made is not None:  # every call but the faults
                made[node] = Made(assumed, model, tuple(calls), tuple(led))
                calls = None
        if progress is not None and transitions % 256 == 0:
            now = time.perf_counter()
            if now - last >= every:
                last = now
                progress(len(search.nodes), search.depth_of[i], search.queued, now - start)
    if LIVENESS in selected:
        return result(_stuck(tree, Graph(quiet, edges_from, edges_to)))
    return result(None)


_STUCK = ("from the last state no sequence of completions reaches quiescence (no job "
          "outstanding, nothing STORING, no reader, no orphan)")


def _stuck(tree: Tree[Action], graph: Graph) -> Violation | None:
    """Liveness on a searched graph: the first node that cannot reach quiescence."""
    stuck = _first_stuck(len(graph.quiet), graph.quiet, graph.edges_from, graph.edges_to)
    return None if stuck is None else Violation(LIVENESS, _STUCK, tree.trace(stuck))


def liveness_of(setup: Setup, twin: Setup, explored: Result) -> Result:
    """What ``explore(setup, bounds)`` finds for ``setup``, a check of liveness alone, read
    from ``explored``: a search of ``twin`` at the same bounds (``keep_graph=True``) that
    held, so it went through every node; ``twin`` is ``setup`` but for the properties.

    Which nodes a search finds, in which order, and by which calls, do not depend on
    the properties it checks as long as none is broken (they only decide where it stops),
    so the twin's graph and tree are the ones a search of ``setup`` would make. The
    figures are the twin's; ``seconds`` is the time this took.
    """
    start = time.perf_counter()
    if setup.properties != frozenset({LIVENESS}) or not setup.liveness:
        raise ValueError("liveness_of answers for a check of liveness alone")
    if replace(twin, properties=setup.properties, liveness=True) != setup:
        raise ValueError("the twin must be the same setup but for its properties")
    if explored.verdict != "holds" or explored.graph is None or explored.tree is None:
        raise ValueError("liveness_of reads a complete search that kept its graph")
    violation = _stuck(explored.tree, explored.graph)
    return Result("holds" if violation is None else "violated", violation, explored.states,
                  explored.transitions, explored.depth, time.perf_counter() - start,
                  tuple(sorted(_selected(setup))), explored.tree, explored.graph)


def _first_stuck(count: int, quiet: Sequence[bool], edges_from: Sequence[int],
                 edges_to: Sequence[int]) -> int | None:
    """The first node (in breadth-first order) that cannot reach a quiescent node."""
    back: list[list[int]] = [[] for _ in range(count)]
    for src, dst in zip(edges_from, edges_to, strict=True):
        back[dst].append(src)
    good = list(quiet)
    work = [i for i in range(count) if quiet[i]]
    while work:
        i = work.pop()
        for src in back[i]:
            if not good[src]:
                good[src] = True
                work.append(src)
    return next((i for i in range(count) if not good[i]), None)


def _doc(prop: str) -> str:
    for p in NODE_PROPERTIES:
        if p.__name__ == prop:
            return " ".join((p.__doc__ or prop).split())
    return prop


def replay(setup: Setup, bounds: Bounds, trace: Iterable[Action]
           ) -> tuple[list[Node], tuple[str, str] | None]:
    """Run ``trace`` from the initial node, independently of any exploration.

    Returns the nodes visited (the initial one first) and the first call-level rule
    broken on the way, of those the setup checks (None if none was). Raises ValueError
    if a call of the trace is not one the environment may make in the node it is made in.
    """
    selected = _selected(setup)
    env = Environment(setup.model, bounds, setup.form, selected, setup.eviction,
                      setup.node_failure)
    node = initial_node(bounds, setup.policy)
    nodes = [node]
    for action in trace:
        allowed = list(env.actions(node, None))
        if action not in allowed:
            raise ValueError(f"{action} is not a call the environment makes here")
        if setup.assumptions and excluded_by(node.state, action.call, setup.assumptions):
            raise ValueError(f"{action} is ruled out by the assumptions")
        outcome = env.step(node, action)
        if outcome.violation is not None and outcome.violation[0] in selected:
            return nodes, outcome.violation
        if outcome.node is None:
            raise ValueError(f"{action} raised {outcome.output!r}; a trace cannot go on")
        node = outcome.node
        nodes.append(node)
    return nodes, None


def format_trace(trace: Sequence[Action]) -> str:
    """A trace as a numbered list of calls."""
    width = len(str(len(trace)))
    return "\n".join(f"{i:>{width}}. {action}" for i, action in enumerate(trace, start=1))


def completions_reach_quiescence(setup: Setup, bounds: Bounds, node: Node) -> bool:
    """Can delivering completions alone lead from ``node`` to quiescence? (no reduction)"""
    env = Environment(setup.model, bounds, setup.form, frozenset(), setup.eviction,
                      setup.node_failure)
    seen = {node}
    work = [node]
    while work:
        current = work.pop()
        if is_quiescent(current):
            return True
        for action in env.actions(current, None):
            if not action.delivers_jobs or (setup.assumptions and excluded_by(
                    current.state, action.call, setup.assumptions)):
                continue
            nxt = env.step(current, action).node
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                work.append(nxt)
    return False
