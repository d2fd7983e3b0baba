"""What one checked node is: the spec's state plus the copy jobs workers still run.

A store job ``(STORE, key, ticket, slot)`` is created by an accepted ``prepare_store``
(one per planned key, all with the plan's ticket), a load job ``(LOAD, key, ticket,
slot)`` by ``prepare_load`` (one per distinct key of the call). An :class:`Action` is
one call the environment makes, with the jobs it reports finished; an :class:`Outcome`
is what the call did.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

from kvoffload.spec import CacheState, Call, Output

STORE, LOAD = "store", "load"
Job = tuple[str, str, int, int]
"""``(kind, key, ticket, slot)``: one copy a worker is running, named by its plan's ticket."""


class Form(enum.Enum):
    """How the environment reports a finished copy to the manager."""

    TICKET = "ticket"
    """Completions name their job: ``ticket=`` the plan's ticket."""
    VLLM = "vllm"
    """Completions carry no job identity (``ticket=None``), as in vLLM; ``Call.job``
    records which job really reported."""


class Node(NamedTuple):
    """One checked state: the model's state and the jobs outstanding (sorted, with repeats).

    A named tuple rather than a frozen dataclass: a search makes one per call and looks
    each up by hash, and a tuple is made and hashed in C.
    """

    state: CacheState
    jobs: tuple[Job, ...] = ()
    done: tuple[tuple[str, str, int], ...] = ()
    """vLLM's form only: per kind and key, the last job that finished ``(kind, key,
    ticket)``, which the environment may report again (a duplicate or late report)."""


@dataclass(frozen=True)
class Action:
    """A call the environment makes, and the outstanding jobs it reports finished."""

    call: Call
    jobs: tuple[Job, ...] = ()
    slots: tuple[int, ...] | None = None
    """The free slots a ``prepare_store`` hands out; None: the lowest (see
    :func:`jobs_on_free_slots` for when the choice is made explicit)."""

    def __str__(self) -> str:
        if self.slots is None:
            return str(self.call)
        return f"{self.call}  # into slot(s) {', '.join(map(str, self.slots))}"

    @property
    def delivers_jobs(self) -> bool:
        """Is this the completion of outstanding jobs (an edge the liveness check may use)?"""
        return bool(self.jobs)


class Outcome(NamedTuple):
    """What one call did: the next node (None when it raised), its output, a broken rule.

    A named tuple, as :class:`Node`: one is made per call."""

    node: Node | None
    output: Output | BaseException
    violation: tuple[str, str] | None = None


def jobs_on_free_slots(node: Node) -> frozenset[int]:
    """Slots the state counts as free that a running copy still uses.

    Only a reset that does not hold slots back, or a vLLM-form completion attributed to
    another copy, leaves such slots. While there are none, free slots are
    interchangeable and the lowest one stands for all; once there are, which free slot a
    store gets matters, so the environment tries every choice the spec allows ("any free
    slot", ``docs/native-api.md``).
    """
    if not node.jobs:
        return frozenset()
    return frozenset(j[3] for j in node.jobs) - node.state.used_slots()


def running_tickets(node: Node) -> frozenset[int]:
    """Every ticket a running copy or the spec's state still names."""
    s = node.state
    found = {j[2] for j in node.jobs}
    for b in s.blocks:
        found.update(b.loads)
        if b.ticket is not None:
            found.add(b.ticket)
    for o in s.orphans:
        found.update(o.tickets)
    return frozenset(found)


def finished_ticket(node: Node) -> int:
    """A ticket that names no running job: the latest one issued whose job finished (or
    was released), else one never issued. The spec compares tickets only for equality,
    so one such ticket stands for all of them."""
    running = running_tickets(node)
    issued = node.state.next_ticket
    return next((t for t in range(issued - 1, -1, -1) if t not in running), issued)
