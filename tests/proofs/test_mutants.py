"""The mutants: the store variant is the spec's prepare_store when no switch is on,
every mutant is caught at TINY, and each assumption-tied mutant passes under it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from proofs.modelcheck.bounds import TINY, Bounds
from proofs.modelcheck.environment import Action, Form, Node, Outcome
from proofs.modelcheck.explorer import Result, Setup, explore
from proofs.modelcheck.model import SPEC
from proofs.modelcheck.mutants import MUTANTS, prepare_store_variant

from kvoffload.spec import Policy, prepare_store

RunCheck = Callable[..., Result]
"""The ``run_check`` fixture of conftest.py."""


ARC_BOUND = Bounds("arc", capacity=1, keys=("a", "b"), resets=1, readers=1, width=2)


@pytest.mark.parametrize(("policy", "bounds"), [(Policy.LRU, TINY), (Policy.ARC, ARC_BOUND)])
def test_store_variant_without_switches_is_the_spec(policy: Policy, bounds: Bounds) -> None:
    states = {}

    def visit(i: int, node: Node, action: Action, outcome: Outcome) -> None:
        states[i] = node.state

    explore(Setup(SPEC, Form.SAFE, policy, properties=frozenset()), bounds, visit=visit)
    assert len(states) > 20
    for state in states.values():
        for keys in TINY.sequences():
            assert prepare_store_variant(state, keys) == prepare_store(state, keys)


def test_mutant_names_are_unique_and_rules_cited() -> None:
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)
    assert all(m.decision.startswith("D") and m.rule for m in MUTANTS)


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_every_mutant_is_caught_at_tiny(mutant: object, run_check: RunCheck) -> None:
    from proofs.modelcheck.mutants import Mutant

    assert isinstance(mutant, Mutant)
    result = run_check(f"mutant:{mutant.name}")
    assert result.verdict == "violated"
    assert result.violation is not None
    assert result.violation.trace


@pytest.mark.parametrize("mutant", [m for m in MUTANTS if m.hidden_by is not None],
                         ids=[m.name for m in MUTANTS if m.hidden_by is not None])
def test_the_assumption_hides_the_mutant(mutant: object, run_check: RunCheck) -> None:
    from proofs.modelcheck.mutants import Mutant

    assert isinstance(mutant, Mutant)
    assert mutant.hidden_by is not None
    assert run_check(f"mutant:{mutant.name}+{mutant.hidden_by.name}").verdict == "holds"
