"""CrossHair over bounded domains (``proofs/crosshair``): the domains, the plugin's
pieces and the contracts concretely here; one short CrossHair run that must refute a
planted contract; the confirmed and measured runs in the slow tier."""

from __future__ import annotations

import shutil
from itertools import product

import pytest
from proofs.crosshair import contracts, power
from proofs.crosshair.domain import (
    BOUNDS,
    NO_RESET,
    ONE_SLOT,
    Bound,
    Keys,
    TicketNumber,
    load,
)
from proofs.crosshair.manager import DOMAINS, MANAGER, difference
from proofs.crosshair.plugin import _as_call, alphabet
from proofs.modelcheck.mutants import MUTANTS_BY_NAME

from kvoffload.spec import (
    Call,
    Op,
    Phase,
    apply,
    broken_invariants,
    complete_store,
    initial_state,
    replay,
)
from proofs import crosshair_check

needs_crosshair = pytest.mark.skipif(shutil.which("crosshair") is None,
                                     reason="crosshair-tool not installed")


@pytest.mark.parametrize("bound", [ONE_SLOT, NO_RESET], ids=lambda b: b.name)
def test_every_domain_state_is_reached_by_its_trace_and_keeps_the_invariants(
        bound: Bound) -> None:
    domain = load(bound)
    assert len(domain.states) == len(set(domain.states))
    for state in domain.states:
        reached, _ = replay(initial_state(bound.capacity, bound.policy), domain.traces[state])
        assert reached == state
        assert broken_invariants(state) == ()


def test_the_domain_sizes_recorded_in_proofs_readme() -> None:
    # One state per class up to renaming keys and tickets (proofs/README.md, CrossHair).
    assert (len(load(ONE_SLOT).states), len(load(NO_RESET).states)) == (37, 117)
    assert set(BOUNDS) == {"one-slot", "no-reset", "lru", "arc"}


def test_the_call_alphabet_is_well_formed_and_covers_every_operation() -> None:
    domain = load(ONE_SLOT)
    calls = alphabet(domain.keys, domain.key_lists, domain.tickets)
    assert {c.op for c in calls} == set(Op)
    assert len(calls) == len(set(calls))
    assert Call(Op.COMPLETE_STORE, (0, 0), success=False, ticket=None) in calls


def test_a_mutant_sees_the_call_its_transition_was_given() -> None:
    assert _as_call(Op.LOOKUP, (3,), {}) == Call(Op.LOOKUP, (3,))
    assert _as_call(Op.COMPLETE_STORE, ([1, 1], False, 4), {}) == Call(
        Op.COMPLETE_STORE, (1, 1), success=False, ticket=4)
    assert _as_call(Op.COMPLETE_LOAD, (Keys((2,)),), {"ticket": TicketNumber(1)}) == Call(
        Op.COMPLETE_LOAD, (2,), ticket=1)
    assert _as_call(Op.RESET_CACHE, (), {}) == Call(Op.RESET_CACHE)


def test_the_contracts_hold_for_the_spec_concretely_at_one_slot() -> None:
    """The same helpers CrossHair evaluates, on every state and argument of the bound."""
    domain = load(ONE_SLOT)
    for state in domain.states:
        for keys in map(Keys, domain.key_lists):
            stored = contracts.prepare_store_allocates_or_rejects(state, keys)
            assert contracts._prepare_store_ok(state, keys, *stored)
            loaded = contracts.prepare_load_pins_ready_blocks(state, keys)
            assert contracts._prepare_load_ok(state, keys, *loaded)
            for success in (True, False):
                assert contracts._lands(state, keys, contracts.STORE, success, None,
                                        contracts.complete_store_vllm_form(state, keys, success))
        for key, ticket in product(domain.keys, map(TicketNumber, domain.tickets)):
            assert contracts._lands(state, (key,), contracts.LOAD, True, ticket,
                                    contracts.complete_load_ticket_form(state, key, ticket))
        assert contracts._reset_ok(state, *contracts.reset_holds_running_copies(state))


