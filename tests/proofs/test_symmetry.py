"""The canonical form is exact, and the reduced search is complete.

Checked on every node the unreduced search reaches, against the brute-force form (the
least encoding over every permutation of keys and slots): one fast form per class and
one class per fast form, and the reduced search finds exactly as many states as the
unreduced one reaches classes (nothing is missed, call reduction included).

The default tier checks two setups: vLLM's form with its stale reports (jobs on free
slots and keys sharing a slot, so the exact form and every free-slot choice; finished
jobs) and ARC (its four lists and ``p``). Between them they run every line of
:mod:`~proofs.modelcheck.symmetry` and of the environment's calls but the node's
failure; the other setups are in the wide tier. At TINY, rumur's exhaustive symmetry
reduction keeps one state per class of LRU's model with and without the node's failure,
and reaches as many as the reduced search (tests/proofs/test_rumur.py).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from functools import cache

import pytest
from proofs.modelcheck.bounds import TINY, Bounds
from proofs.modelcheck.explorer import Setup, Shared, explore, family_of
from proofs.modelcheck.model import SPEC
from proofs.modelcheck.mutants import MUTANTS_BY_NAME
from proofs.modelcheck.node import Form, Node
from proofs.modelcheck.symmetry import canonical, exact_form

from kvoffload.spec import NO_STALE_COMPLETIONS, Policy

HOLD_BACK_BOUND = Bounds("hold-back", capacity=2, keys=("a", "b"), resets=1, readers=1,
                         width=1)
"""Small enough to search unreduced; big enough for keys to share slots after a reset."""
ARC_BOUND = Bounds("arc", capacity=1, keys=("a", "b"), resets=1, readers=1, width=2)
STALE_BOUND = Bounds("stale", capacity=2, keys=("a", "b"), resets=0, readers=1, width=1)
"""vLLM's form with its duplicate and late reports (the spec's accounting goes wrong, so
copies outlive it): a space that, at TINY, takes minutes even reduced."""


MOST_NODES = 50_000
"""More nodes than any search here finds: a search past it has lost its bound."""


def _unreduced(setup: Setup, bounds: Bounds, shared: dict[Hashable, Shared]
               ) -> Sequence[Node]:
    """Every node the search without symmetry reduction expands; ``shared``: what the
    searches of each family made so far."""

    def bounded(states: int, depth: int, queued: int, seconds: float) -> None:
        if states > MOST_NODES:
            raise RuntimeError(f"the unreduced search found over {MOST_NODES} nodes: "
                               "the bounds no longer make it finite")

    family = family_of(setup, bounds, symmetry=False)
    found = explore(setup, bounds, symmetry=False, progress=bounded, every=0.0,
                    keep_nodes=True, shared=shared.setdefault(family, Shared(family))).nodes
    assert found is not None
    return found


@pytest.fixture(scope="module")
def shared() -> dict[Hashable, Shared]:
    """The searches' :class:`Shared` by family, for this module: the node-failure case
    makes again every call the lru-ticket case made, unreduced (1,892 of its 2,114
    nodes are the lru-ticket case's)."""
    return {}


_exact_form = cache(exact_form)
""":func:`exact_form` (the brute-force form, the costly part of the check), once per node
and key universe this session: the node-failure case reaches most of the nodes the
lru-ticket case does (1,892 of 2,114)."""


@pytest.mark.parametrize(("setup", "bounds"), [
    pytest.param(Setup(SPEC, Form.TICKET, Policy.LRU, properties=frozenset()), TINY,
                 marks=pytest.mark.wide),
    pytest.param(Setup(SPEC, Form.VLLM, Policy.LRU, (NO_STALE_COMPLETIONS,),
                       properties=frozenset()), HOLD_BACK_BOUND, marks=pytest.mark.wide),
    (Setup(SPEC, Form.VLLM, Policy.LRU, properties=frozenset()), STALE_BOUND),
    (Setup(SPEC, Form.TICKET, Policy.ARC, properties=frozenset()), ARC_BOUND),
    pytest.param(Setup(MUTANTS_BY_NAME["ResetFreesRunningSlots"].model, Form.TICKET,
                       Policy.LRU, properties=frozenset()), HOLD_BACK_BOUND,
                 marks=pytest.mark.wide),
    pytest.param(Setup(SPEC, Form.TICKET, Policy.LRU, properties=frozenset(),
                       node_failure=True), TINY, marks=pytest.mark.wide),
    pytest.param(Setup(SPEC, Form.VLLM, Policy.LRU, (NO_STALE_COMPLETIONS,),
                       properties=frozenset(), node_failure=True), HOLD_BACK_BOUND,
                 marks=pytest.mark.slow),
], ids=["lru-ticket", "lru-vllm-no-stale", "lru-vllm-stale-reports", "arc-ticket",
        "reset-without-hold-back", "lru-ticket-node-failure", "lru-vllm-node-failure"])
def test_canonical_form_is_exact_and_reduction_complete(
        setup: Setup, bounds: Bounds, shared: dict[Hashable, Shared]) -> None:
    nodes = _unreduced(setup, bounds, shared)
    fast: dict[object, object] = {}
    exact_to_fast: dict[object, object] = {}
    for node in nodes:
        form, _ = canonical(node, bounds.keys)
        exact = _exact_form(node, bounds.keys)
        assert fast.setdefault(form, exact) == exact  # sound: never merges two classes
        assert exact_to_fast.setdefault(exact, form) == form  # exact: never splits one
    family = family_of(setup, bounds)
    reduced = explore(setup, bounds, shared=shared.setdefault(family, Shared(family)))
    assert reduced.verdict == "holds"
    assert reduced.states == len(fast)


def test_keys_with_equal_components_share_a_class() -> None:
    setup = Setup(SPEC, Form.TICKET, Policy.LRU)
    from kvoffload.spec import initial_state, prepare_store

    state, _ = prepare_store(initial_state(2), ["a", "b"])
    node = Node(state, (("store", "a", 0, 0), ("store", "b", 0, 1)))
    _, classes = canonical(node, ("a", "b", "c"))
    assert classes is not None
    assert classes[0] == classes[1] != classes[2]
    assert setup.form is Form.TICKET


def test_jobs_on_free_slots_take_the_exact_form() -> None:
    from kvoffload.spec import initial_state

    state = initial_state(2)
    low = Node(state, (("store", "a", 0, 0),))
    high = Node(state, (("store", "b", 0, 1),))
    form, classes = canonical(low, ("a", "b"))
    assert classes is None
    assert form == canonical(high, ("a", "b"))[0] == ("dangling", exact_form(low, ("a", "b")))


def test_shared_slots_fall_back_to_the_exact_form() -> None:
    from kvoffload.spec import initial_state, prepare_store

    state, _ = prepare_store(initial_state(2), ["b"])
    # a running store of 'a' on the slot 'b' was just given: keys share a slot
    node = Node(state, (("store", "a", 0, 0), ("store", "b", 1, 0)))
    form, classes = canonical(node, ("a", "b", "c"))
    assert classes is None
    assert form == ("shared", exact_form(node, ("a", "b", "c")))


def test_a_key_s_component_is_kept_by_everything_it_reads() -> None:
    """canonical() keeps each key's component by its block, orphans, jobs and finished
    jobs (``_own_component``): nodes that differ in one of them alone get forms of their
    own, whichever was asked first, and the same forms as with nothing kept."""
    from proofs.modelcheck import symmetry

    from kvoffload.spec import initial_state, prepare_store, reset_cache

    state, _ = prepare_store(initial_state(2), ["a"])
    orphaned, _ = reset_cache(state)
    nodes = [Node(state), Node(state, (("store", "a", 0, 0),)),
             Node(state, (), (("store", "a", 0),)), Node(orphaned),
             Node(orphaned, (("store", "a", 0, 0),))]
    for order in (nodes, nodes[::-1]):
        symmetry._own_component.cache_clear()
        forms = [canonical(n, ("a", "b"))[0] for n in order]
        assert len(set(forms)) == len(order)
        uncached = []
        for n in order:
            symmetry._own_component.cache_clear()
            uncached.append(canonical(n, ("a", "b"))[0])
        assert forms == uncached
