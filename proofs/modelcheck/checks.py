"""The named checks: what each explores, which properties count, what it must find.

Every row of ``proofs/README.md`` made by this checker is one of these at one preset.
``expect`` is the verdict the design calls for: the spec must hold, every mutant must
be caught, and each hazard must show exactly when the assumption that excludes it is
dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvoffload.spec import (
    NO_RESET_IN_FLIGHT,
    NO_STALE_COMPLETIONS,
    Assumption,
    Eviction,
    Op,
    Policy,
)

from .explorer import Setup
from .model import SPEC
from .mutants import MUTANTS, MUTANTS_BY_NAME, Mutant
from .node import Form
from .properties import LAWS_ALONE, LIVENESS


@dataclass(frozen=True)
class Check:
    """One named exploration and the verdict it must reach."""

    name: str
    about: str
    setup: Setup
    expect: str
    """``holds`` or ``violated``."""
    presets: tuple[str, ...] = ("tiny",)


_SAFETY_NOTE = "every spec invariant and every call rule"
_HOLD_BACK = MUTANTS_BY_NAME["ResetFreesRunningSlots"]
_UNSAFE = frozenset({"ready_blocks_are_not_being_written", "running_copies_own_their_slots"})

NO_STALE_STORE_COMPLETIONS = Assumption(
    "no-stale-store-completions",
    "a complete_store of a job that is not running live (no-stale-completions for stores "
    "only: what is left shows the complete_load hazard on its own)",
    lambda state, call: call.op is Op.COMPLETE_STORE
    and NO_STALE_COMPLETIONS.excludes(state, call))

_FORMS = {Form.TICKET: "", Form.VLLM: ", vLLM completions"}


def _assumed(m: Mutant) -> tuple[Assumption, ...]:
    """The mutant's hiding assumption, and in vLLM's form the one that form needs."""
    hidden = () if m.hidden_by is None else (m.hidden_by,)
    return hidden + ((NO_STALE_COMPLETIONS,) if m.form is Form.VLLM else ())


def _live(m: Mutant) -> bool:
    """Liveness counts unless stale completions are assumed away (then copies a reset
    left running never report, and their slots never come back)."""
    return NO_STALE_COMPLETIONS not in _assumed(m)


CHECKS: tuple[Check, ...] = (
    Check("spec-lru", f"spec, LRU, ticket completions, duplicate and late ones included, "
          f"no assumption: {_SAFETY_NOTE}, liveness",
          Setup(SPEC, Form.TICKET, Policy.LRU), "holds", ("tiny", "small")),
    Check("spec-arc", f"spec, ARC, ticket completions, duplicate and late ones included, "
          f"no assumption: {_SAFETY_NOTE}, liveness",
          Setup(SPEC, Form.TICKET, Policy.ARC), "holds"),
    Check("spec-lru+background-eviction", f"spec, LRU, ticket completions, the opt-in "
          f"background eviction (D14: the tier may evict any READY block with no readers "
          f"between calls), no assumption: {_SAFETY_NOTE}, liveness",
          Setup(SPEC, Form.TICKET, Policy.LRU, eviction=Eviction.BACKGROUND), "holds",
          ("tiny", "small")),
    Check("spec-arc+background-eviction", f"spec, ARC, ticket completions, the opt-in "
          f"background eviction (D14), no assumption: {_SAFETY_NOTE}, liveness",
          Setup(SPEC, Form.TICKET, Policy.ARC, eviction=Eviction.BACKGROUND), "holds"),
    Check("spec-lru+node-failure", f"spec, LRU, ticket completions, the node's failure "
          f"(D15: in any state the environment may fail the node that holds the tier, "
          f"every block lost and the copies running on them ended), no assumption: "
          f"{_SAFETY_NOTE}, liveness",
          Setup(SPEC, Form.TICKET, Policy.LRU, node_failure=True), "holds",
          ("tiny", "small")),
    Check("spec-arc+node-failure", f"spec, ARC, ticket completions, the node's failure "
          f"(D15), no assumption: {_SAFETY_NOTE}, liveness",
          Setup(SPEC, Form.TICKET, Policy.ARC, node_failure=True), "holds"),
    Check("spec-vllm-form", "spec, vLLM completions (no job identity), no assumption: "
          "a completion that is not its running job's (a duplicate, a late or pre-reset "
          "report) lands on the key's running job",
          Setup(SPEC, Form.VLLM, Policy.LRU, properties=_UNSAFE),
          "violated", ("tiny", "small")),
    Check("spec-vllm-form+no-stale-store-completions", "spec, vLLM completions, stale "
          "completions of loads only: a stale complete_load unpins a running load, whose "
          "slot can then be handed out (use-after-free)",
          Setup(SPEC, Form.VLLM, Policy.LRU, (NO_STALE_STORE_COMPLETIONS,),
                properties=_UNSAFE), "violated"),
    Check("spec-vllm-form+no-stale-completions", "spec, vLLM completions, assuming "
          f"no-stale-completions: {_SAFETY_NOTE}",
          Setup(SPEC, Form.VLLM, Policy.LRU, (NO_STALE_COMPLETIONS,), liveness=False),
          "holds"),
    Check("spec-vllm-form+no-stale-completions:liveness", "spec, vLLM completions, "
          "assuming no-stale-completions: liveness (copies a reset left running never "
          "report, so their held-back slots never come back)",
          Setup(SPEC, Form.VLLM, Policy.LRU, (NO_STALE_COMPLETIONS,),
                properties=frozenset({LIVENESS})), "violated"),
    Check("spec-vllm-form+no-stale-completions+no-reset-in-flight", "spec, vLLM "
          "completions, assuming no-stale-completions and no-reset-in-flight, the pair "
          f"that form needs: {_SAFETY_NOTE}, liveness",
          Setup(SPEC, Form.VLLM, Policy.LRU, (NO_STALE_COMPLETIONS, NO_RESET_IN_FLIGHT)),
          "holds"),
    Check("spec-vllm-form+no-reset-in-flight", "spec, vLLM completions, assuming "
          "no-reset-in-flight only: a duplicate or late completion within one epoch still "
          "lands on the key's next job",
          Setup(SPEC, Form.VLLM, Policy.LRU, (NO_RESET_IN_FLIGHT,), properties=_UNSAFE),
          "violated", ("tiny", "small")),
    Check("hazard:reset-without-hold-back", "vLLM-shaped reset (slots not held back), no "
          "assumption: a running copy loses its slot, which a new store can be given",
          Setup(_HOLD_BACK.model, Form.TICKET, _HOLD_BACK.policy,
                properties=frozenset({"running_copies_own_their_slots"})),
          "violated", ("tiny", "small")),
    *(Check(f"mutant:{m.name}", f"mutant ({m.decision}{_FORMS[m.form]}): {m.rule}",
            Setup(m.model, m.form, m.policy), "violated") for m in MUTANTS),
    *(Check(f"mutant:{m.name}+{m.hidden_by.name}",
            f"mutant {m.name}{_FORMS[m.form]}, assuming {m.hidden_by.name}"
            + (", no-stale-completions" if m.form is Form.VLLM else "")
            + f": {_SAFETY_NOTE}" + (", liveness" if _live(m) else ""),
            Setup(m.model, m.form, m.policy, _assumed(m), liveness=_live(m)), "holds")
      for m in MUTANTS if m.hidden_by is not None),
)

CHECKS_BY_NAME: dict[str, Check] = {c.name: c for c in CHECKS}


LAWS_ROWS: tuple[tuple[str, str], ...] = (
    ("spec-lru", "tiny"), ("spec-lru", "small"), ("spec-arc", "tiny"),
    ("spec-lru+background-eviction", "tiny"), ("spec-arc+background-eviction", "tiny"),
    ("spec-lru+node-failure", "tiny"), ("spec-arc+node-failure", "tiny"),
    ("spec-vllm-form+no-stale-completions", "tiny"),
    *((f"mutant:{m.name}", "tiny") for m in MUTANTS),
)
"""The checks recorded a second time with the laws alone (``--laws-only``), and at which
preset: the spec's rows show that the transitions satisfy every law on every reachable
call (the two statements agree), the mutant rows that the laws alone catch each mutant."""

SLOW_LAWS_ROWS = frozenset({"spec-arc", "spec-vllm-form+no-stale-completions",
                            "spec-arc+background-eviction", "spec-arc+node-failure"})
"""The TINY laws-alone rows that take more than a few seconds: the slow test tier reruns
them (each explores thousands of states with the 33 laws on every call)."""


SLOW_TINY_ROWS = frozenset({"spec-arc+background-eviction", "spec-arc+node-failure"})
"""TINY checks whose rows (with the comparison and with the laws alone) take half a
minute or more: the slow tier reruns them. ``spec-lru+background-eviction`` and
``spec-lru+node-failure`` (about a second) stay in the default tier."""


WIDE_TINY_ROWS = frozenset({"mutant:UnmatchedCompleteLoadAccepted+no-misuse"})
"""TINY checks whose verdict and row the default test tier leaves to the wide one
(``pytest -m wide``, which CI runs after it): a mutant an assumption hides, in vLLM's form,
whose kind the default tier still checks (``mutant:LoadOfStoringMarksReady+no-misuse``
hides a mutant behind no-misuse, ``mutant:CompleteLoadCountsDuplicates+unique-keys`` one
in vLLM's form, through the nodes of ``spec-vllm-form+no-stale-completions``)."""


def laws_only(check: Check) -> Check:
    """``check`` with the comparison switched off: only the spec's second statement counts
    (its laws on every call, its invariants in every node; no comparison with the spec's
    transitions, no environment property, no liveness). A mutant must still be caught; the
    spec must still hold (``python proofs/check.py --laws-only``)."""
    expect = "holds" if check.setup.model == SPEC else "violated"
    return Check(check.name, f"{check.about} [laws alone: the comparison off]",
                 replace(check.setup, properties=LAWS_ALONE, liveness=False), expect,
                 check.presets)
