"""The trace corpus: written from the spec, valid against its schema, passed by the
reference manager, failed by the self-test's seeded variants."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from corpus_expect import spec_disagrees
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
from kvoffload.conformance.corpus.corpus import (
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
)
from kvoffload.conformance.corpus.corpus_replay import applies, replay_case, replay_corpus
from kvoffload.conformance.corpus.corpus_write import case_text, selftest_cases, write_corpus
from kvoffload.conformance.errors import PropertyViolation
from kvoffload.conformance.selftest.selftest import CATALOGUE
from kvoffload.conformance.target.targets import prepare
from kvoffload.impl import OffloadManager
from kvoffload.spec import Call, Op, Policy

FIXTURE_MAX_CALLS = 3
"""The corpus these tests write holds the model checker's traces of up to 3 calls (all
6: ``kvoffload corpus write`` by default, 13,441 cases; replaying it against every
seeded variant takes minutes)."""

ARC_VARIANTS = {"ArcNoAdaptation", "ArcGhostHitToT1", "ArcRejectsWithEvictable"}
"""Seeded variants random traces do not kill: the model checker's bounded refinement
gives their cases (``kills`` in corpus_modelcheck.json)."""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("corpus")
    write_corpus(directory, max_calls=FIXTURE_MAX_CALLS)
    return directory


@pytest.fixture(scope="module")
def untiny(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """:func:`corpus` less its tiny cases (223 of its 793 cases: the scenarios and the
    engines', self-test's and model checker's cases), an index over the same files. For
    the tests whose subject is how a replay reports a failure, skips a case or reads a
    profile, which every kind of case but the tiny ones shows too (the strict profile's
    lookup failures of LookupPendingAsMiss: 25 of them outside the 93 tiny ones; the
    cases no-reset-in-flight excludes: 33 outside the 85 tiny ones); the tiny cases
    cost three quarters of each replay. Every case, the tiny ones included, is replayed
    against the reference by :func:`test_the_reference_passes_every_case`."""
    directory = tmp_path_factory.mktemp("untiny")
    index = json.loads((corpus / "index.json").read_text(encoding="utf-8"))
    index["cases"] = [name for name in index["cases"] if not name.startswith("tiny-")]
    del index["counts"]["tiny"]
    (directory / "index.json").write_text(json.dumps(index), encoding="utf-8")
    (directory / "cases").symlink_to(corpus / "cases")
    return directory


@pytest.fixture(scope="module")
def cases(corpus: Path) -> tuple[dict[str, Any], ...]:
    """``load_cases(corpus)``, read once for the tests that only read the cases: each of
    the 40-odd tests that read them read every file again (41,080 files parsed in one
    run of this file). A test that changes a case changes its own copy;
    :func:`test_the_shared_cases_are_the_files_as_written` checks nothing changed them."""
    return tuple(load_cases(corpus))


def test_every_case_follows_the_schema(cases: tuple[dict[str, Any], ...]) -> None:
    """Each case against the schema, each distinct part of a step once: a step's schema
    (``$defs/step``) is an object of three properties whose schemas refer only to
    ``$defs``, so a step is valid when its keys are and each of its ``call``,
    ``expect`` and ``held`` is, wherever it stands; the cases repeat them (2,483 steps,
    421 distinct, of 119 distinct calls, 127 expects and 27 held lists at 3 calls).
    The rest of a case is validated with the step items left out."""
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert schema["properties"]["steps"]["items"] == {"$ref": "#/$defs/step"}
    outside = json.loads(json.dumps(schema))
    outside["properties"]["steps"]["items"] = True
    case_validator = jsonschema.Draft202012Validator(outside)
    step = schema["$defs"]["step"]
    assert set(step) == {"type", "required", "additionalProperties", "properties"}

    def validator(part: dict[str, Any]) -> jsonschema.Draft202012Validator:
        return jsonschema.Draft202012Validator(
            {"$schema": schema["$schema"], "$defs": schema["$defs"], **part})
    shape_validator = validator({**step, "properties": dict.fromkeys(step["properties"], True)})
    part_validators = {name: validator(part) for name, part in step["properties"].items()}
    valid: set[tuple[str, str]] = set()
    assert len(cases) > 300
    for case in cases:
        errors = sorted(case_validator.iter_errors(case), key=str)
        assert not errors, (case["name"], errors[0].message)
        for number, step_json in enumerate(case["steps"]):
            assert isinstance(step_json, dict), (case["name"], number)
            # a step's shape is its keys; a part, its JSON (true, 1 and 1.0 stay apart)
            parts = [("step", json.dumps(sorted(step_json)), shape_validator, step_json)]
            parts += [(name, json.dumps(value, sort_keys=True), part_validators[name], value)
                      for name, value in step_json.items() if name in part_validators]
            for name, text, part_validator, value in parts:
                if (name, text) not in valid:
                    errors = sorted(part_validator.iter_errors(value), key=str)
                    assert not errors, (case["name"], number, name, errors[0].message)
                    valid.add((name, text))


def test_the_schema_rejects_a_malformed_case(cases: tuple[dict[str, Any], ...]) -> None:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    case: dict[str, Any] = copy.deepcopy(cases[0])  # the shared cases stay as written
    case["steps"][0]["expect"] = {"kind": "lookup", "result": "MAYBE"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(case, schema)


def test_a_case_file_is_what_json_dumps_writes(corpus: Path,
                                               cases: tuple[dict[str, Any], ...]) -> None:
    """The writer's own encoder (corpus_write.case_text) gives ``json.dumps(case,
    indent=1)`` and a newline, character for character: every case but the TINY ones
    (the same kinds of values), and values a case never holds, which go to json."""
    for case in cases:
        if case["source"] != "tiny":
            text = (corpus / "cases" / f"{case['name']}.json").read_text(encoding="utf-8")
            assert text == json.dumps(case, indent=1) + "\n" == case_text(case)
    odd = {"float": 1.5, "nan": float("nan"), "non-ascii": "é\u2028\x00\"", "empty": [{}, []],
           "nested": [[[True, False, None, -3]]], "big": 2**70, "tuple": (1, "x")}
    for value in [odd, {1: "int key"}, {"": {"a": {1.0: 2}}}, [odd, odd], {}]:
        assert case_text(value) == json.dumps(value, indent=1) + "\n"  # type: ignore[arg-type]  # not a case


def test_index_counts_each_source(corpus: Path) -> None:
    index = json.loads((corpus / "index.json").read_text(encoding="utf-8"))
    assert index["corpus_version"] == CORPUS_VERSION
    assert "enumerated" not in index["counts"]
    assert index["enumerated_depth"] == 0
    assert index["counts"]["tiny"] == len(list(tiny_cases(FIXTURE_MAX_CALLS))) == 570
    assert index["counts"]["counterexample"] == 22
    assert index["counts"]["scenario"] >= 19
    assert index["counts"]["engines"] == len(ENGINE_TRACES) + 133 == 151
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


def test_tiny_cases_are_distinct_up_to_renaming(short_corpus: Path) -> None:
    """The TINY cases up to 4 calls (1,745), as the session's short corpus wrote them
    (tests/conftest.py: ``tiny_cases(4)`` written as JSON, which test_corpus_cpp.py and
    test_lmcache_backends.py replay): generating them again cost about 0.27 s of CPU."""
    cases = [c for c in load_cases(short_corpus) if c["source"] == "tiny"]
    index = json.loads((short_corpus / "index.json").read_text(encoding="utf-8"))
    assert index["tiny_max_calls"] == 4
    assert len(cases) == index["counts"]["tiny"] == 1745
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
    """The rows of docs/engines.md's generated failures tables (one per counterexample
    of engines_data.json). Mooncake's section is written by hand and is not in the
    corpus: its traces depend on the master's background eviction, whose timing no
    corpus case can fix (docs/engines.md says so)."""
    rows, inside = [], False
    for line in ENGINES_PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("## Mooncake"):
            break
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
    assert len(rows) == len(entries) == 133
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


@pytest.mark.wide  # the same cases: test_the_reference_passes_every_case, same configs
@pytest.mark.parametrize(("level", "policy"), [("any", "lru"), ("exact", "lru"),
                                               ("exact", "arc")])
def test_the_reference_passes_every_engines_case(level: str, policy: str) -> None:
    """The engines' cases as :func:`engine_cases` gives them, replayed in this process.
    The default tier replays them from the written corpus (every case passed, none
    skipped, at these three configurations): test_the_reference_passes_every_case."""
    config = CheckConfig.from_options(level=level, policy=policy)
    prepared = prepare("kvoffload.impl:OffloadManager", config, OffloadManager)
    replayed = [c for c in engine_cases() if applies(c, config, prepared.capabilities) is None]
    assert len(replayed) == 151  # every one: the lockstep takes any case at any level
    failed = [(c["name"], replay_case(c, prepared.make_adapter, config)) for c in replayed]
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


@pytest.mark.parametrize(("level", "policy", "host"), [
    pytest.param("any", "lru", False, id="any-lru"),
    pytest.param("exact", "lru", False, id="exact-lru"),
    pytest.param("exact", "arc", False, id="exact-arc"),
    pytest.param("any", "lru", True, marks=pytest.mark.wide, id="any-lru-host"),
])
def test_the_reference_passes_every_case(
    corpus: Path, cases: tuple[dict[str, Any], ...], level: str, policy: str, host: bool,
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """In this process; through a host (as check runs a target; twice the CPU) in the
    wide tier. The default tier's replay through a host, failures and passes:
    test_replay_exits_1_naming_the_property."""
    where = [] if host else ["--in-process"]
    assert main(["corpus", "replay", str(corpus), "--level", level, "--policy", policy,
                 "--report-dir", str(tmp_path), *where]) == 0
    out = capsys.readouterr().out
    assert "CONFORMS: " in out
    assert " 0 failed, 0 skipped" in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["verdict"] == "conforms"
    assert report["run"]["corpus"]["passed"] == len(cases)


VARIANTS = [e for e in CATALOGUE if e.kind == "variant"]


def test_every_expect_is_the_spec_answer(cases: tuple[dict[str, Any], ...]) -> None:
    """The answers written for other replayers (the Python replay reads none of them)
    are the spec's, read as docs/corpus.md describes them (corpus_expect.py)."""
    assert {c["source"] for c in cases} == {"scenario", "engines", "selftest",
                                             "counterexample", "tiny"}
    assert [d for c in cases if (d := spec_disagrees(c))] == []


