"""docs/reproducers/mooncake_*.py: each Mooncake finding of docs/engines.md in
Mooncake's own API (issue 26), written by docs/tools/mooncake_reproducers.py.

The default tier (no Mooncake run): the committed scripts are exactly what the
generator writes, each imports nothing of kvoffload, is indexed with the output it
printed, and is linked once from docs/engines.md with its verdict. Marked ``mooncake``
and ``slow``: each script, run alone, reproduces its divergence (exit 1) and leaves no
process behind.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "docs" / "reproducers"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "mooncake_reproducers", ROOT / "docs" / "tools" / "mooncake_reproducers.py")
    if spec is None or spec.loader is None:
        raise ImportError("docs/tools/mooncake_reproducers.py cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses looks its module up by name
    spec.loader.exec_module(module)
    return module


GENERATOR = _generator()
NAMES = sorted(f.name for f in GENERATOR.FINDINGS)
INDEX = json.loads((FOLDER / "index.json").read_text())


def differences(folder: Path) -> list[str]:
    """Each mooncake_*.py in ``folder`` that is not what the generator writes, each
    finding with no script there, and each script with no finding."""
    wrong = [f"{f.name}: differs from the generator's"
             for f in GENERATOR.FINDINGS
             if (folder / f"{f.name}.py").is_file()
             and (folder / f"{f.name}.py").read_text(encoding="utf-8") != GENERATOR.script(f)]
    present = {p.stem for p in folder.glob("mooncake_*.py")}
    wrong += [f"{name}: no script" for name in sorted(set(NAMES) - present)]
    wrong += [f"{name}: no finding" for name in sorted(present - set(NAMES))]
    return wrong


def test_the_committed_scripts_are_what_the_generator_writes() -> None:
    assert differences(FOLDER) == [], "run python docs/tools/mooncake_reproducers.py --run"


def test_an_edited_a_missing_or_a_stray_script_is_found(tmp_path: Path) -> None:
    for finding in GENERATOR.FINDINGS:  # what the generator writes, then spoilt
        (tmp_path / f"{finding.name}.py").write_text(GENERATOR.script(finding))
    assert differences(tmp_path) == []
    edited, missing = tmp_path / f"{NAMES[0]}.py", tmp_path / f"{NAMES[1]}.py"
    edited.write_text(edited.read_text().replace("return verdict(", "return not verdict(", 1))
    missing.unlink()
    (tmp_path / "mooncake_stray.py").write_text("")
    assert differences(tmp_path) == [f"{NAMES[0]}: differs from the generator's",
                                     f"{NAMES[1]}: no script", "mooncake_stray: no finding"]


def test_each_script_is_indexed_with_its_run_and_imports_nothing_of_kvoffload() -> None:
    assert sorted(n for n in INDEX if n.startswith("mooncake_")) == NAMES
    for finding in GENERATOR.FINDINGS:
        entry = INDEX[finding.name]
        assert entry["target"] == "mooncake==0.3.13.post1"
        assert (entry["kind"], entry["what"], entry["trace"]) == (
            finding.kind, finding.what, list(finding.trace)), finding.name
        assert entry["status"] == 1, f"{finding.name} did not reproduce when it was run"
        out = (FOLDER / f"{finding.name}.out").read_text()
        assert out.strip().splitlines()[-1] == entry["last_line"]
        assert entry["last_line"].startswith(f"REPRODUCED: {finding.name}:")
        assert "still running: none)" in out, finding.name
        tree = ast.parse((FOLDER / f"{finding.name}.py").read_text())
        modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        modules |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not [m for m in modules if m.split(".")[0] == "kvoffload"], finding.name


def test_the_engines_page_links_each_script_once_with_its_verdict() -> None:
    page = (ROOT / "docs" / "engines.md").read_text()
    for finding in GENERATOR.FINDINGS:
        link = f"(reproducers/{finding.name}.py)"
        assert page.count(link) == 1, finding.name
        row = next(line for line in page.splitlines() if link in line)
        verdict = "**bug**:" if finding.kind == "bug" else "design:"
        assert f"| {verdict}" in row, finding.name


@pytest.mark.mooncake
@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_each_script_alone_reproduces_its_divergence(name: str) -> None:
    """A fresh interpreter, no PYTHONPATH (kvoffload is not on it), its own namespace."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, str(FOLDER / f"{name}.py")], cwd=FOLDER, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stdout + done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == INDEX[name]["last_line"]
    assert "still running: none)" in done.stdout
