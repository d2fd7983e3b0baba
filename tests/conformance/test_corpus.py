"""The trace corpus: written from the spec, valid against its schema, passed by the
reference manager, failed by the self-test's seeded variants."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hostile_targets import (
    AnnouncesAgain,
    ClearsItsArgument,
    FloatSlots,
    LiarKeys,
    ListsAndSets,
    LyingResetEpoch,
    NoEpoch,
    RemovesUnannounced,
    ReusesOneBuffer,
    WrongLoadEpoch,
    ZeroTickets,
)

from kvoffload.conformance.cli import main
from kvoffload.conformance.config import CheckConfig, Level
from kvoffload.conformance.corpus import (
    CORPUS_VERSION,
    ENGINE_TRACES,
    MAX_CALLS,
    SCHEMA_FILE,
    case_json,
    counterexample_cases,
    engine_cases,
    engines_data,
    load_cases,
    modelcheck_data,
    modelcheck_traces,
    tiny_cases,
    tiny_traces,
    write_corpus,
)
from kvoffload.conformance.corpus_replay import applies, make_driver, replay_case, replay_corpus
from kvoffload.conformance.selftest import CATALOGUE
from kvoffload.impl import OffloadManager
from kvoffload.spec import Call, Op, Policy

FIXTURE_MAX_CALLS = 3
"""The corpus these tests write holds the model checker's traces of up to 3 calls (all
6: ``kvoffload corpus write`` by default, 13,435 cases; replaying it against every
seeded variant takes minutes)."""

ARC_VARIANTS = {"ArcNoAdaptation", "ArcGhostHitToT1", "ArcRejectsWithEvictable"}
"""Seeded variants random traces do not kill: the model checker's bounded refinement
gives their cases (``kills`` in corpus_modelcheck.json)."""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("corpus")
    write_corpus(directory, depth=2, max_calls=FIXTURE_MAX_CALLS)
    return directory


def test_every_case_follows_the_schema(corpus: Path) -> None:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    cases = load_cases(corpus)
    assert len(cases) > 300
    for case in cases:
        errors = sorted(validator.iter_errors(case), key=str)
        assert not errors, (case["name"], errors[0].message)


def test_the_schema_rejects_a_malformed_case(corpus: Path) -> None:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    case: dict[str, Any] = load_cases(corpus)[0]
    case["steps"][0]["expect"] = {"kind": "lookup", "result": "MAYBE"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(case, schema)


def test_index_counts_each_source(corpus: Path) -> None:
    index = json.loads((corpus / "index.json").read_text(encoding="utf-8"))
    assert index["corpus_version"] == CORPUS_VERSION
    assert index["counts"]["enumerated"] == len(tiny_traces(2)) == 313
    assert index["counts"]["tiny"] == len(list(tiny_cases(FIXTURE_MAX_CALLS))) == 570
    assert index["counts"]["counterexample"] == 22
    assert index["counts"]["scenario"] >= 19
    assert index["counts"]["engines"] == len(ENGINE_TRACES) + 130 == 148
    assert index["counts"]["selftest"] >= 28


def test_the_model_checker_traces_go_to_6_calls() -> None:
    """corpus_modelcheck.json holds, per search, one trace per node class x call class
    within 6 calls (python proofs/corpus_traces.py): 2,976 (LRU, tickets), 8,350 (LRU,
    vLLM's completions), 5,777 (ARC, tickets)."""
    data = modelcheck_data()
    assert data["max_calls"] == MAX_CALLS == 6
    per_search: dict[str, int] = {}
    longest = 0
    for search, _, calls in modelcheck_traces(6, data):
        per_search[search] = per_search.get(search, 0) + 1
        longest = max(longest, len(calls))
    assert per_search == {"lru-ticket": 2976, "lru-vllm": 8350, "arc-ticket": 5777}
    assert longest == 6
    assert sum(1 for _ in modelcheck_traces(1, data)) == 3 * 15
    with pytest.raises(ValueError, match="up to 6 calls"):
        next(modelcheck_traces(7, data))


def test_tiny_cases_are_distinct_up_to_renaming() -> None:
    cases = list(tiny_cases(4))
    shapes = [(c["policy"] if c["level"] == "exact" else "",
               json.dumps([s["call"] for s in c["steps"]])) for c in cases]
    assert len(shapes) == len(set(shapes))
    renamed = [Call(Op.PREPARE_STORE, ("b",)), Call(Op.LOOKUP, ("b",))]
    first = [Call(Op.PREPARE_STORE, ("a",)), Call(Op.LOOKUP, ("a",))]
    steps = [[s["call"] for s in c["steps"]] for c in cases]
    assert [s["call"] for s in case_json("x", "tiny", "", 2, Policy.LRU, first)["steps"]] \
        in steps
    assert [s["call"] for s in case_json("x", "tiny", "", 2, Policy.LRU, renamed)["steps"]] \
        not in steps


def test_every_mutant_and_hazard_counterexample_is_a_case() -> None:
    names = {c["name"] for c in counterexample_cases()}
    checks = {f["check"] for f in modelcheck_data()["counterexamples"]}
    assert "counterexample-mutant-LookupPendingAsMiss" in names
    assert "counterexample-hazard-reset-without-hold-back" in names
    assert {c for c in checks if c.startswith(("mutant:", "hazard:"))} == {
        c for c in checks if ":" in c and not c.startswith("spec-")}
    assert len(names) == len(checks) == 22


ENGINES_PAGE = Path(__file__).parents[2] / "docs" / "engines.md"


def _failure_rows() -> list[str]:
    """The rows of docs/engines.md's failures tables (one per listed counterexample)."""
    rows, inside = [], False
    for line in ENGINES_PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("| run | property | shrunk trace |"):
            inside = True
        elif inside and line.startswith("| ") and not line.startswith("| ---"):
            rows.append(line)
        elif not line.startswith("| ---"):
            inside = False
    return rows


def test_every_counterexample_of_the_engines_page_is_a_case() -> None:
    entries = engines_data()["counterexamples"]
    rows = _failure_rows()
    assert len(rows) == len(entries) == 130
    for row, entry in zip(rows, entries, strict=True):
        cells = row.split(" | ")
        assert cells[1] == f"`{entry['property']}`", (row, entry["name"])
        slots = entry["capacity"]
        assert cells[2].endswith(f"(tier of {slots} slot{'' if slots == 1 else 's'})")
        assert cells[2].count("`") == 2 * len(entry["calls"]), entry["name"]
    cases = {c["name"]: c for c in engine_cases() if c["source"] == "engines"}
    for entry in entries:
        case = cases[f"engines-{entry['name']}"]
        assert len(case["steps"]) == len(entry["calls"])
        assert case["run"] == {f: entry[f] for f in ("profile", "policy", "level", "assume")}
    misuse = [c for c in cases.values() if any(s["expect"]["kind"] == "error"
                                               for s in c["steps"])]
    assert misuse, "traces the spec rejects as misuse stay cases (their answer: the family)"


@pytest.mark.parametrize(("level", "policy"), [("any", "lru"), ("exact", "lru"),
                                               ("exact", "arc")])
def test_the_reference_passes_every_engines_case(level: str, policy: str) -> None:
    config = CheckConfig.from_options(level=level, policy=policy)
    build = make_driver("kvoffload.impl:OffloadManager", config)
    replayed = [c for c in engine_cases() if applies(c, config) is None]
    assert len(replayed) >= 143
    failed = [(c["name"], replay_case(c, build)) for c in replayed]
    assert [(name, why) for name, why in failed if why is not None] == []


def test_slots_and_tickets_are_symbolic() -> None:
    calls = [Call(Op.PREPARE_STORE, ("a", "b")), Call(Op.COMPLETE_STORE, ("a",), ticket=0),
             Call(Op.PREPARE_LOAD, ("a",)), Call(Op.COMPLETE_STORE, ("b",), ticket=7)]
    case = case_json("x", "engines", "", 2, Policy.LRU, calls)
    plan = case["steps"][0]["expect"]
    assert plan["slots"] == ["s0", "s1"]
    assert plan["ticket"] == "t0"
    assert case["steps"][1]["call"]["ticket"] == "t0"
    assert case["steps"][2]["expect"]["slots"] == ["s0"]
    assert case["steps"][3]["call"]["ticket"] == "u0"  # never issued
    assert case["steps"][3]["expect"]["ignored"] == ["b"]


def test_a_chosen_victim_tags_the_case_exact() -> None:
    forced = [Call(Op.PREPARE_STORE, ("a",)), Call(Op.COMPLETE_STORE, ("a",)),
              Call(Op.PREPARE_STORE, ("b",))]
    assert case_json("f", "engines", "", 1, Policy.LRU, forced)["level"] == "any"
    chosen = [Call(Op.PREPARE_STORE, ("a", "b")), Call(Op.COMPLETE_STORE, ("a", "b")),
              Call(Op.PREPARE_STORE, ("c",))]
    last = case_json("c", "engines", "", 2, Policy.LRU, chosen)
    assert last["level"] == "any"  # nothing after the choice depends on it
    assert last["steps"][2]["expect"]["evicted_from"] == ["a", "b"]
    later = case_json("c", "engines", "", 2, Policy.LRU, [*chosen, Call(Op.LOOKUP, ("a",))])
    assert later["level"] == "exact"


def test_tags_say_profile_and_assumptions() -> None:
    case = case_json("p", "engines", "", 1, Policy.LRU,
                     [Call(Op.PREPARE_STORE, ("a", "a")), Call(Op.LOOKUP, ("a",)),
                      Call(Op.RESET_CACHE)])
    assert case["profile"] == "strict"
    assert case["excluded_by"] == ["no-reset-in-flight", "unique-keys"]


@pytest.mark.parametrize(("level", "policy"), [("any", "lru"), ("exact", "lru"),
                                               ("exact", "arc")])
def test_the_reference_passes_every_case(
    corpus: Path, level: str, policy: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["corpus", "replay", str(corpus), "--level", level, "--policy", policy]) == 0
    assert " 0 failed" in capsys.readouterr().out


VARIANTS = [e for e in CATALOGUE if e.kind == "variant"]


def test_the_arc_variants_are_self_test_variants() -> None:
    assert {e.cls for e in VARIANTS} >= ARC_VARIANTS


@pytest.mark.parametrize("entry", VARIANTS, ids=lambda e: e.label)
def test_each_seeded_variant_fails_a_case(corpus: Path, entry: Any) -> None:
    config = CheckConfig(policy=entry.policy, level=entry.level)
    outcome = replay_corpus(corpus, entry.target, config)
    assert outcome.failed, f"{entry.label} passed every case"
    if entry.cls in ARC_VARIANTS:
        killing = f"selftest-{entry.cls}-{entry.policy.value}-{entry.level.value}"
        assert killing in {name for name, _, _ in outcome.failed}


def test_replay_exits_1_on_a_failure(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = "kvoffload.conformance.mutants:LookupPendingAsMiss"
    assert main(["corpus", "replay", str(corpus), target]) == 1
    assert "FAILED scenario-pr41795 at step 2" in capsys.readouterr().out


def test_safe_profile_accepts_miss_for_pending(corpus: Path) -> None:
    target = "kvoffload.conformance.mutants:LookupPendingAsMiss"
    outcome = replay_corpus(corpus, target, CheckConfig.from_options(profile="safe"))
    assert not [f for f in outcome.failed if "lookup" in f[2]]


def test_assumptions_skip_the_cases_they_exclude(corpus: Path) -> None:
    config = CheckConfig(assume=("no-reset-in-flight",), level=Level.ANY)
    outcome = replay_corpus(corpus, "kvoffload.impl:OffloadManager", config)
    assert outcome.skipped.get("assumed away: no-reset-in-flight", 0) > 0
    assert not outcome.failed


def test_unreadable_corpus_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["corpus", "replay", str(tmp_path)]) == 2
    (tmp_path / "index.json").write_text('{"corpus_version": 99, "cases": []}')
    assert main(["corpus", "replay", str(tmp_path)]) == 2
    assert "version 99" in capsys.readouterr().err


def test_write_refuses_traces_longer_than_the_committed_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["corpus", "write", str(tmp_path), "--max-calls", "7"]) == 2
    assert "--max-calls must be 0 to 6" in capsys.readouterr().err
    assert len(list(tiny_cases(1))) == 18  # 15 per search, merged up to renaming


