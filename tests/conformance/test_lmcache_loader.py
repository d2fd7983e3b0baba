"""``lmcache==X`` targets without LMCache: version checks, adapter choice, and
``--max-keys-per-call`` (the generator option LMCache's backends need)."""

from __future__ import annotations

import importlib.metadata

import pytest

from kvoffload.conformance import lmcache_loader
from kvoffload.conformance.cli import main
from kvoffload.conformance.config import CheckConfig
from kvoffload.conformance.errors import TargetLoadError, UsageError
from kvoffload.conformance.lockstep import Lockstep
from kvoffload.conformance.runner import run_check
from kvoffload.spec import Call, Op, Policy


def _missing(name: str) -> str:
    raise importlib.metadata.PackageNotFoundError(name)


def test_missing_lmcache_exits_2_saying_how_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(lmcache_loader.importlib.metadata, "version", _missing)
    assert main(["check", "lmcache==0.5.6", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "LMCache is not installed" in err
    assert "pip install -e '.[lmcache]'" in err


def test_another_installed_release_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(lmcache_loader.importlib.metadata, "version", lambda name: "0.3.1")
    assert main(["check", "lmcache==0.5.6", "--quiet"]) == 2
    assert "the installed LMCache is 0.3.1, not 0.5.6" in capsys.readouterr().err


def test_an_unsupported_release_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "lmcache==0.4.0", "--quiet"]) == 2
    assert "written against ['0.5.6']" in capsys.readouterr().err


def test_backend_follows_the_adapter_option() -> None:
    assert lmcache_loader.backend_of("auto") == "cpu"
    assert lmcache_loader.backend_of("lmcache-disk") == "disk"
    with pytest.raises(UsageError, match="lmcache-cpu or lmcache-disk"):
        lmcache_loader.backend_of("vllm-enum")


def test_only_lru_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lmcache_loader.importlib.metadata, "version", lambda name: "0.5.6")
    with pytest.raises(UsageError, match="--policy lru"):
        lmcache_loader.lmcache_factory("lmcache==0.5.6", CheckConfig(policy=Policy.ARC))


def test_version_errors_are_load_errors() -> None:
    with pytest.raises(TargetLoadError):
        lmcache_loader.check_version("lmcache==9.9.9")


def test_max_keys_per_call_must_not_be_negative() -> None:
    with pytest.raises(UsageError, match="--max-keys-per-call"):
        CheckConfig(max_keys_per_call=-1)


@pytest.mark.parametrize("limit", [1, 2])
def test_max_keys_per_call_bounds_every_generated_call(
    limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Call] = []
    step = Lockstep.step

    def recording(self: Lockstep, call: Call) -> object:
        if self.phase == "run":
            seen.append(call)
        return step(self, call)

    monkeypatch.setattr(Lockstep, "step", recording)
    config = CheckConfig(max_keys_per_call=limit, max_examples=40, steps=60, seed=7)
    assert run_check("kvoffload.impl:OffloadManager", config).verdict == "conforms"
    keyed = [c for c in seen if c.op not in (Op.RESET_CACHE, Op.TAKE_EVENTS)]
    assert keyed
    assert max(len(c.keys) for c in keyed) == limit
    assert {c.op for c in keyed} >= {Op.PREPARE_STORE, Op.COMPLETE_STORE, Op.PREPARE_LOAD,
                                     Op.COMPLETE_LOAD, Op.LOOKUP}


def test_max_keys_per_call_is_in_the_report() -> None:
    assert CheckConfig(max_keys_per_call=1).describe()["max_keys_per_call"] == 1
