"""``import kvoffload.spec`` needs nothing outside the standard library."""

from __future__ import annotations

import subprocess
import sys

BLOCKER = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"torch", "numpy", "hypothesis", "crosshair"}:
            raise ImportError(f"blocked: {name}")
        return None
sys.meta_path.insert(0, Block())
import kvoffload.spec, kvoffload.spec.scenarios
from kvoffload.spec.calls import replay
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {"torch", "numpy", "hypothesis"})
print(loaded)
"""


def test_spec_imports_without_third_party_packages() -> None:
    done = subprocess.run([sys.executable, "-c", BLOCKER], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_spec_sources_import_only_the_standard_library() -> None:
    import ast
    from pathlib import Path

    import kvoffload.spec

    allowed = set(sys.stdlib_module_names) | {"__future__"}
    for path in Path(kvoffload.spec.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name} imports {name}"
