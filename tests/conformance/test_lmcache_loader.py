"""``lmcache==X`` targets without LMCache: version checks, adapter choice, and
``--max-keys-per-call`` (the generator option LMCache's backends need)."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest

from kvoffload.conformance.cli import main
from kvoffload.conformance.command import engine_script
from kvoffload.conformance.command.runner import run_check
from kvoffload.conformance.config import CheckConfig
from kvoffload.conformance.errors import TargetLoadError, UsageError
from kvoffload.conformance.judge.lockstep import Lockstep
from kvoffload.conformance.target import lmcache_loader
from kvoffload.conformance.target.targets import with_target_defaults
from kvoffload.spec import Call, Op, Policy
from zygote import Zygote


def _missing(name: str) -> str:
    raise importlib.metadata.PackageNotFoundError(name)


def test_missing_lmcache_exits_2_saying_how_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(importlib.metadata, "version", _missing)
    # In process: the patched metadata must be what loads the target (since issue 22 a
    # plain check loads it in a host process, which no monkeypatch reaches). Set through
    # monkeypatch, not --in-process, which sets it for the rest of the test session.
    monkeypatch.setenv("KVOFFLOAD_IN_PROCESS", "1")
    assert main(["check", "lmcache==0.5.6", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "LMCache is not installed" in err
    assert "pip install -e '.[lmcache]'" in err


def test_another_installed_release_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.3.1")
    monkeypatch.setenv("KVOFFLOAD_IN_PROCESS", "1")  # as above
    assert main(["check", "lmcache==0.5.6", "--quiet"]) == 2
    assert "the installed LMCache is 0.3.1, not 0.5.6" in capsys.readouterr().err


@pytest.mark.usefixtures("python_hosts")  # the host's load error is the subject, not its start
def test_an_unsupported_release_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "lmcache==0.4.0", "--quiet"]) == 2
    assert "written against ['0.5.6']" in capsys.readouterr().err


def test_backend_follows_the_adapter_option() -> None:
    assert lmcache_loader.backend_of("auto") == "cpu"
    assert lmcache_loader.backend_of("lmcache-disk") == "disk"
    with pytest.raises(UsageError, match="lmcache-cpu or lmcache-disk"):
        lmcache_loader.backend_of("vllm-enum")


def test_only_lru_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.5.6")
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
    monkeypatch.setenv("KVOFFLOAD_IN_PROCESS", "1")  # the judge's calls are the subject
    # 10 seeded examples of up to 60 steps: every keyed operation and calls of the limit
    # are met within them (the subject is the bound, not a search; 40 examples cost
    # about 0.35 s of CPU an instance, 10 about 0.1)
    config = CheckConfig(max_keys_per_call=limit, max_examples=10, steps=60, seed=7)
    assert run_check("kvoffload.impl:OffloadManager", config).verdict == "conforms"
    keyed = [c for c in seen if c.op not in (Op.RESET_CACHE, Op.TAKE_EVENTS)]
    assert keyed
    assert max(len(c.keys) for c in keyed) == limit
    assert {c.op for c in keyed} >= {Op.PREPARE_STORE, Op.COMPLETE_STORE, Op.PREPARE_LOAD,
                                     Op.COMPLETE_LOAD, Op.LOOKUP}


def test_max_keys_per_call_is_in_the_report() -> None:
    assert CheckConfig(max_keys_per_call=1).describe()["max_keys_per_call"] == 1


def test_an_lmcache_target_defaults_to_one_key_per_call() -> None:
    config = with_target_defaults("lmcache==0.5.6", CheckConfig())
    assert config.max_keys_per_call == 1
    assert config.target_defaults == ("max_keys_per_call",)


@pytest.mark.parametrize("given", ["0", "3"])
def test_a_limit_the_user_gives_an_lmcache_target_wins(given: str) -> None:
    config = with_target_defaults("lmcache==0.5.6",
                                  CheckConfig.from_options(max_keys_per_call=given))
    assert config.max_keys_per_call == int(given)
    assert config.target_defaults == ()


def test_other_targets_have_no_limit_unless_given() -> None:
    config = with_target_defaults("kvoffload.impl:OffloadManager", CheckConfig())
    assert config.max_keys_per_call == 0
    assert config.target_defaults == ()


@pytest.mark.lmcache
@pytest.mark.parametrize("given", [None, "0"])
def test_the_header_says_whose_limit_it_is(
    given: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, lmcache_hosts: None, lmcache_zygote: Zygote
) -> None:
    # The header and report are the subject, not the host: in process, LMCache is
    # imported once for the session instead of once more per run in a host (about 3.5 s
    # of CPU each). Without a limit LMCache fails 'rejection', and the engine-native
    # reproducer's record host and fresh process each imported LMCache once more (8 s
    # of CPU, the one default-tier test over 10 s): the host is a fork of the session's
    # host zygote, the script runs in a fork of its zygote (test_engine_script_lmcache.py).
    monkeypatch.setenv("KVOFFLOAD_IN_PROCESS", "1")

    def forked(path: Path, timeout: float) -> tuple[int | None, str, str]:
        ran: tuple[int | None, str, str] = lmcache_zygote.run([str(path)], path.parent, timeout)
        return ran

    monkeypatch.setattr(engine_script, "run_alone", forked)
    limit = [] if given is None else ["--max-keys-per-call", given]
    main(["check", "lmcache==0.5.6", *limit, "--profile", "safe", "--assume",
          "no-reset-in-flight", "--assume", "no-store-while-storing", "--max-examples", "5",
          "--steps", "20", "--seed", "1", "--quiet", "--report-dir", str(tmp_path)])
    out = capsys.readouterr().out
    configuration = json.loads((tmp_path / "report.json").read_text())["configuration"]
    if given is None:
        assert ("keys per call  at most 1 (this target's default: LMCache's backends store, "
                "read and evict one chunk per call;") in out
        assert configuration["max_keys_per_call"] == 1
        assert configuration["target_defaults"] == ["max_keys_per_call"]
    else:
        assert "keys per call  no limit\n" in out
        assert configuration["max_keys_per_call"] == 0
        assert configuration["target_defaults"] == []
        violations = json.loads((tmp_path / "report.json").read_text())["violations"]
        assert [v["engine_reproducer"]["reproduced"] for v in violations] == [True]
