"""The named checks: what each explores, which properties count, what it must find.

Every row of ``proofs/README.md`` made by this checker is one of these at one preset.
``expect`` is the verdict the design calls for: the spec must hold, every mutant must
be caught, and each hazard must show exactly when the assumption that excludes it is
dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvoffload.spec import NO_RESET_IN_FLIGHT, NO_STALE_COMPLETIONS, Policy

from .explorer import Setup
from .model import SPEC
from .mutants import MUTANTS, MUTANTS_BY_NAME
from .node import Form
from .properties import LIVENESS


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

CHECKS: tuple[Check, ...] = (
    Check("spec-lru", f"spec, LRU, reset-safe completions: {_SAFETY_NOTE}, liveness",
          Setup(SPEC, Form.SAFE, Policy.LRU), "holds", ("tiny", "small")),
    Check("spec-arc", f"spec, ARC, reset-safe completions: {_SAFETY_NOTE}, liveness",
          Setup(SPEC, Form.SAFE, Policy.ARC), "holds"),
    Check("spec-vllm-form", "spec, vLLM completions (no job identity), no assumption: "
          "a stale completion marks a re-allocated block READY",
          Setup(SPEC, Form.VLLM, Policy.LRU,
                properties=frozenset({"ready_blocks_are_not_being_written"})),
          "violated", ("tiny", "small")),
    Check("spec-vllm-form+no-stale-completions", "spec, vLLM completions, assuming "
          f"no-stale-completions: {_SAFETY_NOTE}",
          Setup(SPEC, Form.VLLM, Policy.LRU, (NO_STALE_COMPLETIONS,), liveness=False),
          "holds"),
    Check("spec-vllm-form+no-stale-completions:liveness", "spec, vLLM completions, "
          "assuming no-stale-completions: liveness (copies a reset left running never "
          "report, so their held-back slots never come back)",
          Setup(SPEC, Form.VLLM, Policy.LRU, (NO_STALE_COMPLETIONS,),
                properties=frozenset({LIVENESS})), "violated"),
    Check("spec-vllm-form+no-reset-in-flight", "spec, vLLM completions, assuming "
          f"no-reset-in-flight: {_SAFETY_NOTE}, liveness",
          Setup(SPEC, Form.VLLM, Policy.LRU, (NO_RESET_IN_FLIGHT,)), "holds",
          ("tiny", "small")),
    Check("hazard:reset-without-hold-back", "vLLM-shaped reset (slots not held back), no "
          "assumption: a slot is handed to a new store under a copy still running",
          Setup(_HOLD_BACK.model, Form.SAFE, _HOLD_BACK.policy,
                properties=frozenset({"running_copies_own_their_slots"})),
          "violated", ("tiny", "small")),
    *(Check(f"mutant:{m.name}", f"mutant ({m.decision}): {m.rule}",
            Setup(m.model, Form.SAFE, m.policy), "violated") for m in MUTANTS),
    *(Check(f"mutant:{m.name}+{m.hidden_by.name}",
            f"mutant {m.name}, assuming {m.hidden_by.name}: {_SAFETY_NOTE}"
            + ("" if m.hidden_by is NO_STALE_COMPLETIONS else ", liveness"),
            Setup(m.model, Form.SAFE, m.policy, (m.hidden_by,),
                  liveness=m.hidden_by is not NO_STALE_COMPLETIONS), "holds")
      for m in MUTANTS if m.hidden_by is not None),
)

CHECKS_BY_NAME: dict[str, Check] = {c.name: c for c in CHECKS}
