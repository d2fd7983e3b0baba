"""The data-path tests need torch. Without it each of their modules is reported as
skipped, with the install command as the reason (the manager's tests, elsewhere, run
without torch); CI installs the CPU build first."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

NEEDS_TORCH = "needs torch: pip install torch==2.13.0"
HAVE_TORCH = importlib.util.find_spec("torch") is not None


class _NeedsTorch(pytest.File):
    """A test module that cannot be imported here: one skip, with the reason."""

    def collect(self) -> list[pytest.Item]:
        pytest.skip(NEEDS_TORCH)


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.File | None:
    if HAVE_TORCH:
        return None
    return _NeedsTorch.from_parent(parent, path=module_path)
