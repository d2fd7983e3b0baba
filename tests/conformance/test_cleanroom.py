"""A manager written from the docs alone conforms (tests/conformance/cleanroom/).

``cleanroom/cleanroom_mgr.py`` was written by session 41's clean-room helper from
README.md and docs/ only, as an engine developer would; it shows a user what the native
API asks for, and it keeps the docs honest: a change of the judge that fails it is a
change the docs must state (or a bug). It is checked as a user checks a manager: a file
TARGET, in a host process of its own, at ``--level exact`` under both policies.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvoffload.conformance.command.runner import run_check
from kvoffload.conformance.config import CheckConfig, Level
from kvoffload.spec import Policy

TARGET = f"{Path(__file__).resolve().parent / 'cleanroom' / 'cleanroom_mgr.py'}:Manager"


@pytest.mark.wide
@pytest.mark.parametrize("policy", [Policy.LRU, Policy.ARC], ids=["lru", "arc"])
def test_the_cleanroom_manager_conforms(policy: Policy) -> None:
    config = CheckConfig(policy=policy, level=Level.EXACT, max_examples=100, steps=150,
                         seed=41)
    result = run_check(TARGET, config)
    assert result.verdict == "conforms", (result.failures, result.error)
