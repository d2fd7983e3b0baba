"""The environment-level node properties: each holds where it should and can fail."""

from __future__ import annotations

from proofs.modelcheck.node import Node
from proofs.modelcheck.properties import (
    ALL_PROPERTIES,
    LIVENESS,
    is_quiescent,
    jobs_match_copies,
    ready_blocks_are_not_being_written,
    running_copies_own_their_slots,
)

from kvoffload.spec import (
    complete_store,
    initial_state,
    prepare_load,
    prepare_store,
    reset_cache,
)


def _stored(*keys: str) -> Node:
    state, _plan = prepare_store(initial_state(2), list(keys))
    return Node(state, tuple(("store", k, 0, s) for k, s in zip(keys, (0, 1), strict=False)))


def test_a_consistent_node_keeps_every_property() -> None:
    node = _stored("a", "b")
    assert jobs_match_copies(node)
    assert running_copies_own_their_slots(node)
    assert ready_blocks_are_not_being_written(node)
    assert not is_quiescent(node)
    assert is_quiescent(Node(initial_state(2)))


def test_jobs_match_copies_counts_per_key() -> None:
    node = _stored("a")
    assert not jobs_match_copies(Node(node.state, ()))
    assert not jobs_match_copies(Node(node.state, node.jobs * 2))
    state, _ = complete_store(node.state, ["a"])
    state, _ = prepare_load(state, ["a"])
    assert jobs_match_copies(Node(state, (("load", "a", 0, 0),)))
    orphaned, _ = reset_cache(state)
    assert jobs_match_copies(Node(orphaned, (("load", "a", 0, 0),)))


def test_a_new_block_on_a_running_copys_slot_is_caught() -> None:
    state, _ = prepare_store(initial_state(2), ["b"])
    node = Node(state, (("store", "a", 0, 0), ("store", "b", 0, 0)))
    assert not running_copies_own_their_slots(node)
    alone = Node(state, (("load", "a", 0, 0),))
    assert not running_copies_own_their_slots(alone)


def test_a_ready_block_under_a_running_store_is_caught() -> None:
    state, _ = prepare_store(initial_state(2), ["a"])
    state, _ = complete_store(state, ["a"])
    assert not ready_blocks_are_not_being_written(Node(state, (("store", "a", 0, 0),)))


def test_every_property_has_a_unique_name() -> None:
    assert len(ALL_PROPERTIES) == len(set(ALL_PROPERTIES))
    assert LIVENESS in ALL_PROPERTIES