@pytest.mark.slow
def test_the_selftest_cases_are_the_same_on_every_run(corpus: Path) -> None:
    """Drawn from the call generator with fixed seeds and shrunk with no time budget:
    writing them again gives the same cases, one per seeded variant."""
    written = [c for c in load_cases(corpus) if c["source"] == "selftest"]
    assert list(selftest_cases()) == written
    assert len(written) == len(VARIANTS)


def test_shrink_calls_keeps_what_fails_and_needs_no_clock() -> None:
    from kvoffload.conformance.judge.shrink import shrink_calls

    calls = [Call(Op.PREPARE_STORE, ("x", "y")), Call(Op.LOOKUP, ("y",)), Call(Op.RESET_CACHE),
             Call(Op.COMPLETE_STORE, ("x",), success=False), Call(Op.TAKE_EVENTS)]

    def fails(candidate: Any) -> bool:
        return any(c.op is Op.RESET_CACHE for c in candidate) and any(
            c.op is Op.PREPARE_STORE for c in candidate)
    assert shrink_calls(calls, fails) == [Call(Op.PREPARE_STORE, ("a",)), Call(Op.RESET_CACHE)]


def test_the_arc_variants_are_self_test_variants() -> None:
    assert {e.cls for e in VARIANTS} >= ARC_VARIANTS


