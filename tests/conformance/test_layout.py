"""The package's layout shows the boundary (docs/architecture.md): the judge is handed an
adapter and loads no target, and every module sits where the drawing puts it."""

from __future__ import annotations

import re
from pathlib import Path

from test_import_graph import PACKAGE, PREFIX, import_graph

ROOT = Path(__file__).resolve().parents[2]
OTHERS = ("target", "command", "corpus", "selftest")


def test_the_judge_imports_no_other_side() -> None:
    graph = import_graph()
    judge = {m: deps for m, deps in graph.items() if m.startswith(f"{PREFIX}.judge.")}
    assert judge, "no judge modules found: the walk is broken"
    crossing = {m: sorted(d for d in deps if d.split(".")[2] in OTHERS)
                for m, deps in judge.items()}
    assert {m: d for m, d in crossing.items() if d} == {}


def test_every_file_is_drawn() -> None:
    """docs/architecture.md draws every module and data file of the package."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    drawing = text.split("```text\n", 1)[1].split("```", 1)[0]
    drawn, folders = set(), []
    for line in drawing.splitlines()[1:]:
        found = re.match(r"^([│ ]*)[├└]── (\S+)", line)
        assert found, line
        depth = len(found.group(1)) // 4
        folders[depth:] = []
        name = found.group(2)
        if name.endswith("/"):
            folders.append(name.rstrip("/"))
        else:
            drawn.add("/".join([*folders, name]))
    present = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*")
               if p.suffix in (".py", ".json") and "data" not in p.relative_to(PACKAGE).parts}
    assert drawn >= present, sorted(present - drawn)


def test_the_flat_layouts_names_still_import() -> None:
    """Reproducers, targets and TARGET strings written before the layout keep working:
    an old name is the moved module itself."""
    import importlib

    import kvoffload.conformance as package
    from kvoffload.conformance.target.targets import load_object

    moved = package._MOVED
    assert moved, "no moved modules listed"
    for old, new in moved.items():
        if old in ("runner", "lockstep", "mutants", "report"):
            module = importlib.import_module(f"{PREFIX}.{old}")
            assert module is importlib.import_module(f"{PREFIX}.{new}")
            assert module.__name__ == module.__spec__.name == f"{PREFIX}.{new}"
    mutants = importlib.import_module(f"{PREFIX}.{moved['mutants']}")
    found = load_object(f"{PREFIX}.mutants:LookupPendingAsMiss")
    assert found is mutants.LookupPendingAsMiss


def test_the_generators_of_docs_are_not_in_the_package() -> None:
    assert not list(PACKAGE.rglob("engines_*.py"))
    assert (ROOT / "docs" / "tools" / "engines_page.py").exists()
