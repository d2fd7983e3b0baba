"""The ``mooncake==X`` target kind's checks before anything starts (no wheel needed)."""

from __future__ import annotations

import pytest

from kvoffload.conformance.config import CheckConfig, Policy
from kvoffload.conformance.errors import TargetLoadError, UsageError
from kvoffload.conformance.target import mooncake_adapter
from kvoffload.conformance.target.targets import load_object, prepare, target_defaults


def test_another_release_is_refused_before_anything_starts() -> None:
    with pytest.raises(TargetLoadError, match="written against"):
        mooncake_adapter.check_version("mooncake==0.3.12")


def test_a_missing_wheel_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mooncake_adapter, "installed_version", lambda: None)
    with pytest.raises(TargetLoadError, match=r"\.\[mooncake\].*libibverbs1"):
        mooncake_adapter.check_version("mooncake==0.3.13.post1")


def test_only_lru_and_the_own_adapter_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mooncake_adapter, "installed_version", lambda: "0.3.13.post1")
    with pytest.raises(UsageError, match="background"):
        mooncake_adapter.mooncake_factory("mooncake==0.3.13.post1",
                                          CheckConfig(policy=Policy.ARC))
    with pytest.raises(UsageError, match="its own adapter"):
        mooncake_adapter.mooncake_factory("mooncake==0.3.13.post1",
                                          CheckConfig(adapter="native"))


def test_the_adapter_auto_picked_is_a_valid_configuration(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: the run names the adapter auto picked in its configuration
    (``adapter='mooncake'``), which the options table refused, so every
    ``kvoffload check mooncake==...`` exited 2 before it started."""
    monkeypatch.setattr(mooncake_adapter, "installed_version", lambda: "0.3.13.post1")
    picked = CheckConfig(adapter="mooncake")
    name, _, _ = mooncake_adapter.mooncake_factory("mooncake==0.3.13.post1", picked)
    assert name == "mooncake"
    with pytest.raises(UsageError, match="mooncake== targets only"):
        prepare("kvoffload.impl:OffloadManager", picked)


def test_the_target_is_a_service_not_an_object_to_import() -> None:
    assert mooncake_adapter.is_mooncake_target("mooncake==0.3.13.post1")
    assert load_object("mooncake==0.3.13.post1") is None
    chosen = target_defaults("mooncake==0.3.13.post1")
    assert list(chosen) == ["eviction"]  # its master evicts in the background (D14)
    assert chosen["eviction"][0] == "background"


def test_a_key_the_put_found_present_keeps_its_slot_number() -> None:
    """Regression (the first run under --eviction background): the put found 'a'
    present (-705), the master evicted it just after, before the adapter listed the
    objects; the adapter handed 'a''s number to 'e' in the same call, a slot the spec
    still held for 'a' (``slots``). A key the call saw present keeps its number."""
    adapter = mooncake_adapter.MooncakeAdapter.__new__(mooncake_adapter.MooncakeAdapter)
    adapter.strict, adapter.tier, adapter.engine_calls = True, 1, []
    adapter.storing, adapter.slot, adapter.reads = set(), {"a": 0}, {}
    answers = {"put_start": [mooncake_adapter.ALREADY_EXISTS, mooncake_adapter.OK],
               "": "t1/e\n"}  # the listing: 'a' gone already

    def ask(to: str, op: str, *args: object) -> object:
        adapter.engine_calls.append(f"{to}.{op}")
        return answers[op]

    adapter.ask = ask  # type: ignore[method-assign]  # the cluster, answered by hand
    outcome = adapter.prepare_store(["a", "e", "e"])
    assert outcome.accepted
    assert (outcome.keys, outcome.slots) == (("e",), (1,))
