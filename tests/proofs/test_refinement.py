"""Bounded refinement of the reference manager, and that the comparison can fail."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest
from proofs.modelcheck.bounds import TINY, Bounds
from proofs.modelcheck.node import Form
from proofs.modelcheck.refinement import Factory, NativeManager, RefinementResult, refine

from kvoffload.impl import OffloadManager
from kvoffload.spec import (
    NO_STALE_COMPLETIONS,
    Completion,
    LoadPlan,
    LookupResult,
    NotReadable,
    Policy,
    UnmatchedCompleteLoad,
)

Refine = Callable[..., RefinementResult]
"""The ``refine_once`` fixture of conftest.py: ``refine``, once per session and arguments."""

SMALLER = Bounds("smaller", capacity=1, keys=("a", "b"), resets=1, readers=1, width=2)
ONE_KEY = Bounds("one-key", capacity=1, keys=("a",), resets=1, readers=1, width=1)
"""vLLM's form at one key: 154 states, where SMALLER has 3,370 (about 10 s of CPU)."""


class _StoringIsMiss(OffloadManager):
    def lookup(self, key: object) -> LookupResult:
        found = super().lookup(key)
        return LookupResult.MISS if found is LookupResult.PENDING else found


class _SwallowsUnmatched(OffloadManager):
    def complete_load(self, keys: Iterable[object], ticket: int | None = None) -> Completion:
        try:
            return super().complete_load(keys, ticket)
        except UnmatchedCompleteLoad:
            return Completion()


class _ResetsOnMisuse(OffloadManager):
    def prepare_load(self, keys: Iterable[object]) -> LoadPlan:
        try:
            return super().prepare_load(keys)
        except NotReadable:
            self.reset_cache()  # raises as the spec does, but no longer as it was
            raise


class _Unpicklable(OffloadManager):
    def __init__(self, capacity: int, policy: Policy) -> None:
        super().__init__(capacity, policy)
        self.hook = lambda: None  # a lambda cannot be pickled: refine deep-copies instead


def _factory(cls: type[OffloadManager]) -> Factory:
    def make(capacity: int, policy: Policy) -> NativeManager:
        manager: NativeManager = cls(capacity, policy)
        return manager

    return make


@pytest.mark.parametrize(("form", "bounds"), [
    (Form.TICKET, TINY),
    pytest.param(Form.VLLM, SMALLER, marks=pytest.mark.slow),
    pytest.param(Form.VLLM, TINY, marks=pytest.mark.slow)],
    ids=["ticket", "vllm-smaller", "vllm"])
def test_reference_manager_refines_the_spec_lru(form: Form, bounds: Bounds,
                                                refine_once: Refine) -> None:
    """vLLM's form with its duplicate and late reports (3,370 states at the smaller
    bound, about a minute) is in the slow tier; at TINY it is refined without them
    (``proofs/check.py --refinement lru-vllm``, 2,347 states), as the README row."""
    assumptions = (NO_STALE_COMPLETIONS,) if form is Form.VLLM and bounds is TINY else ()
    result = refine_once(bounds, Policy.LRU, form, assumptions=assumptions)
    assert result.divergence is None, result.divergence
    assert result.verdict == "holds"
    assert result.comparisons > result.states > 50


def test_reference_manager_refines_the_spec_arc_smaller_bound() -> None:
    result = refine(SMALLER, Policy.ARC, Form.TICKET)
    assert result.divergence is None, result.divergence


# ARC at TINY (8,371 and 12,589 states, a few minutes each) runs in the slow tier as
# the recorded rows of proofs/README.md (tests/proofs/test_recorded.py).


def test_a_planted_lookup_bug_is_found_with_a_short_trace() -> None:
    result = refine(SMALLER, Policy.LRU, Form.TICKET, _factory(_StoringIsMiss))
    assert result.divergence is not None
    assert [str(a) for a in result.divergence.trace] == ["prepare_store(['a'])", "lookup('a')"]
    assert "PENDING" in result.divergence.problem
    assert "MISS" in result.divergence.problem


def test_a_planted_missing_error_is_found() -> None:
    """The divergence is at the first call, so one key shows it; the exploration before
    the comparison is what costs (SMALLER's 3,370 states found the same trace)."""
    result = refine(ONE_KEY, Policy.LRU, Form.VLLM, _factory(_SwallowsUnmatched))
    assert result.divergence is not None
    assert [str(a) for a in result.divergence.trace] == ["complete_load(['a'])"]
    assert "UnmatchedCompleteLoad" in result.divergence.problem


def test_a_misuse_error_that_changes_the_manager_is_found() -> None:
    """The right error is not enough: a call that raises must leave the manager as it
    was (its view before the call is read once per node, on the first copy)."""
    result = refine(ONE_KEY, Policy.LRU, Form.TICKET, _factory(_ResetsOnMisuse))
    assert result.divergence is not None
    assert [str(a) for a in result.divergence.trace] == ["prepare_load(['a'])"]
    assert result.divergence.problem.endswith("but its state changed")


def test_a_manager_that_cannot_be_pickled_is_deep_copied() -> None:
    """refine copies the manager for each call by one pickle of it, else by deep copy."""
    assert refine(ONE_KEY, Policy.LRU, Form.TICKET, _factory(_Unpicklable)).verdict == "holds"
