"""The ``kvoffload.impl`` package: its public names, and no torch on import."""

from __future__ import annotations

import subprocess
import sys

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