@pytest.mark.parametrize("entry", VARIANTS, ids=lambda e: e.label)
def test_each_seeded_variant_fails_its_selftest_case(cases: tuple[dict[str, Any], ...],
                                                     entry: Any) -> None:
    """Replayed at the variant's own policy and level, in this process."""
    from kvoffload.conformance.selftest import mutants

    config = CheckConfig(policy=entry.policy, level=entry.level)
    prepared = prepare(entry.target, config, getattr(mutants, entry.cls))
    name = f"selftest-{entry.cls}-{entry.policy.value}-{entry.level.value}"
    case = next(c for c in cases if c["name"] == name)
    assert isinstance(replay_case(case, prepared.make_adapter, config), PropertyViolation)


@pytest.mark.usefixtures("python_hosts")
def test_replay_exits_1_naming_the_property(untiny: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A failure names the property, shows check's divergence table and writes check's
    report.json and reproducer (which fails on its own, as check's do). Through a host,
    as check runs a target: a fork of the session's host zygote (tests/conftest.py), as
    the replay, not a host's start, is the subject."""
    target = "kvoffload.conformance.selftest.mutants:LookupPendingAsMiss"
    assert main(["corpus", "replay", str(untiny), target, "--report-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "FAILED scenario-pr41795 at step 2: property 'lookup'" in out
    assert "lookup           FAILED" in out
    assert "property 'lookup' violated:" in out
    assert "answer             PENDING          MISS" in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["verdict"] == "fails"
    assert [v["property"] for v in report["violations"]] == ["lookup"]
    assert report["run"]["corpus"]["failed_cases"][0]["case"] == "scenario-pr41795"
    reproducer = tmp_path / "reproduce_lookup.py"
    assert report["violations"][0]["reproducer"] == str(reproducer)
    namespace: dict[str, Any] = {}
    exec(compile(reproducer.read_text(), str(reproducer), "exec"), namespace)
    with pytest.raises(PropertyViolation, match="lookup"):
        namespace["test_lookup"]()


SLOW = """
import time
from kvoffload.impl import OffloadManager

class Slow(OffloadManager):
    def lookup(self, key):
        time.sleep(0.05)
        return super().lookup(key)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_exits_130_with_check_s_report(
        corpus: Path, cases: tuple[dict[str, Any], ...], tmp_path: Path) -> None:
    """Ctrl-C: the replay stops after the current call, writes report.json (verdict
    "interrupted", what held so far) and exits 130, as check does."""
    (tmp_path / "slow.py").write_text(SLOW)
    process = subprocess.Popen(
        [sys.executable, "-m", "kvoffload.conformance.cli", "corpus", "replay", str(corpus),
         f"{tmp_path / 'slow.py'}:Slow", "--report-dir", str(tmp_path / "r")],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert process.stderr is not None
    assert "replaying" in process.stderr.readline()
    time.sleep(1.0)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "interrupted by Ctrl-C" in err
    assert "INTERRUPTED" in out
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["verdict"] == "interrupted"
    assert report["run"]["corpus"]["passed"] < len(cases)


def test_safe_profile_accepts_miss_for_pending(untiny: Path) -> None:
    """The cases the strict profile fails it on (test_replay_exits_1_naming_the_property)
    pass under the safe one."""
    target = "kvoffload.conformance.selftest.mutants:LookupPendingAsMiss"
    outcome = replay_corpus(target, CheckConfig.from_options(profile="safe"), untiny,
                            in_process=True).outcome
    assert not [f for f in outcome.failed if f.violation.prop == "lookup"]


def test_assumptions_skip_the_cases_they_exclude(untiny: Path) -> None:
    config = CheckConfig(assume=("no-reset-in-flight",), level=Level.ANY)
    outcome = replay_corpus("kvoffload.impl:OffloadManager", config, untiny,
                            in_process=True).outcome
    assert outcome.skipped.get("assumed away: no-reset-in-flight", 0) > 0
    assert not outcome.failed


def test_unreadable_corpus_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = ["--report-dir", str(tmp_path / "report")]
    assert main(["corpus", "replay", str(tmp_path), *report]) == 2
    (tmp_path / "index.json").write_text('{"corpus_version": 99, "cases": []}')
    assert main(["corpus", "replay", str(tmp_path), *report]) == 2
    assert "version 99" in capsys.readouterr().err


def test_write_refuses_traces_longer_than_the_committed_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["corpus", "write", str(tmp_path), "--max-calls", "7"]) == 2
    assert "--max-calls must be 0 to 6" in capsys.readouterr().err
    assert len(list(tiny_cases(1))) == 18  # 15 per search, merged up to renaming


def _replayer(target: type) -> Callable[[dict[str, Any]], PropertyViolation | str | None]:
    """Replays a case on ``target`` (a native class) in this process, as corpus replay
    and check drive it: the target prepared once, as corpus replay prepares it once for
    every case (each case still gets a fresh instance)."""
    config = CheckConfig()
    make_adapter = prepare("hostile", config, target).make_adapter
    return lambda case: replay_case(case, make_adapter, config)


def _replay(case: dict[str, Any], target: type) -> PropertyViolation | str | None:
    """``case`` replayed on ``target``, as :func:`_replayer` does."""
    return _replayer(target)(case)


def test_a_plan_with_extra_slots_fails_the_case_instead_of_crashing() -> None:
    """Regression: vLLM 0.18 to 0.21 answer prepare_load(['a', 'a']) with a slot per
    name (docs/engines.md, ``unique-keys`` dropped); the replayer raised ValueError
    from zip() instead of failing the case."""
    from dataclasses import replace

    class ExtraLoadSlot(OffloadManager):
        def prepare_load(self, keys: Any) -> Any:
            plan = super().prepare_load(keys)
            return replace(plan, slots=(*plan.slots, *plan.slots))

    calls = [Call(Op.PREPARE_STORE, ("a",)), Call(Op.COMPLETE_STORE, ("a",)),
             Call(Op.PREPARE_LOAD, ("a",))]
    case = case_json("extra", "engines", "", 1, Policy.LRU, calls)
    assert _replay(case, OffloadManager) is None
    failed = _replay(case, ExtraLoadSlot)
    assert isinstance(failed, PropertyViolation)
    assert (failed.prop, failed.step) == ("slots", 3)
    assert "2 slots for 1 key" in failed.message


WIDE = pytest.mark.wide
"""One hostile target per property in the default tier; the others of a property
(the same replayer, the same lockstep check of that property) in the wide tier."""


@pytest.mark.parametrize(("target", "prop"), [
    (LiarKeys, "store-plan"),
    (ZeroTickets, "tickets"),
    (FloatSlots, "slots"),
    (NoEpoch, "epochs"),
    pytest.param(LyingResetEpoch, "epochs", marks=WIDE),
    pytest.param(WrongLoadEpoch, "epochs", marks=WIDE),
    (ClearsItsArgument, "arguments"),
    pytest.param(ReusesOneBuffer, "arguments", marks=WIDE),
    (AnnouncesAgain, "events"),
    pytest.param(RemovesUnannounced, "events", marks=WIDE),
])
def test_replay_fails_hostile_targets_on_the_property_check_names(
        cases: tuple[dict[str, Any], ...], target: type, prop: str) -> None:
    """Regression: the replayer read native answers leniently (7 of these 8 hostile
    targets passed every case), then through its own rules with free-text failures.
    It now judges with check's lockstep: each fails the property check names for it
    (tests/conformance/test_native.py), and only that one."""
    replay = _replayer(target)
    failures = [failed for c in cases if c["source"] != "tiny"
                and isinstance(failed := replay(c), PropertyViolation)]
    assert failures, f"{target.__name__} passed every case"
    assert {f.prop for f in failures} == {prop}, [str(f)[:200] for f in failures[:3]]


def test_replay_passes_a_correct_target_with_lists_for_tuples(
        cases: tuple[dict[str, Any], ...]) -> None:
    """The control: fresh lists where the records hold tuples are not a failure (the
    reference itself: test_the_reference_passes_every_case), on the cases the hostile
    targets fail (not the tiny ones, three quarters of the replay's cost)."""
    replay = _replayer(ListsAndSets)
    failed = [c["name"] for c in cases if c["source"] != "tiny" and replay(c) is not None]
    assert failed == [], failed[:3]


def test_the_shared_cases_are_the_files_as_written(corpus: Path,
                                                   cases: tuple[dict[str, Any], ...]) -> None:
    """The ``cases`` fixture is one read shared by many tests: none of them changed a
    case (run last in this file, after every test that reads them)."""
    assert list(cases) == load_cases(corpus)
    assert len({c["name"] for c in cases}) == len(cases)
