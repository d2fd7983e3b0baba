"""LMCache's findings (docs/engines.md), each shown by its engine-native reproducer in a
process without kvoffload: the script makes exactly the LMCache calls the adapter made and
gets the same answers (marker ``lmcache``: each case starts a host, which imports LMCache).

The script runs where :func:`engine_script.run_alone` would run it, a fresh ``python
SCRIPT`` with no PYTHONPATH, but in a fork of the session's zygote (tests/zygote.py): an
interpreter that has imported torch and the LMCache modules every reproducer imports, and
nothing of kvoffload (checked in its ``sys.modules`` before each fork), so each script does
not pay LMCache's import again (about 5 s of CPU). ``run_alone`` itself, a fresh process,
is tested in test_engine_record.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvoffload.conformance.command import engine_script
from kvoffload.conformance.command.engine_script import engine_reproducer
from kvoffload.conformance.config import CheckConfig
from kvoffload.conformance.errors import PropertyViolation
from kvoffload.conformance.reproduce import reproduce
from kvoffload.spec import Call, Op
from zygote import Zygote

pytestmark = pytest.mark.lmcache

TARGET = "lmcache==0.5.6"


def store(key: str, success: bool = True) -> list[Call]:
    return [Call(Op.PREPARE_STORE, (key,)), Call(Op.COMPLETE_STORE, (key,), success=success)]


CASES: dict[str, tuple[dict[str, Any], list[Call], str, str]] = {
    # name: (configuration, trace, property, an engine call the script must show)
    "cpu-store-in-flight-invisible": (
        {"adapter": "lmcache-cpu", "profile": "strict", "capacity": 1},
        [Call(Op.PREPARE_STORE, ("a",)), Call(Op.LOOKUP, ("a",))], "lookup",
        "answer = backend.exists_in_put_tasks(key_a)"),
    "cpu-read-does-not-refresh-lru": (
        {"adapter": "lmcache-cpu", "profile": "safe", "capacity": 2, "level": "exact"},
        [*store("a"), *store("b"), Call(Op.PREPARE_LOAD, ("a",)),
         Call(Op.COMPLETE_LOAD, ("a",)), Call(Op.PREPARE_STORE, ("c",))], "eviction-choice",
        "= backend.get_blocking(key_a)"),
    "cpu-clear-does-not-fence-a-store": (
        {"adapter": "lmcache-cpu", "profile": "safe", "capacity": 1},
        [Call(Op.PREPARE_STORE, ("a",)), Call(Op.RESET_CACHE), Call(Op.COMPLETE_STORE, ("a",)),
         Call(Op.LOOKUP, ("a",))], "lookup", "answer = backend.clear()"),
    "disk-failed-write-stays-in-put-tasks": (
        {"adapter": "lmcache-disk", "profile": "strict", "capacity": 1},
        [*store("a", success=False), Call(Op.LOOKUP, ("a",))], "lookup",
        "answer = v3.release(False, 30.0)"),
    "disk-failed-write-keeps-its-space": (
        {"adapter": "lmcache-disk", "profile": "strict", "capacity": 2},
        [*store("a"), *store("b", success=False), Call(Op.PREPARE_STORE, ("c",))],
        "eviction-choice", "answer = backend.submit_put_task(key_c, "),
}


def found(configuration: dict[str, Any], calls: list[Call]) -> PropertyViolation:
    try:
        reproduce(TARGET, configuration, calls)
    except PropertyViolation as violation:
        violation.generated = len(violation.trace)
        return violation
    raise AssertionError("the trace conforms")


KEPT = ("cpu-read-does-not-refresh-lru", "disk-failed-write-keeps-its-space")
"""The findings the default tier generates a script for, one per backend: the longest
trace of each (stores, a read and its release, an eviction; stores, a failed write and an
eviction), so the most kinds of recorded call (about 0.25 s of CPU a finding: the
recording host, the judge, the script). The others are ``wide``; the default tier still
runs each finding's committed script (docs/test_reproducers.py)."""


@pytest.mark.parametrize("name", [
    name if name in KEPT else pytest.param(name, marks=pytest.mark.wide)
    for name in sorted(CASES)])
def test_each_lmcache_finding_is_reproduced_by_lmcache_alone(
    name: str, lmcache_zygote: Zygote, lmcache_hosts: None, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path
) -> None:
    """... and the script leaves nothing behind in its temporary folder when it ends."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()

    def forked(path: Path, timeout: float) -> tuple[int | None, str, str]:
        ran: tuple[int | None, str, str] = lmcache_zygote.run(
            [str(path)], path.parent, timeout, tmpdir=tmpdir)
        return ran

    monkeypatch.setattr(engine_script, "run_alone", forked)
    configuration, calls, prop, call = CASES[name]
    violation = found(configuration, calls)
    assert violation.prop == prop
    script = engine_reproducer(TARGET, CheckConfig.from_options(**configuration, spelling=""),
                               violation)
    assert script is not None
    assert script.reproduced, script.output
    assert call in script.source
    assert "kvoffload" not in "".join(
        line for line in script.source.splitlines() if line.startswith(("import", "from")))
    assert sorted(p.name for p in tmpdir.iterdir()) == []
