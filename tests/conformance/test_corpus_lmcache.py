"""The corpus's LMCache cases replayed on LMCache 0.5.6's real CPU backend (marker
``lmcache``; skipped without LMCache 0.5.6, failed instead under CI=true)."""

from __future__ import annotations

import pytest

from kvoffload.conformance.config import CheckConfig
from kvoffload.conformance.corpus.corpus import engine_cases
from kvoffload.conformance.corpus.corpus_replay import applies, replay_case
from kvoffload.conformance.errors import PropertyViolation
from kvoffload.conformance.target.targets import prepare

pytestmark = pytest.mark.lmcache


def _case(name: str) -> dict[str, object]:
    return next(c for c in engine_cases() if c["name"] == f"engines-{name}")


def test_load_after_clear_while_read_fails_on_the_cpu_backend() -> None:
    """docs/engines.md, `--profile safe`, `misuse`: prepare_store, complete_store,
    prepare_load, reset_cache, prepare_load of 'a' on 1 chunk. clear() skips a chunk
    whose ref_count is above 1, so LMCache reads it again; the spec refuses the load."""
    case = _case("lmcache-cpu-load-after-clear-while-read")
    config = CheckConfig.from_options(profile="safe", adapter="lmcache-cpu",
                                      max_keys_per_call="1")
    assert applies(case, config) is None
    failed = replay_case(case, prepare("lmcache==0.5.6", config).make_adapter, config)
    assert isinstance(failed, PropertyViolation)
    # check's lockstep looks every key up just before a call the spec rejects: the chunk
    # that survived clear() answers HIT there, the first divergence (the page's run had
    # silenced `lookup` by then, so it went on to the accepted load, `misuse`)
    assert (failed.prop, failed.step, failed.probe) == ("lookup", 5, True)
    assert "asked just before prepare_load(['a'])" in failed.message


def test_the_same_trace_is_assumed_away_under_no_reset_in_flight() -> None:
    case = _case("lmcache-cpu-load-after-clear-while-read")
    config = CheckConfig.from_options(profile="safe", adapter="lmcache-cpu",
                                      assume=["no-reset-in-flight"])
    assert applies(case, config) == "assumed away: no-reset-in-flight"


def test_each_recorded_lmcache_counterexample_fails_on_replay() -> None:
    """docs/engines.md's LMCache counterexamples (corpus_engines.json), replayed as
    corpus cases under their run's own options: LMCache 0.5.6 fails every one."""
    from kvoffload.conformance.corpus.corpus import engines_data

    cases = {c["name"]: c for c in engine_cases()}
    entries = [e for e in engines_data()["counterexamples"] if e["engine"] == "lmcache"]
    assert len(entries) == 11
    passed = []
    for entry in entries:
        options = entry["command"].split()
        adapter = options[options.index("--adapter") + 1] if "--adapter" in options \
            else "lmcache-cpu"
        config = CheckConfig.from_options(profile=entry["profile"], policy=entry["policy"],
                                          level=entry["level"], assume=entry["assume"],
                                          adapter=adapter, max_keys_per_call="1")
        case = cases[f"engines-{entry['name']}"]
        assert applies(case, config) is None, entry["name"]
        found = replay_case(case, prepare("lmcache==0.5.6", config).make_adapter, config)
        if not isinstance(found, PropertyViolation):
            passed.append(entry["name"])
    assert passed == []
