"""Properties of every reachable node and call: the spec's invariants and laws, and the
environment's.

The spec's :data:`~kvoffload.spec.invariants.INVARIANTS` speak of the state alone, its
:data:`~kvoffload.spec.laws.LAWS` of one call (checked on every call, :mod:`.step`). The
environment-level properties relate the state to the copies workers are really running
(the outstanding jobs), which the state cannot know about when the API carries no job
identity: that is where the hazards of DESIGN.md point 7 live.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import cache

from kvoffload.spec import INVARIANTS, CopyKind, Phase
from kvoffload.spec.laws import LAW_NAMES

from .node import LOAD, STORE, Node


def jobs_match_copies(node: Node) -> bool:
    """Per key, the manager knows of as many running copies as workers run: one store
    per STORING block or store orphan, one load per reader or per orphaned load due."""
    s = node.state
    unknown: Counter[tuple[str, object]] = Counter(  # the running copies,
        (kind, key) for kind, key, _, _ in node.jobs)
    for b in s.blocks:  # less those the manager knows of: none must be left either way
        if b.phase is Phase.STORING:
            unknown[STORE, b.key] -= 1
        unknown[LOAD, b.key] -= b.readers
    for o in s.orphans:
        unknown[STORE if o.kind is CopyKind.STORE else LOAD, o.key] -= o.count
    return not any(unknown.values())


def running_copies_own_their_slots(node: Node) -> bool:
    """Every running copy still owns its slot in the spec's state: the live block of its
    key on that slot (STORING for a store, READY with readers for a load) or a copy of
    its key and kind a reset left running there, with at least as many jobs known as
    copies run on it. Else the slot may be handed out, or read as written, while a copy
    still uses it (a use-after-free)."""
    s = node.state
    running = Counter((kind, key, slot) for kind, key, _, slot in node.jobs)
    for (kind, key, slot), copies in running.items():
        block = s.table.get(key)
        if block is not None and block.slot == slot:
            if kind == STORE:
                known = int(block.phase is Phase.STORING)
            else:
                known = block.readers if block.phase is Phase.READY else 0
        else:
            wanted = CopyKind.STORE if kind == STORE else CopyKind.LOAD
            known = sum(o.count for o in s.orphans
                        if o.key == key and o.slot == slot and o.kind is wanted)
        if copies > known:
            return False
    return True


def ready_blocks_are_not_being_written(node: Node) -> bool:
    """No READY block has a store still running on its slot: a block is READY only once
    its own data is written (the stale-completion hazard breaks this)."""
    writing = {slot for kind, _, _, slot in node.jobs if kind == STORE}
    return not any(b.phase is Phase.READY and b.slot in writing for b in node.state.blocks)


def is_quiescent(node: Node) -> bool:
    """No copy running anywhere: no job outstanding, nothing STORING, no reader, no orphan."""
    return not node.jobs and not node.state.in_flight()


NodeProperty = Callable[[Node], bool]

ENVIRONMENT_PROPERTIES: tuple[NodeProperty, ...] = (
    jobs_match_copies,
    running_copies_own_their_slots,
    ready_blocks_are_not_being_written,
)


def _lift(invariant: Callable[..., bool]) -> NodeProperty:
    def holds(node: Node) -> bool:
        return invariant(node.state)

    holds.__name__ = invariant.__name__
    holds.__doc__ = invariant.__doc__
    return holds


NODE_PROPERTIES: tuple[NodeProperty, ...] = (
    *(_lift(inv) for inv in INVARIANTS), *ENVIRONMENT_PROPERTIES)
"""Every property checked in every reachable node, spec invariants first."""

COMPARISON = "follows_the_spec"
"""The comparison with the unmutated spec: a replaced operation answers as the spec's."""

EDGE_PROPERTIES: tuple[str, ...] = (
    COMPARISON, *LAW_NAMES, "completions_attributed", "legit_calls_accepted",
    "no_internal_errors",
)
"""The rules each single call is checked against (:mod:`.step`): the comparison, the
spec's laws (one property each), and the environment's rules."""

LAWS_ALONE: frozenset[str] = frozenset(
    {*(inv.__name__ for inv in INVARIANTS), *LAW_NAMES})
"""The spec's second statement on its own: its laws on every call and its invariants in
every node; no comparison with the spec's transitions, no environment property, no
liveness (``python proofs/check.py --laws-only``)."""

LIVENESS = "quiescence_reachable"
"""From every reachable node, delivering completions can reach quiescence."""

ALL_PROPERTIES: tuple[str, ...] = (
    *(p.__name__ for p in NODE_PROPERTIES), *EDGE_PROPERTIES, LIVENESS)

WITHOUT_LAWS: frozenset[str] = frozenset(ALL_PROPERTIES) - frozenset(LAW_NAMES)
"""Every property but the laws: what a check counts by default. The laws have rows of
their own (``--laws-only``), so that the comparison and the laws each show what they
catch alone, and the default test tier pays for the laws only where they are the point."""


def broken(node: Node, selected: frozenset[str]) -> str | None:
    """The first selected node property ``node`` breaks, or None."""
    state = node.state
    for name, invariant, holds in _checked_in(selected):
        if not (holds(node) if invariant is None else invariant(state)):
            return name
    return None


@cache
def _checked_in(selected: frozenset[str]) -> tuple[
        tuple[str, Callable[..., bool] | None, NodeProperty], ...]:
    """The selected node properties in :data:`NODE_PROPERTIES` order, each with the
    spec's invariant it lifts (None: an environment property), which is called on the
    state directly: a search asks this of every node it finds, in one loop."""
    invariants = {inv.__name__: inv for inv in INVARIANTS}
    return tuple((prop.__name__, invariants.get(prop.__name__), prop)
                 for prop in NODE_PROPERTIES if prop.__name__ in selected)
