"""LMCache 0.5.6's real backends under the suite (``pip install -e '.[lmcache]'``).

Each failure documented in docs/engines.md is replayed here as its shrunk trace, and
the CPU backend's conforming configuration is checked with a small budget. Without
LMCache these tests skip; under CI (CI=true) they fail instead.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kvoffload.conformance.command.runner import run_check
from kvoffload.conformance.config import CheckConfig, Level, Profile
from kvoffload.conformance.errors import PropertyViolation
from kvoffload.conformance.reproduce import reproduce
from kvoffload.spec import Call, Op
from zygote import import_lmcache_here

pytestmark = pytest.mark.lmcache


@pytest.fixture(autouse=True)
def lmcache_imported(_lmcache_installed: None) -> None:
    """LMCache in this process, the modules it never uses here deferred
    (tests/zygote.py), once LMCache is known to be installed."""
    import_lmcache_here()


TARGET = "lmcache==0.5.6"
CPU_FIT = ("no-reset-in-flight", "no-store-while-storing")
"""The assumptions under which the CPU backend conforms (safe profile, level any)."""


def store(key: str, success: bool = True) -> list[Call]:
    return [Call(Op.PREPARE_STORE, (key,)), Call(Op.COMPLETE_STORE, (key,), success=success)]


def violation(adapter: str, calls: list[Call], **config: Any) -> PropertyViolation | None:
    values = {"adapter": adapter, "capacity": 1, **config}
    try:
        reproduce(TARGET, values, calls)
    except PropertyViolation as found:
        return found
    return None


def test_cpu_backend_conforms_where_it_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    # The backend's verdict is the subject, not the host: in process, LMCache is imported
    # once for the session instead of once more in a host (about 5 s of CPU). An LMCache
    # target through hosts: test_engine_script_lmcache.py (each finding's recording
    # replay runs in one).
    monkeypatch.setenv("KVOFFLOAD_IN_PROCESS", "1")
    config = CheckConfig(profile=Profile.SAFE, assume=CPU_FIT, adapter="lmcache-cpu",
                         max_keys_per_call=1, max_examples=40, steps=80, seed=1)
    result = run_check(TARGET, config)
    assert result.verdict == "conforms", result.violation
    assert result.adapter == "lmcache-cpu"


def test_cpu_store_in_flight_reads_as_miss() -> None:
    """strict: between allocate() and submit_put_task() contains() is False."""
    found = violation("lmcache-cpu", [Call(Op.PREPARE_STORE, ("a",)), Call(Op.LOOKUP, ("a",))])
    assert found is not None
    assert found.prop == "lookup"
    assert "must answer PENDING" in found.message
    assert "answered MISS" in found.message
    assert violation("lmcache-cpu", [Call(Op.PREPARE_STORE, ("a",)), Call(Op.LOOKUP, ("a",))],
                     profile="safe") is None


def test_cpu_put_after_clear_resurrects_the_chunk() -> None:
    calls = [Call(Op.PREPARE_STORE, ("a",)), Call(Op.RESET_CACHE),
             Call(Op.COMPLETE_STORE, ("a",)), Call(Op.LOOKUP, ("a",))]
    found = violation("lmcache-cpu", calls, profile="safe")
    assert found is not None
    assert found.prop == "lookup"
    assert "must answer MISS" in found.message
    assert "answered HIT" in found.message


def test_cpu_clear_keeps_a_chunk_being_read() -> None:
    calls = [*store("a"), Call(Op.PREPARE_LOAD, ("a",)), Call(Op.RESET_CACHE),
             Call(Op.LOOKUP, ("a",))]
    found = violation("lmcache-cpu", calls, profile="safe")
    assert found is not None
    assert found.prop == "lookup"
    assert "answered HIT" in found.message


def test_cpu_second_store_of_a_chunk_being_written() -> None:
    calls = [Call(Op.PREPARE_STORE, ("a",)), Call(Op.PREPARE_STORE, ("a",))]
    found = violation("lmcache-cpu", calls, profile="safe")
    assert found is not None
    assert found.prop == "rejection"
    found = violation("lmcache-cpu", calls, profile="safe", capacity=2)
    assert found is not None
    assert found.prop == "store-plan"


def test_cpu_reads_do_not_refresh_lru() -> None:
    calls = [*store("a"), *store("b"), Call(Op.PREPARE_LOAD, ("a",)),
             Call(Op.COMPLETE_LOAD, ("a",)), Call(Op.PREPARE_STORE, ("c",))]
    exact = violation("lmcache-cpu", calls, profile="safe", capacity=2, level=Level.EXACT.value)
    assert exact is not None
    assert exact.prop == "eviction-choice"
    assert "must evict ('b',)" in exact.message
    assert violation("lmcache-cpu", calls, profile="safe", capacity=2) is None


def test_disk_reports_pending_while_its_write_runs() -> None:
    calls = [Call(Op.PREPARE_STORE, ("a",)), Call(Op.LOOKUP, ("a",)),
             Call(Op.COMPLETE_STORE, ("a",)), Call(Op.LOOKUP, ("a",)),
             Call(Op.PREPARE_LOAD, ("a",)), Call(Op.COMPLETE_LOAD, ("a",))]
    assert violation("lmcache-disk", calls) is None


def test_disk_failed_write_keeps_its_space() -> None:
    calls = [*store("a"), *store("b", success=False), Call(Op.PREPARE_STORE, ("c",))]
    found = violation("lmcache-disk", calls, capacity=2)
    assert found is not None
    assert found.prop == "eviction-choice"
    assert "must evict exactly 0" in found.message


def test_disk_failed_write_blocks_the_chunk_forever() -> None:
    found = violation("lmcache-disk", [*store("a", success=False),
                                       Call(Op.PREPARE_STORE, ("a",))])
    assert found is not None
    assert found.prop == "store-plan"
    found = violation("lmcache-disk", [*store("a", success=False), Call(Op.LOOKUP, ("a",))])
    assert found is not None
    assert found.prop == "lookup"
    assert "answered PENDING" in found.message


def write(directory: Any, max_calls: int | None) -> Any:
    from kvoffload.conformance.corpus.corpus import MAX_CALLS
    from kvoffload.conformance.corpus.corpus_write import write_corpus

    write_corpus(directory, selftest=False, max_calls=max_calls or MAX_CALLS)
    return directory


@pytest.fixture(scope="module")
def corpus(short_corpus: Any) -> Any:
    """The default tier's corpus (tests/conftest.py): its TINY traces reach 4 calls. The
    failures these tests name are engine cases, not TINY ones, and the slow tier replays
    the whole 6-call corpus."""
    return short_corpus


def check_cpu_replay(corpus: Any) -> None:
    from kvoffload.conformance.corpus.corpus_replay import replay_corpus

    fit = CheckConfig(profile=Profile.SAFE, assume=CPU_FIT, max_keys_per_call=1)
    outcome = replay_corpus(TARGET, fit, corpus, in_process=True).outcome
    assert outcome.passed
    assert not outcome.failed
    exact = replay_corpus(TARGET, CheckConfig(
        profile=Profile.SAFE, assume=CPU_FIT, max_keys_per_call=1, level=Level.EXACT), corpus,
        in_process=True).outcome
    # the hand-written read-refresh case and the page's --level exact counterexample
    named = ["engines-lmcache-cpu-read-refreshes-lru",
             "engines-lmcache-0.5.6-cpu-safe-exact-eviction-choice"]
    assert [f.case for f in exact.failed][:2] == named
    # Any other failure is the same divergence met by a TINY trace (the drain stores
    # one key per call, so a key read last can be the one LRU must keep): the spec's
    # LRU counts a load as a use, LMCache's get_blocking does not.
    for failure in exact.failed[2:]:
        assert failure.case.startswith("tiny-"), failure
        assert failure.violation.prop == "eviction-choice", failure
        steps = json.loads((corpus / "cases" / f"{failure.case}.json").read_text())["steps"]
        assert any(step["call"]["op"] == "prepare_load" for step in steps), failure


def check_disk_replay(corpus: Any) -> None:
    from kvoffload.conformance.corpus.corpus_replay import replay_corpus

    config = CheckConfig(adapter="lmcache-disk", max_keys_per_call=1)
    failed = {f.case for f in replay_corpus(TARGET, config, corpus, in_process=True).outcome.failed}
    assert {"engines-lmcache-disk-failed-store-frees",
            "engines-lmcache-disk-failed-store-retried"} <= failed


def test_corpus_replay_on_the_cpu_backend(corpus: Any) -> None:
    check_cpu_replay(corpus)


def test_corpus_replay_on_the_disk_backend(corpus: Any) -> None:
    check_disk_replay(corpus)


@pytest.mark.slow
def test_the_whole_corpus_replays_on_both_backends(tmp_path: Any) -> None:
    """The same two replays over the corpus's 6-call TINY traces."""
    whole = write(tmp_path, None)
    check_cpu_replay(whole)
    check_disk_replay(whole)
