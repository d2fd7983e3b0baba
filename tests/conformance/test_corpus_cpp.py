"""The corpus's C++17 replayer (corpus/replayer/replay.cpp) builds with g++ and Debian's
nlohmann-json3-dev and replays the corpus against its toy manager, resets, plan epochs
and net-change events included; seeded bugs built into the toy are caught. Skipped
without them, except under CI (CI=true), where .ci/run installs both."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cpp_build import cached_build

SOURCE = Path(__file__).resolve().parents[2] / "corpus" / "replayer" / "replay.cpp"
HEADER = Path("/usr/include/nlohmann/json.hpp")


TOY_BUG_FROM_ENV = 'std::atoi(std::getenv("TOY_BUG") ? std::getenv("TOY_BUG") : "0")'
"""The source's ``TOY_BUG`` macro as an expression read at run time: one build serves
the clean toy (``TOY_BUG`` unset or 0, the same code as ``-DTOY_BUG=0``) and each seeded
bug, instead of one g++ run (about 8 s of CPU) per bug."""


CLEAN = {**os.environ, "TOY_BUG": "0"}
"""The environment the replayer runs its clean toy in."""


def build(directory: Path) -> Path:
    """The replayer, whose toy has the seeded bug named by the ``TOY_BUG`` environment
    variable at run time (unset: none; see TOY_BUG in the source)."""
    if shutil.which("g++") is None or not HEADER.is_file():
        reason = "g++ or nlohmann-json3-dev is missing (apt-get install g++ nlohmann-json3-dev)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; .ci/run installs them")
        pytest.skip(reason)
    binary = directory / "replay"
    return cached_build(["-std=c++17", "-O1", "-Wall", "-Werror", "-include", "cstdlib",
                         f"-DTOY_BUG={TOY_BUG_FROM_ENV}"], SOURCE, HEADER, binary)


@pytest.fixture(scope="module")
def replayer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("replayer"))


@pytest.fixture(scope="module")
def corpus(short_corpus: Path) -> Path:
    """The corpus of TINY traces up to 4 calls (tests/conftest.py), shared with
    test_lmcache_backends.py: read only here."""
    return short_corpus


@pytest.fixture(scope="module")
def cases(corpus: Path) -> dict[str, dict[str, Any]]:
    """Every case of ``corpus`` by name, read once for the tests that look at them."""
    return {p.stem: json.loads(p.read_text()) for p in (corpus / "cases").glob("*.json")}


def broken_copy(corpus: Path, directory: Path) -> Path:
    """A copy of ``corpus`` to break a case in: its files hard-linked, not copied
    (creating the corpus's 1,937 files again cost 0.2 to 0.7 s of CPU per copy here,
    linking them a twentieth of it). A case is changed by :func:`rewrite`, never
    written through its link, which would change the shared corpus too."""
    shutil.copytree(corpus, directory, copy_function=os.link)
    return directory


def rewrite(path: Path, case: dict[str, object]) -> None:
    """``case`` written to ``path`` as a new file that takes the linked one's place."""
    new = path.with_name(path.name + ".new")
    new.write_text(json.dumps(case))
    os.replace(new, path)
    assert path.stat().st_nlink == 1


@pytest.fixture(scope="module")
def clean_replay(replayer: Path, corpus: Path) -> subprocess.CompletedProcess[str]:
    """The clean toy's replay of the whole corpus, made once for the tests that read it
    (each made the same run: about 0.2 s of CPU)."""
    return subprocess.run([str(replayer), str(corpus)], capture_output=True, text=True,
                          env=CLEAN, check=False)


def test_the_toy_manager_passes_the_cases_it_replays(
    clean_replay: subprocess.CompletedProcess[str],
) -> None:
    done = clean_replay
    assert done.returncode == 0, done.stdout
    passed, failed, skipped = (int(w) for w in done.stdout.split()[::2][:3])
    assert failed == 0
    assert passed > 250
    assert skipped > 0