def test_a_plan_with_extra_slots_fails_the_case_instead_of_crashing() -> None:
    """Regression: vLLM 0.18 to 0.21 answer prepare_load(['a', 'a']) with a slot per
    name (docs/engines.md, ``unique-keys`` dropped); the replayer raised ValueError
    from zip() instead of failing the case."""
    from dataclasses import replace

    from kvoffload.conformance.config import Profile
    from kvoffload.conformance.corpus_replay import NativeDriver
    from kvoffload.impl import OffloadManager

    class ExtraLoadSlot(OffloadManager):
        def prepare_load(self, keys: Any) -> Any:
            plan = super().prepare_load(keys)
            return replace(plan, slots=(*plan.slots, *plan.slots))

    calls = [Call(Op.PREPARE_STORE, ("a",)), Call(Op.COMPLETE_STORE, ("a",)),
             Call(Op.PREPARE_LOAD, ("a",))]
    case = case_json("extra", "engines", "", 1, Policy.LRU, calls)
    assert replay_case(case, lambda n: NativeDriver(OffloadManager(n), Profile.STRICT)) is None
    failed = replay_case(case, lambda n: NativeDriver(ExtraLoadSlot(n), Profile.STRICT))
    assert failed == (3, "prepare_load: prepare_load returned 2 slots for 1 key (a plan "
                         "holds one slot per key): (0, 0) [slots]")


