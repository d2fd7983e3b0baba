"""The suite's import graph, read from the source (AST, every import, function-level
ones included): the corpus's modules sit in no cycle (corpus.py and corpus_replay.py
imported each other until issue 23)."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from pathlib import Path

from package_ast import walked

PACKAGE = Path(__file__).resolve().parents[2] / "conformance" / "kvoffload" / "conformance"
PREFIX = "kvoffload.conformance"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PREFIX, *parts))


def imports_of(path: Path, modules: set[str], nodes: Iterable[ast.AST]) -> set[str]:
    """The package's modules ``path`` imports, anywhere in it (``nodes``: every node of
    its tree)."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in nodes:
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        found.update(n for n in names if n in modules and n != here)
    return found


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Read once per session from the trees :func:`package_ast.walked` parsed (once for
    test_function_length.py too); the tests only read it."""
    trees = walked(PACKAGE)
    modules = {module_name(p) for p, _ in trees}
    return {module_name(p): imports_of(p, modules, nodes) for p, nodes in trees}


def in_a_cycle(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """A path of imports from ``start`` back to itself, or None."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in graph.get(node, ()):
            if nxt == start:
                return [*path, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


CORPUS_MODULES = ("corpus.corpus", "corpus.corpus_replay", "corpus.corpus_write",
                  "corpus.corpus_command", "judge.generator")


def test_the_graph_is_read() -> None:
    graph = import_graph()
    assert f"{PREFIX}.corpus.corpus" in graph[f"{PREFIX}.corpus.corpus_replay"]
    assert f"{PREFIX}.judge.lockstep" in graph[f"{PREFIX}.corpus.corpus_replay"]
    assert f"{PREFIX}.judge.generator" in graph[f"{PREFIX}.judge.machine"]


def test_no_corpus_module_is_in_an_import_cycle() -> None:
    graph = import_graph()
    cycles = {m: in_a_cycle(graph, f"{PREFIX}.{m}") for m in CORPUS_MODULES}
    assert cycles == dict.fromkeys(CORPUS_MODULES)


def test_corpus_imports_no_replayer() -> None:
    assert not {f"{PREFIX}.corpus.corpus_replay", f"{PREFIX}.corpus.corpus_write",
                f"{PREFIX}.corpus.corpus_command"} & import_graph()[f"{PREFIX}.corpus.corpus"]


def test_a_cycle_is_found() -> None:
    """The control: the finder sees a cycle where there is one."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert in_a_cycle(graph, "a") == ["a", "b", "c", "a"]
    assert in_a_cycle(graph, "d") is None
