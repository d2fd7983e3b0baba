"""The mutants: built on the spec, each differing from it in the operations it replaces
only, every one caught at TINY, each assumption-tied one passing under its assumption,
and named after the conformance suite's seeded bug of the same class."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable

import pytest
from proofs.modelcheck import mutants as mutants_module
from proofs.modelcheck.checks import WIDE_TINY_ROWS
from proofs.modelcheck.explorer import Result
from proofs.modelcheck.mutants import MUTANTS, Mutant

from kvoffload.conformance.selftest.selftest import CATALOGUE

RunCheck = Callable[..., Result]
"""The ``run_check`` fixture of conftest.py."""


def test_mutant_names_are_unique_and_rules_cited() -> None:
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)
    assert all(m.decision.startswith("D") and m.rule for m in MUTANTS)
    assert all(m.model.replaced for m in MUTANTS)


def test_names_shared_with_the_suite_name_its_seeded_bugs() -> None:
    """A mutant marked ``in_suite`` has the name of a seeded bug of the self-test; one
    not marked has a name the suite does not use for another bug."""
    suite = {entry.cls for entry in CATALOGUE if entry.kind == "variant"}
    assert {m.name for m in MUTANTS if m.in_suite} <= suite
    assert not {m.name for m in MUTANTS if not m.in_suite} & suite


def test_mutants_use_only_the_spec_public_api() -> None:
    """No import of the spec's private helpers, no transition body copied."""
    tree = ast.parse(inspect.getsource(mutants_module))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and "kvoffload" in node.module:
            assert node.module == "kvoffload.spec", node.module
            assert not any(alias.name.startswith("_") for alias in node.names)


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_every_mutant_is_caught_at_tiny(mutant: Mutant, run_check: RunCheck) -> None:
    result = run_check(f"mutant:{mutant.name}")
    assert result.verdict == "violated"
    assert result.violation is not None
    assert result.violation.trace


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_every_mutant_is_caught_by_the_laws_alone(mutant: Mutant, run_check: RunCheck) -> None:
    """With the comparison with the spec switched off (and the environment's properties
    with it), the spec's laws and invariants still catch every mutant at TINY."""
    result = run_check(f"mutant:{mutant.name}", "tiny", True)
    assert result.verdict == "violated"
    assert result.violation is not None
    assert result.violation.prop != "follows_the_spec"
    assert result.violation.trace


def _hidden(m: Mutant) -> str:
    """The check of mutant ``m`` under the assumption that hides it."""
    assert m.hidden_by is not None
    return f"mutant:{m.name}+{m.hidden_by.name}"


@pytest.mark.parametrize("mutant", [
    pytest.param(m, id=m.name, marks=[pytest.mark.wide] if _hidden(m) in WIDE_TINY_ROWS else [])
    for m in MUTANTS if m.hidden_by is not None])
def test_the_assumption_hides_the_mutant(mutant: Mutant, run_check: RunCheck) -> None:
    assert run_check(_hidden(mutant)).verdict == "holds"
