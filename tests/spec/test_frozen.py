"""Frozen means frozen (issue 10 C): derived views are read-only, equal states answer alike."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle

import pytest

from kvoffload.spec import (
    ASSUMPTIONS,
    Block,
    Completion,
    LoadPlan,
    LookupResult,
    Orphan,
    Phase,
    Policy,
    StorePlan,
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


@pytest.mark.parametrize("cls", [Block, Orphan, StorePlan, LoadPlan, Completion])
def test_values_built_at_once_are_the_dataclasses_they_declare(cls: type) -> None:
    """These classes set their fields at once (their own ``__init__``, for speed): the
    parameters, defaults and order of the constructor ``@dataclass`` generates from
    their fields, and still frozen."""
    fields = dataclasses.fields(cls)
    twin = dataclasses.make_dataclass(cls.__name__, [
        (f.name, f.type) if f.default is dataclasses.MISSING
        else (f.name, f.type, dataclasses.field(default=f.default)) for f in fields],
        frozen=True)

    def parameters(of: type) -> list[tuple[str, object, object]]:
        return [(p.name, p.default, p.kind) for p in inspect.signature(of).parameters.values()]

    assert parameters(cls) == parameters(twin)
    values = {f.name: (f.name,) for f in fields}
    built = cls(**values)
    assert dataclasses.asdict(built) == dataclasses.asdict(twin(**values)) == values
    assert built == cls(*values.values())
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(built, fields[0].name, ())
