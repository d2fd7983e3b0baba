"""The conformance package's source as syntax trees, parsed once per test session.

test_import_graph.py (every import) and test_function_length.py (every function's
length) each parsed and walked every module of the package: about 0.3 s of CPU each
for the same trees. Both read them from here; neither changes them."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.cache
def walked(root: Path) -> tuple[tuple[Path, tuple[ast.AST, ...]], ...]:
    """(path, every node of its tree in :func:`ast.walk`'s order) for each ``*.py`` under
    ``root``, sorted by path."""
    return tuple((path, tuple(ast.walk(ast.parse(path.read_text(encoding="utf-8")))))
                 for path in sorted(root.resolve().rglob("*.py")))
