"""A reproducer's configuration goes through the one option parser (issue 9)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest

from kvoffload.conformance import reproduce as replaying
from kvoffload.conformance.config import DEFAULT_MAX_EXAMPLES, CheckConfig, Level, Profile
from kvoffload.conformance.errors import UsageError
from kvoffload.conformance.reproduce import config_from, reproduce
from kvoffload.spec import Eviction, Policy


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


def test_a_replay_takes_the_kind_of_targets_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (two Mooncake tests failed at load 8, not at load 2): reproduce() left
    an option the configuration does not name unset, and the judge read ``eviction``
    None as on-store, while ``kvoffload check`` gives a ``mooncake==`` target its default,
    background; so a replay judged the master's background eviction a failure that the
    check observes as D14's transition. A replay now takes the defaults the check
    takes; an option named in the configuration still wins."""
    seen: list[CheckConfig] = []

    @contextmanager
    def session(target: str, config: CheckConfig, in_process: bool) -> Iterator[Any]:
        seen.append(config)
        yield SimpleNamespace(make_adapter=lambda capacity: None)

    monkeypatch.setattr(replaying, "target_session", session)
    monkeypatch.setattr(replaying, "replay", lambda *args, **kwargs: None)
    reproduce("mooncake==0.3.13.post1", {"capacity": 1}, [])
    reproduce("mooncake==0.3.13.post1", {"capacity": 1, "eviction": "on-store"}, [])
    reproduce("kvoffload.conformance.selftest.mutants:LookupPendingAsMiss", {}, [])
    assert [config.eviction for config in seen] == [
        Eviction.BACKGROUND, Eviction.ON_STORE, Eviction.ON_STORE]
    assert seen[0].target_defaults == ("eviction",)  # the report's header says whose
