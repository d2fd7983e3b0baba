"""docs/engines.md is generated from a list of runs: each run's command, and the page
built from the reports those runs write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from docs.tools.engines_page import (
    RUNS,
    Run,
    corpus_entries,
    load,
    render,
    splice,
    write_corpus_data,
)
from docs.tools.engines_text import LMCACHE_HEADING, LMCACHE_MEANING


def failing(*props: str) -> dict[str, Any]:
    trace = [{"op": "prepare_store", "keys": ["a"], "success": True, "ticket": None,
              "job": None, "text": "prepare_store(['a'])", "drain": False},
             {"op": "lookup", "keys": ["a"], "success": True, "ticket": None, "job": None,
              "text": "lookup('a')", "drain": False}]
    return {"verdict": "fails", "adapter": {"name": "vllm-bool"},
            "configuration": {"profile": "strict", "policy": "lru", "level": "any",
                              "assume": ["unique-keys"]},
            "violations": [{"property": p, "trace": trace, "capacity": 1,
                            "message": f"{p} broke", "flaky": p == "events",
                            "reproduced": 3, "replays": 5} for p in props]}


def test_every_run_is_a_plain_check_of_an_engine_release() -> None:
    for run in RUNS:
        assert run.arguments()[0] == f"{run.engine}=={run.release}"
        assert "--seed" in run.arguments()
    lmcache = [r for r in RUNS if r.engine == "lmcache"]
    assert len(lmcache) == 5
    assert all(r.arguments()[1:3] == ["--max-keys-per-call", "1"] for r in lmcache)
    assert {r.label for r in lmcache} == set(LMCACHE_MEANING)
    assert {r.policy for r in RUNS if r.table == "main"} == {"lru", "arc"}
    assert len({r.name for r in RUNS}) == len(RUNS)


def test_the_page_lists_every_failure_of_every_run() -> None:
    results = {run: {"verdict": "missing", "error": "not run"} for run in RUNS}
    results[Run("main", "0.24.0", "arc")] = failing("events", "rejection")
    results[Run("dropped", "0.21.0", "lru", "no-misuse")] = failing("liveness")
    page = render(results)
    assert "| 0.24.0 | `?` | not run: not run | **fails** `events`, flaky 3/5, `rejection` |" \
        in page
    assert "| 0.24.0 ARC | `rejection` | `prepare_store(['a'])`, `lookup('a')` (tier of 1 slot)" \
        in page
    assert "0.21.0 LRU, `no-misuse` dropped | `liveness`" in page


def test_a_failure_lmcache_alone_did_not_show_is_never_listed_as_its_own() -> None:
    results = {run: {"verdict": "missing", "error": "not run"} for run in RUNS}
    lmcache = next(r for r in RUNS if r.engine == "lmcache")
    report = failing("lookup", "rejection")
    report["violations"][0]["engine_reproducer"] = {"reproduced": True}
    report["violations"][1]["engine_reproducer"] = {"reproduced": False}
    results[lmcache] = report
    page = render(results)
    assert "**fails** `lookup`, `rejection` (not reproduced outside kvoffload)" in page
    assert "rejection broke (not reproduced outside kvoffload) |" in page
    assert "lookup broke |" in page


def test_a_missing_report_says_so(tmp_path: Path) -> None:
    assert load(RUNS[0], tmp_path)["verdict"] == "missing"


def test_lmcache_runs_get_a_table_of_their_own() -> None:
    results = {run: {"verdict": "missing", "error": "not run"} for run in RUNS}
    strict = next(r for r in RUNS if r.label == "cpu-strict")
    results[strict] = failing("lookup")
    page = render(results)
    options = "`--profile strict --assume no-reset-in-flight --assume no-store-while-storing`"
    assert f"| {options} | **fails** `lookup` | {LMCACHE_MEANING['cpu-strict']} |" in page
    assert f"| {options} | `lookup` | `prepare_store(['a'])`, `lookup('a')` (tier of 1 slot)" \
        in page
    assert "`--profile safe` (no assumptions) | not run: not run |" in page
    assert page.index(LMCACHE_HEADING) > page.index("## Under `python -O`")
    assert page.count(options) == 2


def test_only_one_engines_section_is_replaced() -> None:
    results = {run: {"verdict": "missing", "error": "not run"} for run in RUNS}
    old = render(results, ["vllm"]) + "\n" + LMCACHE_HEADING + "\nhand-written\n"
    new = splice(old, "lmcache", render(results, ["lmcache"]))
    assert new == render(results)
    assert new.startswith(render(results, ["vllm"]))
    assert splice(new, "vllm", "V\n") == "V\n" + render(results, ["lmcache"])


def test_every_listed_counterexample_becomes_corpus_data(tmp_path: Path) -> None:
    results = {run: {"verdict": "missing", "error": "not run"} for run in RUNS}
    results[Run("main", "0.24.0", "arc")] = failing("events", "rejection")
    results[Run("dropped", "0.21.0", "lru", "no-misuse")] = failing("liveness")
    cpu = next(r for r in RUNS if r.label == "cpu-strict")
    results[cpu] = failing("lookup")
    entries = corpus_entries(results)
    assert [e["name"] for e in entries] == [
        "vllm-0.24.0-arc-all-events", "vllm-0.24.0-arc-all-rejection",
        "vllm-0.21.0-lru-no-misuse-liveness", "lmcache-0.5.6-cpu-strict-lookup"]
    assert entries[0]["calls"] == [["prepare_store", ["a"], True, None, None],
                                   ["lookup", ["a"], True, None, None]]
    assert entries[2]["command"] == Run("dropped", "0.21.0", "lru", "no-misuse").command()
    assert (entries[0]["profile"], entries[0]["assume"], entries[0]["capacity"]) == (
        "strict", ["unique-keys"], 1)
    path = tmp_path / "corpus_engines.json"
    write_corpus_data(path, entries)
    assert json.loads(path.read_text(encoding="utf-8"))["counterexamples"] == entries
    write_corpus_data(path, entries[:1], "vllm")  # --only vllm keeps LMCache's entries
    names = [e["name"] for e in json.loads(path.read_text(encoding="utf-8"))["counterexamples"]]
    assert names == ["vllm-0.24.0-arc-all-events", "lmcache-0.5.6-cpu-strict-lookup"]


def test_the_hand_written_mooncake_section_survives_a_rewrite() -> None:
    from docs.tools.engines_page import MOONCAKE_HEADING

    results = {run: {"verdict": "missing", "error": "not run"} for run in RUNS}
    mooncake = f"\n{MOONCAKE_HEADING}\n\nverdicts by hand\n"
    old = render(results) + mooncake
    assert splice(old, "lmcache", render(results, ["lmcache"])) == old
    assert splice(old, "vllm", "V\n") == "V\n" + render(results, ["lmcache"]) + mooncake
    assert splice(render(results), "lmcache", "L\n").endswith("L\n")
