"""CrossHair's power, measured as mutation testing measures tests.

The population is fixed (issue 24): the 17 spec mutants of
``proofs/modelcheck/mutants.py``, the 28 seeded-bug variants of the conformance
self-test (``kvoffload.conformance.selftest.selftest.CATALOGUE``, its controls left out) and the
three planted false contracts of :mod:`.planted`. A spec mutant is refuted when CrossHair
refutes a contract of :mod:`.contracts` for an operation the mutant replaces, with the
mutant in place; a manager variant when it refutes :mod:`.refines` with that manager; a
planted contract when it refutes it. Each run has the same per-condition budget.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from kvoffload.spec import Op, Policy
from proofs.crosshair_check import Run, check

CONTRACTS = "proofs.crosshair.contracts"
BY_OP = {
    Op.LOOKUP: ("lookup_answers_the_phase",),
    Op.TOUCH: ("touch_changes_only_the_order",),
    Op.PREPARE_LOAD: ("prepare_load_pins_ready_blocks",),
    Op.PREPARE_STORE: ("prepare_store_allocates_or_rejects",),
    Op.COMPLETE_STORE: ("complete_store_ticket_form", "complete_store_vllm_form"),
    Op.COMPLETE_LOAD: ("complete_load_ticket_form", "complete_load_vllm_form"),
    Op.RESET_CACHE: ("reset_holds_running_copies",),
    Op.TAKE_EVENTS: ("take_events_reports_the_net_change",),
}
"""The contracts of :mod:`.contracts` that state each operation's rules."""

DOMAIN = {Policy.LRU: "one-slot,no-reset", Policy.ARC: "arc"}
"""The domains each manager variant is checked on: the small LRU bounds (more of each
bug per path), ARC's for ARC variants."""


@dataclass(frozen=True)
class Member:
    name: str
    kind: str
    """``spec mutant``, ``manager variant`` or ``planted contract``."""
    refuted: bool
    seconds: float
    command: str
    detail: str


def spec_mutants(timeout: float) -> Iterator[Member]:
    from proofs.modelcheck.mutants import MUTANTS

    for mutant in MUTANTS:
        targets = [f"{CONTRACTS}.{name}" for op in mutant.model.replaced for name in BY_OP[op]]
        run = check(targets, timeout, "lru,arc", mutant=mutant.name)
        yield _member(mutant.name, "spec mutant", run)


def manager_variants(timeout: float) -> Iterator[Member]:
    from kvoffload.conformance.selftest.selftest import CATALOGUE, MODULE

    for entry in CATALOGUE:
        if entry.kind != "variant":
            continue
        run = check(["proofs/crosshair/refines.py"], timeout, DOMAIN[entry.policy],
                    manager=f"{MODULE}:{entry.cls}")
        yield _member(entry.label, "manager variant", run)


def planted(timeout: float) -> Iterator[Member]:
    run = check(["proofs/crosshair/planted.py"], timeout)
    for v in run.verdicts:
        yield Member(v.where, "planted contract", v.status == "refuted", run.seconds,
                     run.command, v.status)


def _member(name: str, kind: str, run: Run) -> Member:
    statuses = ", ".join(f"{v.where.split(':')[0]}:{v.status}" for v in run.verdicts)
    return Member(name, kind, run.refuted, run.seconds, run.command, statuses)


PARTS = {"planted": planted, "mutants": spec_mutants, "managers": manager_variants}


def main(timeout: float, parts: tuple[str, ...] = tuple(PARTS)) -> int:
    """Print one table row per member as it is measured, then the total."""
    members: list[Member] = []
    for part in parts:
        for member in PARTS[part](timeout):
            members.append(member)
            mark = "refuted" if member.refuted else "NOT refuted"
            print(f"| {member.kind} | `{member.name}` | {mark} | {member.seconds:.1f} s | "
                  f"`{member.command}` |", flush=True)
    refuted = sum(m.refuted for m in members)
    print(f"\n{refuted} of {len(members)} refuted ({100 * refuted / len(members):.0f} %) at "
          f"--per_condition_timeout={timeout:g}", flush=True)
    return 0 if refuted >= 0.9 * len(members) else 1
