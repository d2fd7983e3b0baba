"""The ``mooncake==X`` target kind's checks before anything starts (no wheel needed)."""

from __future__ import annotations

import pytest

from kvoffload.conformance import mooncake_adapter
from kvoffload.conformance.config import CheckConfig, Policy
from kvoffload.conformance.errors import TargetLoadError, UsageError
from kvoffload.conformance.targets import load_object, prepare, target_defaults


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