def test_a_wrong_expectation_fails(replayer: Path, corpus: Path, tmp_path: Path) -> None:
    broken = broken_copy(corpus, tmp_path / "corpus")
    case_file = broken / "cases" / "scenario-pr41795.json"
    case = json.loads(case_file.read_text())
    case["steps"][1]["expect"]["result"] = "MISS"
    rewrite(case_file, case)
    done = subprocess.run([str(replayer), str(broken)], capture_output=True, text=True,
                          env=CLEAN)
    assert done.returncode == 1
    assert "FAILED scenario-pr41795 at step 2: lookup" in done.stdout


def test_an_unreadable_corpus_exits_2(replayer: Path, tmp_path: Path) -> None:
    assert subprocess.run([str(replayer), str(tmp_path)], capture_output=True,
                          env=CLEAN).returncode == 2


def test_every_reset_case_is_replayed(
    cases: dict[str, dict[str, Any]], clean_replay: subprocess.CompletedProcess[str],
) -> None:
    # Only exact-level ARC cases are skipped: the toy resets, with copies still running.
    arc_exact = sum(c["level"] == "exact" and c["policy"] != "lru" for c in cases.values())
    assert any(s["call"]["op"] == "reset_cache" for c in cases.values() for s in c["steps"])
    done = clean_replay
    assert done.stdout.split()[4] == str(arc_exact)  # "P passed, F failed, S skipped"


@pytest.mark.parametrize(("bug", "caught"), [
    (1, "store_plan epoch: expected 1 (the last reset's), got 0"),
    (2, "which the subscriber has: not the net change"),
])
def test_a_toy_with_a_seeded_bug_fails(replayer: Path, corpus: Path, bug: int, caught: str
                                       ) -> None:
    done = subprocess.run([str(replayer), str(corpus)], capture_output=True, text=True,
                          env={**os.environ, "TOY_BUG": str(bug)})
    assert done.returncode == 1
    assert caught in done.stdout


def test_a_wrong_reset_epoch_fails(replayer: Path, corpus: Path, tmp_path: Path) -> None:
    broken = broken_copy(corpus, tmp_path / "corpus")
    for path in sorted((broken / "cases").glob("*.json")):
        case = json.loads(path.read_text())
        steps = [s for s in case["steps"] if s["expect"]["kind"] == "reset"]
        if steps and case["level"] == "any":
            steps[0]["expect"]["epoch"] = 2
            rewrite(path, case)
            break
    done = subprocess.run([str(replayer), str(broken)], capture_output=True, text=True,
                          env=CLEAN)
    assert done.returncode == 1
    assert f"FAILED {path.stem} at step" in done.stdout
    assert "reset_cache: expected epoch 2, got 1" in done.stdout


def test_an_lru_toy_evicting_the_most_recent_fails_every_lru_choice(
    replayer: Path, corpus: Path, cases: dict[str, dict[str, Any]],
) -> None:
    # The toy evicts in LRU order, so the replayer checks LRU cases at level exact:
    # where the spec had a choice the victims must be `evicted` itself, not any of
    # `evicted_from` (docs/corpus.md, "Victims"). TOY_BUG 7 evicts the most recent.
    choices = [name for name, case in cases.items() if case["policy"] == "lru"
               and any("evicted_from" in s["expect"] for s in case["steps"])]
    assert len(choices) >= 2
    done = subprocess.run([str(replayer), str(corpus)], capture_output=True, text=True,
                          env={**os.environ, "TOY_BUG": "7"})
    assert done.returncode == 1
    failed = int(done.stdout.split()[-4])  # "P passed, F failed, S skipped"
    assert failed >= len(choices)
    assert "evicted: expected" in done.stdout


def test_at_level_any_a_toy_evicting_the_most_recent_passes(
    replayer: Path, corpus: Path, cases: dict[str, dict[str, Any]],
) -> None:
    # At --level any every allowed victim is right: the cases tagged level exact are
    # skipped, a last call's choice is checked against `evicted_from`.
    exact = sum(c["level"] == "exact" for c in cases.values())
    done = subprocess.run([str(replayer), str(corpus), "--level", "any"],
                          capture_output=True, text=True, env={**os.environ, "TOY_BUG": "7"})
    assert done.returncode == 0, done.stdout
    assert done.stdout.split()[-2] == str(exact)
