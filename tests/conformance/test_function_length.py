"""Every function in the conformance suite is shorter than 60 lines (issue 9): one job
each, so the next change is made in one readable place."""

from __future__ import annotations

import ast
from pathlib import Path

from package_ast import walked

import kvoffload.conformance

LIMIT = 60


def lengths() -> list[tuple[int, str]]:
    """(lines, "module:function") for every function and method of the package."""
    root = Path(kvoffload.conformance.__file__).parent.resolve()
    found = []
    for path, nodes in walked(root):
        for node in nodes:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                found.append((size, f"{path.relative_to(root)}:{node.name}"))
    return sorted(found, reverse=True)


def test_no_function_reaches_sixty_lines() -> None:
    found = lengths()
    assert found, "no functions found: the walk is broken"
    assert [f for f in found if f[0] >= LIMIT] == [], found[:5]


if __name__ == "__main__":
    for size, name in lengths()[:10]:
        print(f"{size:4d}  {name}")
