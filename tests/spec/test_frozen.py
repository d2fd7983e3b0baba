"""Frozen means frozen (issue 10 C): derived views are read-only, equal states answer alike."""

from __future__ import annotations

import copy
import pickle

import pytest

from kvoffload.spec import (
    ASSUMPTIONS,
    LookupResult,
    Phase,
    Policy,
    complete_store,
    initial_state,
)
from kvoffload.spec import transitions as spec_transitions
from kvoffload.spec.state import CacheState


def stored(policy: Policy = Policy.LRU) -> CacheState:
    state, _ = spec_transitions.prepare_store(initial_state(2, policy), ["a"])
    state, _ = complete_store(state, ["a"])
    return state


def test_the_table_cannot_be_changed() -> None:
    state = stored()
    state.__dict__.pop("table", None)  # dropping the cached view only rebuilds it
    with pytest.raises(AttributeError):
        state.table.pop("a")  # type: ignore[attr-defined]  # the mutation the test expects refused
    with pytest.raises(TypeError):
        state.table["b"] = state.table["a"]  # type: ignore[index]  # likewise
    assert spec_transitions.lookup(state, "a")[1] is LookupResult.HIT


@pytest.mark.parametrize("policy", list(Policy))
def test_equal_copies_answer_the_same(policy: Policy) -> None:
    state = stored(policy)
    _ = state.table  # the derived view built before copying
    for twin in (copy.copy(state), copy.deepcopy(state), pickle.loads(pickle.dumps(state)),
                 stored(policy)):
        assert twin == state
        assert hash(twin) == hash(state)
        assert dict(twin.table) == dict(state.table)
        for key in "ab":
            assert spec_transitions.lookup(twin, key)[1] is spec_transitions.lookup(state, key)[1]


def test_module_tables_are_read_only() -> None:
    with pytest.raises(TypeError):
        ASSUMPTIONS["no-misuse"] = ASSUMPTIONS["unique-keys"]  # type: ignore[index]  # refused
    with pytest.raises(TypeError):
        spec_transitions._LOOKUP[Phase.STORING] = LookupResult.MISS  # type: ignore[index]  # refused
