"""docs/reproducers/: the engine-native reproducers of docs/engines.md's LMCache and
vLLM findings (written by docs/tools/engine_reproducers.py). Each must import nothing
from kvoffload, be linked from the page with its verdict (bug or design), and show its
divergence when run alone in a fresh process, as it did when it was written.

The LMCache scripts run in forks of the session's zygote (tests/zygote.py: an interpreter
that has imported torch and LMCache and nothing of kvoffload, checked before each fork);
the vLLM script in a fresh interpreter of its own."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_releases import release_or_skip
from zygote import Zygote

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "docs" / "reproducers"
INDEX = json.loads((FOLDER / "index.json").read_text())
LMCACHE = sorted(n for n, e in INDEX.items() if e["target"].startswith("lmcache=="))
VLLM = sorted(n for n, e in INDEX.items() if e["target"].startswith("vllm=="))


def run(name: str) -> subprocess.CompletedProcess[str]:
    """The script alone: a fresh interpreter, no PYTHONPATH (kvoffload is not on it)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, str(FOLDER / f"{name}.py")], cwd=FOLDER, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def run_forked(name: str, zygote: Zygote, tmpdir: Path) -> subprocess.CompletedProcess[str]:
    """The script alone as :func:`run` runs it, with ``TMPDIR=tmpdir``, in a fork of the
    session's zygote: an interpreter that has imported torch and LMCache's modules and
    nothing of kvoffload (:mod:`zygote` says what it may have imported), without paying
    for their import per script (about 5 s of CPU each)."""
    script = FOLDER / f"{name}.py"
    status, out, err = zygote.run([str(script)], FOLDER, timeout=300, tmpdir=tmpdir)
    return subprocess.CompletedProcess([str(script)], -9 if status is None else status,
                                       out, err)


def test_every_reproducer_is_indexed_and_imports_nothing_of_kvoffload() -> None:
    assert sorted(p.stem for p in FOLDER.glob("*.py")) == sorted(INDEX)
    for name in INDEX:
        tree = ast.parse((FOLDER / f"{name}.py").read_text())
        modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        modules |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not [m for m in modules if m.split(".")[0] == "kvoffload"], name
        assert INDEX[name]["kind"] in ("bug", "design")
        assert INDEX[name]["status"] == 1  # it reproduced when it was written
        assert (FOLDER / f"{name}.out").read_text().strip().endswith(INDEX[name]["last_line"])


def test_the_engines_page_links_each_reproducer_with_its_verdict() -> None:
    page = (ROOT / "docs" / "engines.md").read_text()
    for name, entry in INDEX.items():
        link = f"(reproducers/{name}.py)"
        assert page.count(link) == 1, name
        row = next((line for line in page.splitlines() if link in line), "")
        if entry["target"].startswith("lmcache=="):
            kind = "**bug**" if entry["kind"] == "bug" else "design"
            assert f"| {kind} |" in row, name


@pytest.mark.lmcache
@pytest.mark.parametrize("name", LMCACHE)
def test_each_lmcache_reproducer_shows_its_divergence_without_kvoffload(
    name: str, lmcache_zygote: Zygote, tmp_path: Path
) -> None:
    """... and leaves nothing behind in its temporary folder (the disk backend's
    directory, removed when the script ends, which is by the divergence it shows)."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    done = run_forked(name, lmcache_zygote, tmpdir)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1] == INDEX[name]["last_line"]
    assert sorted(p.name for p in tmpdir.iterdir()) == []


@pytest.mark.parametrize("name", VLLM)
def test_each_vllm_reproducer_shows_its_divergence_without_kvoffload(
    name: str, pytestconfig: pytest.Config
) -> None:
    release_or_skip(pytestconfig, INDEX[name]["target"].removeprefix("vllm=="))
    done = run(name)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1] == INDEX[name]["last_line"]
