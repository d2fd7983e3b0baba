"""The proofs tests' shared fixtures (conftest.py): one exploration per check."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from proofs.modelcheck.explorer import Result

RunCheck = Callable[..., Result]
"""The ``run_check`` fixture of conftest.py."""


def test_each_spelling_of_a_check_shares_one_exploration(
        run_check: RunCheck, explorations: Counter[tuple[str, str, bool]]) -> None:
    """``run_check(name)``, ``run_check(name, "tiny", False)`` and the keyword forms
    are one exploration: the cache once keyed on the arguments as written, and
    every TINY check was explored twice (test_explorer.py spelt it one way,
    test_recorded.py the other)."""
    results = [run_check("spec-lru"), run_check("spec-lru", "tiny"),
               run_check("spec-lru", "tiny", False), run_check("spec-lru", preset="tiny"),
               run_check("spec-lru", alone=False), run_check(name="spec-lru")]
    assert all(r is results[0] for r in results)
    assert explorations["spec-lru", "tiny", False] == 1
    assert max(explorations.values()) == 1