def test_a_helper_catches_a_failed_store_that_keeps_its_block() -> None:
    state, _ = apply(initial_state(1), Call(Op.PREPARE_STORE, (0,)))
    after, done = complete_store(state, [0], success=False)
    kept = (state, done)  # FailedStoreStaysStoring: the block is still there, STORING
    assert state.phase(0) is Phase.STORING
    assert contracts._lands(state, (0,), contracts.STORE, False, None, (after, done))
    assert not contracts._lands(state, (0,), contracts.STORE, False, None, kept)


def test_the_manager_comparison_finds_a_seeded_bug_and_not_the_reference(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # One domain: difference() otherwise builds every domain (the lru and arc ones
    # cost about 10 s of CPU) to find the state's trace.
    monkeypatch.setenv(DOMAINS, ONE_SLOT.name)
    domain = load(ONE_SLOT)
    storing = next(s for s in domain.states if s.keys_in(Phase.STORING) and not s.orphans)
    key = next(iter(storing.keys_in(Phase.STORING)))
    assert difference(storing, Call(Op.LOOKUP, (key,))) == ""
    assert difference(storing, Call(Op.TAKE_EVENTS), Call(Op.RESET_CACHE)) == ""
    monkeypatch.setenv(MANAGER, "kvoffload.conformance.selftest.mutants:LookupPendingAsMiss")
    assert "PENDING" in difference(storing, Call(Op.LOOKUP, (key,)))


def test_every_spec_mutant_has_contracts_for_the_operations_it_replaces() -> None:
    for mutant in MUTANTS_BY_NAME.values():
        for op in mutant.model.replaced:
            assert all(hasattr(contracts, name) for name in power.BY_OP[op])


@needs_crosshair
def test_the_command_refutes_a_planted_contract_in_seconds() -> None:
    run = crosshair_check.check(["proofs.crosshair.planted.lookup_never_answers_hit"],
                                timeout=5, domains="one-slot")
    assert [v.status for v in run.verdicts] == ["refuted"]
    assert "lookup_never_answers_hit" in run.output


@pytest.mark.slow
@needs_crosshair
def test_the_three_planted_contracts_are_refuted() -> None:
    run = crosshair_check.check(["proofs/crosshair/planted.py"], timeout=20)
    assert [v.status for v in run.verdicts] == ["refuted"] * 3


@pytest.mark.slow
@needs_crosshair
def test_every_contract_is_confirmed_over_all_paths_at_one_slot() -> None:
    run = crosshair_check.check(["proofs/crosshair/contracts.py"], timeout=300,
                                domains="one-slot")
    assert len(run.verdicts) == 22
    assert {v.status for v in run.verdicts} == {"confirmed"}, run.output


@pytest.mark.slow
@needs_crosshair
def test_a_spec_mutant_is_refuted_by_the_contract_of_its_operation() -> None:
    run = crosshair_check.check([f"{power.CONTRACTS}.complete_store_vllm_form"], timeout=30,
                                domains="one-slot", mutant="FailedStoreStaysStoring")
    assert run.refuted


def _have_laws() -> bool:
    import importlib.util

    return importlib.util.find_spec("kvoffload.spec.laws") is not None


@pytest.mark.slow
@needs_crosshair
@pytest.mark.skipif(not _have_laws(), reason="kvoffload.spec.laws (issue 24, item 1) absent")
def test_the_spec_satisfies_its_laws_on_every_path_at_one_slot() -> None:
    run = crosshair_check.check(["proofs/crosshair/spec_laws.py"], timeout=900,
                                domains="one-slot")
    assert [v.status for v in run.verdicts] == ["confirmed"], run.output


def test_every_contract_file_defines_what_its_conditions_name() -> None:
    """Regression: ``ruff --fix`` once dropped ``broken_invariants`` from contracts.py as
    unused (only the docstrings name it), and every ``pre:`` then failed to evaluate:
    CrossHair said "unable to meet precondition" and refuted nothing."""
    from proofs.crosshair import planted, refines

    for module in (contracts, planted, refines):
        assert callable(getattr(module, "broken_invariants", None)), module.__name__
