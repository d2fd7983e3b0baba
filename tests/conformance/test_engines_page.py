"""docs/engines.md is generated from a list of runs: each run's command, and the page
built from the reports those runs write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvoffload.conformance.engines_page import RUNS, Run, load, render


def failing(*props: str) -> dict[str, Any]:
    trace = [{"text": "prepare_store(['a'])", "drain": False},
             {"text": "lookup('a')", "drain": False}]
    return {"verdict": "fails", "adapter": {"name": "vllm-bool"},
            "violations": [{"property": p, "trace": trace, "capacity": 1,
                            "message": f"{p} broke", "flaky": p == "events",
                            "reproduced": 3, "replays": 5} for p in props]}


def test_every_run_is_a_plain_check_of_a_vllm_release() -> None:
    for run in RUNS:
        assert run.arguments()[0] == f"vllm=={run.release}"
        assert "--seed" in run.arguments()
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


def test_a_missing_report_says_so(tmp_path: Path) -> None:
    assert load(RUNS[0], tmp_path)["verdict"] == "missing"
