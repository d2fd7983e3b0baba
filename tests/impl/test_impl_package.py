"""The ``kvoffload.impl`` package: its public names, and no torch on import."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import kvoffload.impl as impl


def test_public_names() -> None:
    assert {"OffloadManager", "UnknownPolicy"} <= set(impl.__all__)
    assert impl.OffloadManager(1).capacity == 1


def test_importing_the_manager_and_facade_does_not_import_torch() -> None:
    script = ("import sys; import kvoffload.impl, kvoffload.impl.vllm_facade; "
              "import kvoffload.impl.vllm_types; "
              "print(sorted(m for m in ('torch', 'numpy', 'vllm') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_manager_modules_take_only_vocabulary_errors_and_outputs_from_the_spec() -> None:
    allowed = {"kvoffload.spec.vocabulary", "kvoffload.spec.errors", "kvoffload.spec.outputs"}
    package = Path(impl.__file__).parent
    for module in sorted(package.glob("*.py")):  # the manager's modules, not the data path's
        tree = ast.parse(module.read_text())
        # imports under `if TYPE_CHECKING:` never run (the facade names vLLM's base class
        # there for type checkers); the test above checks what importing really loads
        static = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                  and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
                  for stmt in block.body for n in ast.walk(stmt)}
        for node in ast.walk(tree):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                if name.startswith("kvoffload.spec"):
                    assert name in allowed, f"{module.name} imports {name}"
                if id(node) not in static:
                    assert not name.startswith(("torch", "numpy", "vllm")), (
                        f"{module.name}: {name}")
