"""Shared fixtures for the proofs tests: the repository root on the path, cached runs.

``proofs/`` is a directory of tools run from the repository root, not an installed
package; ``python -m pytest`` already has the root on the path, plain ``pytest`` may not.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from proofs.modelcheck.bounds import PRESETS  # noqa: E402 - after the root goes on sys.path
from proofs.modelcheck.checks import CHECKS_BY_NAME, laws_only  # noqa: E402 - after the root goes on sys.path
from proofs.modelcheck.explorer import Result, explore  # noqa: E402 - after the root goes on sys.path

RunCheck = Callable[..., Result]


@cache
def _run_check(name: str, preset: str = "tiny", alone: bool = False) -> Result:
    check = CHECKS_BY_NAME[name]
    return explore((laws_only(check) if alone else check).setup, PRESETS[preset])


@pytest.fixture(scope="session")
def run_check() -> RunCheck:
    """``run_check(name, preset="tiny", alone=False)``: one exploration per check, preset
    and mode (``alone``: the laws alone, ``--laws-only``) per test session, shared by the
    tests that read its result."""
    return _run_check
