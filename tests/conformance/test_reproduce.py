"""A reproducer's configuration goes through the one option parser (issue 9)."""

from __future__ import annotations

import pytest

from kvoffload.conformance.config import DEFAULT_MAX_EXAMPLES, CheckConfig, Level, Profile
from kvoffload.conformance.errors import UsageError
from kvoffload.conformance.reproduce import config_from
from kvoffload.spec import Policy


def test_a_reports_configuration_round_trips() -> None:
    config = CheckConfig(profile=Profile.SAFE, policy=Policy.ARC, level=Level.EXACT,
                         assume=("no-reset-in-flight",), capacity=3, max_examples=7,
                         call_timeout=2.5)
    again = config_from(config.describe())
    assert (again.profile, again.policy, again.level, again.assume, again.capacity,
            again.call_timeout) == (Profile.SAFE, Policy.ARC, Level.EXACT,
                                    ("no-reset-in-flight",), 3, 2.5)
    assert again.max_examples == DEFAULT_MAX_EXAMPLES  # a replay runs no search


def test_a_bad_value_is_a_usage_error_naming_the_option() -> None:
    with pytest.raises(UsageError, match="profile="):
        config_from({"profile": "bogus"})
    with pytest.raises(UsageError, match="capacity="):
        config_from({"capacity": "many"})