@pytest.mark.parametrize(("target", "why"), [
    (LiarKeys, "[store-plan]"),
    (ZeroTickets, "was issued before"),
    (FloatSlots, "[slots]"),
    (NoEpoch, "[epochs]"),
    (LyingResetEpoch, "reset_cache must return epoch"),
    (WrongLoadEpoch, "plan must start in epoch"),
    (ClearsItsArgument, "[arguments]"),
    (ReusesOneBuffer, "[arguments]"),
    (AnnouncesAgain, ", announced already"),
    (RemovesUnannounced, ", not announced"),
])
def test_replay_reads_native_answers_as_strictly_as_check(corpus: Path, target: type,
                                                          why: str) -> None:
    """Regression: the replayer read native answers leniently (slots through ``int()``,
    tickets and epochs through ``==``, no look at the caller's list, plan epochs not at
    all): 7 of these 8 hostile targets passed every case (LiarKeys failed, on its keys'
    repr). It now reads them through the native adapter ``kvoffload check`` uses."""
    from kvoffload.conformance.config import Profile
    from kvoffload.conformance.corpus_replay import NativeDriver

    failures = [(c["name"], failed) for c in load_cases(corpus)
                if applies(c, CheckConfig()) is None
                and (failed := replay_case(c, lambda n: NativeDriver(target(n), Profile.STRICT)))]
    assert failures, f"{target.__name__} passed every case"
    assert all(why in message for _, (_, message) in failures), failures[:3]


def test_replay_passes_a_correct_target_with_lists_for_tuples(corpus: Path) -> None:
    """The control: fresh lists where the records hold tuples are not a failure."""
    from kvoffload.conformance.config import Profile
    from kvoffload.conformance.corpus_replay import NativeDriver

    for target in (OffloadManager, ListsAndSets):
        failed = [c["name"] for c in load_cases(corpus) if applies(c, CheckConfig()) is None
                  and replay_case(c, lambda n, t=target: NativeDriver(t(n), Profile.STRICT))]
        assert failed == [], (target.__name__, failed[:3])
