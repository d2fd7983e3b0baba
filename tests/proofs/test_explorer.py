"""Exploration results: every counterexample replays, traces are shortest, verdicts hold.

Every violated TINY check's trace is replayed from the initial state by
:func:`~proofs.modelcheck.explorer.replay`, which shares nothing with the search but
the environment's step: the trace must be made of calls the environment may make, and
must break the property the check reports, at its last call (a call rule), in its
last node (a node property), or from its last node on (liveness).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace

import collector_checks
import pytest
from collector_checks import LRU, ONE_KEY
from proofs.modelcheck import explorer
from proofs.modelcheck.bounds import TINY, Bounds
from proofs.modelcheck.checks import CHECKS, CHECKS_BY_NAME, WIDE_TINY_ROWS
from proofs.modelcheck.environment import Environment
from proofs.modelcheck.explorer import (
    Result,
    Setup,
    Shared,
    completions_reach_quiescence,
    explore,
    family_of,
    format_trace,
    initial_node,
    liveness_of,
    replay,
)
from proofs.modelcheck.model import SPEC
from proofs.modelcheck.mutants import MUTANTS_BY_NAME
from proofs.modelcheck.node import Action, Form, Outcome
from proofs.modelcheck.properties import LIVENESS, NODE_PROPERTIES, WITHOUT_LAWS
from proofs.modelcheck.step import step

from kvoffload.spec import NO_RESET_IN_FLIGHT, NO_STALE_COMPLETIONS, Call, Eviction, Op, Policy

RunCheck = Callable[..., Result]
"""The ``run_check`` fixture of conftest.py."""


TINY_CHECKS = [pytest.param(c.name, id=c.name, marks=[pytest.mark.wide] if c.name in
                             WIDE_TINY_ROWS else []) for c in CHECKS if "tiny" in c.presets]
VIOLATED = [c.name for c in CHECKS if "tiny" in c.presets and c.expect == "violated"]


@pytest.mark.parametrize("name", TINY_CHECKS)
def test_verdict_is_the_one_the_check_calls_for(name: str, run_check: RunCheck) -> None:
    assert run_check(name).verdict == CHECKS_BY_NAME[name].expect


@pytest.mark.parametrize("name", VIOLATED)
def test_counterexample_replays_from_the_initial_state(name: str, run_check: RunCheck) -> None:
    check = CHECKS_BY_NAME[name]
    violation = run_check(name).violation
    assert violation is not None
    nodes, broken = replay(check.setup, TINY, violation.trace)
    node_props = {p.__name__: p for p in NODE_PROPERTIES}
    if violation.prop == LIVENESS:
        assert broken is None
        assert not completions_reach_quiescence(check.setup, TINY, nodes[-1])
    elif violation.prop in node_props:
        assert broken is None
        assert len(nodes) == len(violation.trace) + 1
        assert not node_props[violation.prop](nodes[-1])
        assert all(node_props[violation.prop](n) for n in nodes[:-1])
    else:
        assert broken is not None
        assert broken[0] == violation.prop
        assert len(nodes) == len(violation.trace)


def test_duplicate_completion_trace_is_the_known_shortest(run_check: RunCheck) -> None:
    """Issue 10 A: in vLLM's form a late report of a finished store lands on the next
    store of the key, which reads READY while it is still being written."""
    violation = run_check("spec-vllm-form").violation
    assert violation is not None
    assert format_trace(violation.trace).splitlines() == [
        "1. prepare_store(['a'])",
        "2. complete_store(['a'], success=False)  # job 0",
        "3. prepare_store(['a'])",
        "4. complete_store(['a'])  # job 0",
    ]


def test_slot_reuse_trace_is_the_known_shortest(run_check: RunCheck) -> None:
    violation = run_check("hazard:reset-without-hold-back").violation
    assert violation is not None
    assert [str(a) for a in violation.trace] == ["prepare_store(['a'])", "reset_cache()"]


def test_stale_complete_load_trace_is_the_known_shortest(run_check: RunCheck) -> None:
    """Issue 10 B: in vLLM's form a late complete_load unpins the key's next load."""
    violation = run_check("spec-vllm-form+no-stale-store-completions").violation
    assert violation is not None
    assert violation.prop == "running_copies_own_their_slots"
    assert [str(a) for a in violation.trace] == [
        "prepare_store(['a'])", "complete_store(['a'])  # job 0", "prepare_load(['a'])",
        "complete_load(['a'])  # job 1", "prepare_load(['a'])", "complete_load(['a'])  # job 1"]


@pytest.mark.parametrize("name", ["spec-vllm-form", "hazard:reset-without-hold-back",
                                  "mutant:MissingRemovalEvent"])
def test_no_shorter_trace_exists(name: str, run_check: RunCheck) -> None:
    """An independent search without symmetry, one call short of the trace, finds no
    violation of the property: breadth-first order made the trace a shortest one."""
    check = CHECKS_BY_NAME[name]
    found = run_check(name).violation
    assert found is not None
    env = Environment(check.setup.model, TINY, check.setup.form)
    prop = {p.__name__: p for p in NODE_PROPERTIES}.get(found.prop)
    level = {initial_node(TINY, check.setup.policy)}
    seen = set(level)
    for _ in range(len(found.trace) - 1):
        following = set()
        for node in level:
            for action in env.actions(node, None):
                outcome = env.step(node, action)
                assert outcome.violation is None or outcome.violation[0] != found.prop
                if outcome.node is not None and outcome.node not in seen:
                    assert prop is None or prop(outcome.node)
                    seen.add(outcome.node)
                    following.add(outcome.node)
        level = following
    assert level


def test_replay_rejects_a_call_the_environment_cannot_make() -> None:
    setup = Setup(SPEC, Form.TICKET, Policy.LRU)
    bogus = Action(Call(Op.COMPLETE_STORE, ("a",), ticket=0), jobs=(("store", "a", 0, 0),))
    with pytest.raises(ValueError, match="not a call the environment makes"):
        replay(setup, TINY, [bogus])


def test_liveness_trace_ends_where_completions_cannot_reach_quiescence(run_check: RunCheck) -> None:
    violation = run_check("spec-vllm-form+no-stale-completions:liveness").violation
    assert violation is not None
    assert violation.prop == LIVENESS
    assert [str(a) for a in violation.trace] == ["prepare_store(['a'])", "reset_cache()"]


def test_spec_state_counts_do_not_depend_on_hash_order(run_check: RunCheck) -> None:
    """Same count again in this process (hash seeds differ between processes; the
    recorded-rows test checks against another process's count)."""
    assert explore(CHECKS_BY_NAME["spec-lru"].setup, TINY).states == run_check(
        "spec-lru").states


TWO_KEYS = Bounds("two-keys", capacity=2, keys=("a", "b"), resets=1, readers=1, width=1)
"""Where vLLM's form under no-stale-completions already breaks liveness (535 states)."""


@pytest.mark.parametrize(("safety", "bounds"), [
    (Setup(SPEC, Form.TICKET, Policy.LRU, liveness=False), TWO_KEYS),
    (CHECKS_BY_NAME["spec-vllm-form+no-stale-completions"].setup, TWO_KEYS)],
    ids=["holds", "violated"])
def test_liveness_read_from_the_twin_is_what_a_search_finds(safety: Setup,
                                                            bounds: Bounds) -> None:
    """conftest.py reads ``X:liveness`` from check ``X``'s search (liveness_of): the
    verdict, trace, figures and tree are those of a search of liveness alone."""
    alone = replace(safety, properties=frozenset({LIVENESS}), liveness=True)
    twin = explore(safety, bounds, keep_graph=True)
    assert twin.verdict == "holds"
    read, fresh = liveness_of(alone, safety, twin), explore(alone, bounds)
    assert (read.verdict, read.violation, read.states, read.transitions, read.depth,
            read.checked) == (fresh.verdict, fresh.violation, fresh.states,
                              fresh.transitions, fresh.depth, fresh.checked)
    assert read.tree is not None
    assert fresh.tree is not None
    assert (read.tree.parent, read.tree.via) == (fresh.tree.parent, fresh.tree.via)


def test_liveness_is_read_only_from_a_complete_search_of_the_same_setup() -> None:
    safety = Setup(SPEC, Form.TICKET, Policy.LRU, liveness=False)
    alone = replace(safety, properties=frozenset({LIVENESS}), liveness=True)
    kept = explore(safety, ONE_KEY, keep_graph=True)
    with pytest.raises(ValueError, match="kept its graph"):
        liveness_of(alone, safety, explore(safety, ONE_KEY))
    with pytest.raises(ValueError, match="liveness alone"):
        liveness_of(safety, safety, kept)
    with pytest.raises(ValueError, match="but for its properties"):
        liveness_of(alone, replace(safety, policy=Policy.ARC), kept)
    broken = explore(CHECKS_BY_NAME["spec-vllm-form"].setup, ONE_KEY, keep_graph=True)
    assert broken.verdict == "violated"
    with pytest.raises(ValueError, match="complete search"):
        liveness_of(replace(CHECKS_BY_NAME["spec-vllm-form"].setup,
                            properties=frozenset({LIVENESS})),
                    CHECKS_BY_NAME["spec-vllm-form"].setup, broken)


def _figures(result: Result) -> tuple[object, ...]:
    assert result.tree is not None
    return (result.verdict, result.violation, result.states, result.transitions,
            result.depth, result.checked, result.tree.parent, result.tree.via)


_VLLM = Setup(SPEC, Form.VLLM, Policy.LRU, (NO_STALE_COMPLETIONS,), liveness=False)


@pytest.mark.parametrize(("family", "reused"), [
    ([LRU, replace(LRU, eviction=Eviction.BACKGROUND), replace(LRU, node_failure=True)],
     True),
    ([replace(LRU, node_failure=True), replace(LRU, liveness=False), replace(
        LRU, properties=frozenset(WITHOUT_LAWS - {"running_copies_own_their_slots"}))],
     True),
    ([_VLLM, replace(_VLLM, assumptions=(NO_STALE_COMPLETIONS, NO_RESET_IN_FLIGHT))], True),
    ([replace(_VLLM, assumptions=(NO_STALE_COMPLETIONS, NO_RESET_IN_FLIGHT)), _VLLM], False),
    ([replace(_VLLM, assumptions=()), _VLLM], True),
    ([_VLLM, CHECKS_BY_NAME["mutant:UnmatchedCompleteLoadAccepted+no-misuse"].setup,
      CHECKS_BY_NAME["mutant:CompleteLoadCountsDuplicates+unique-keys"].setup], True),
    ([CHECKS_BY_NAME["mutant:CompleteLoadCountsDuplicates"].setup, _VLLM,
      CHECKS_BY_NAME["mutant:CompleteLoadCountsDuplicates+unique-keys"].setup], True),
], ids=["faults", "properties", "more-assumed", "less-assumed", "violated-first", "mutants",
        "mutant-first"])
def test_a_shared_search_finds_what_a_search_alone_finds(
        family: list[Setup], reused: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """conftest.py hands the searches of one family a Shared (spec-arc's three TINY
    checks): each finds exactly what it finds alone, whichever search of the family came
    first, whether it broke a property or not, whatever each assumed, and whichever
    operations its model replaces. The later ones make fewer calls themselves, unless the
    earlier ones assumed more (they left out calls that a search assuming less must
    make)."""
    made: list[int] = []

    def counted(*args: object) -> Outcome:
        made[-1] += 1
        return step(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(explorer, "step", counted)
    shared = Shared(family_of(family[0], ONE_KEY))
    for setup in family:
        made.append(0)
        alone = explore(setup, ONE_KEY)
        made.append(0)
        found = explore(setup, ONE_KEY, shared=shared)
        assert _figures(found) == _figures(alone)
    assert made[1] == made[0]  # the first search of the family makes every call
    fewer = [with_ < without for without, with_ in zip(made[2::2], made[3::2], strict=True)]
    assert fewer == [reused] * (len(family) - 1)


def test_a_search_shares_only_with_its_own_family() -> None:
    shared = Shared(family_of(LRU, ONE_KEY))
    for other, bounds in [(replace(LRU, policy=Policy.ARC), ONE_KEY), (LRU, TWO_KEYS),
                          (replace(LRU, form=Form.VLLM), ONE_KEY),
                          (replace(LRU, properties=frozenset()), ONE_KEY),
                          (replace(LRU, model=MUTANTS_BY_NAME["DuplicateKeySlotLeak"].model),
                           ONE_KEY)]:
        with pytest.raises(ValueError, match="its own family"):
            explore(other, bounds, shared=shared)


@pytest.mark.parametrize("check", sorted(collector_checks.CHECKS))
def test_what_a_search_leaves_the_collector(check: str) -> None:
    """collector_checks.py's checks (a search leaves nothing in a reference cycle; what
    it kept joins the oldest generation, and a caller's frozen values stay frozen), each
    in a fresh python, whose heap is small: see that module's docstring."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("PYTHONOPTIMIZE", None)  # the checks are asserts: never skipped
    ran = subprocess.run([sys.executable, collector_checks.__file__, check], env=env,
                         capture_output=True, text=True, check=False)
    assert ran.returncode == 0, ran.stderr
