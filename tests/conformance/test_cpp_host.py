"""The C++17 toy as a protocol host (corpus/replayer/host.cpp), checked live by
``kvoffload check --exec``: it conforms (LRU, strict profile, level exact, no
assumption), and each seeded bug of toy.hpp (TOY_BUG 1 to 6, families of the
self-test) is killed live with a shrunk trace. Skipped without g++ and
nlohmann-json3-dev, except under CI (CI=true), where .ci/run installs both."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cpp_build import cached_build
from kvoffload.conformance.cli import main

SOURCE = Path(__file__).resolve().parents[2] / "corpus" / "replayer" / "host.cpp"
HEADER = Path("/usr/include/nlohmann/json.hpp")
SMALL = ["--max-examples", "40", "--seed", "1", "--no-database", "--quiet"]

BUGS = {
    1: ("epochs", "plans keep epoch 0 after a reset"),
    2: ("events", "events announce READY keys again"),
    3: ("rejection", "a block being read can be evicted (EvictsPinnedBlock)"),
    4: ("eviction-choice", "a failed store is READY anyway (FailedStoreStaysVisible)"),
    5: ("load-plan", "prepare_load([k, k]) pins k twice (PrepareLoadDoublePins)"),
    6: ("rejection", "a reset frees running copies' slots (ResetFreesRunningSlots)"),
}
"""TOY_BUG: (the property the live check reports at seed 1, the bug)."""


TOY_BUG_FROM_ENV = 'std::atoi(std::getenv("TOY_BUG") ? std::getenv("TOY_BUG") : "0")'
"""The source's ``TOY_BUG`` macro as an expression read at run time (as
test_corpus_cpp.py builds the replayer): one build serves the clean toy (``TOY_BUG``
unset or 0, the same code as ``-DTOY_BUG=0``) and each seeded bug, instead of one g++
run (about 5 s of CPU at -O0) per bug."""


def build(directory: Path) -> Path:
    """The host, whose toy has the seeded bug named by the ``TOY_BUG`` environment
    variable at run time (unset: none; the host inherits the judge's environment)."""
    if shutil.which("g++") is None or not HEADER.is_file():
        reason = "g++ or nlohmann-json3-dev is missing (apt-get install g++ nlohmann-json3-dev)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; .ci/run installs them")
        pytest.skip(reason)
    binary = directory / "host"
    # -O0: the JSON header's templates compile a third faster, and the toy is fast enough.
    return cached_build(["-std=c++17", "-O0", "-Wall", "-Werror", "-include", "cstdlib",
                         f"-DTOY_BUG={TOY_BUG_FROM_ENV}"], SOURCE, HEADER, binary)


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("host"))


@pytest.fixture(autouse=True)
def _clean_toy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy without a seeded bug unless a test names one."""
    monkeypatch.setenv("TOY_BUG", "0")


@pytest.mark.skipif(os.name != "posix", reason="hosts need POSIX")
@pytest.mark.parametrize("examples", ["12", pytest.param("40", marks=pytest.mark.wide)])
def test_the_toy_conforms_live(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               toy: Path, examples: str) -> None:
    """On 12 examples in the default tier (the toy's code against every case of the
    short corpus: test_corpus_cpp.py), on 40 in the wide tier (1.7 s of CPU)."""
    assert main(["check", "--exec", str(toy), "--level", "exact", *SMALL,
                 "--max-examples", examples, "--report-dir", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "adapter        native (the C++17 toy LRU manager" in out
    assert "CONFORMS" in out


@pytest.mark.skipif(os.name != "posix", reason="hosts need POSIX")
def test_the_toy_is_lru_only(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                            toy: Path) -> None:
    assert main(["check", "--exec", str(toy), "--policy", "arc", *SMALL,
                 "--report-dir", str(tmp_path / "r")]) == 2
    assert "LRU order only" in capsys.readouterr().err


@pytest.mark.skipif(os.name != "posix", reason="hosts need POSIX")
@pytest.mark.parametrize("bug", [1, 2, *(pytest.param(b, marks=pytest.mark.slow)
                                        for b in (3, 4, 5, 6))])
def test_each_seeded_bug_is_killed_live_with_a_shrunk_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    toy: Path, bug: int
) -> None:
    monkeypatch.setenv("TOY_BUG", str(bug))
    prop, _ = BUGS[bug]
    assert main(["check", "--exec", str(toy), *SMALL, "--stop-at-first",
                 "--report-dir", str(tmp_path / "r")]) == 1
    out = capsys.readouterr().out
    assert f"property {prop!r} violated" in out
    trace = out.split("shrunk trace (", 1)[1]
    assert int(trace.split(" call", 1)[0]) <= 8  # shrunk to a few calls
    assert (tmp_path / "r" / "report.json").is_file()
