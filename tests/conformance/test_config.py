"""CheckConfig.from_options: the one parser from option values to a configuration,
used by the CLI, the pytest plugin and check(); every bad value is a UsageError."""

from __future__ import annotations

import pytest

from kvoffload.conformance import UsageError, check
from kvoffload.conformance.config import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_CAPACITY,
    MAX_CAPACITY,
    CheckConfig,
    Level,
    Profile,
)
from kvoffload.spec import Policy


def test_strings_and_typed_values_give_the_same_configuration() -> None:
    from_strings = CheckConfig.from_options(
        profile="safe", policy="arc", level="exact", assume=["unique-keys"], capacity="3",
        max_examples="7", steps="9", seed="11", adapter="native", call_timeout="2.5")
    typed = CheckConfig.from_options(
        profile=Profile.SAFE, policy=Policy.ARC, level=Level.EXACT, assume=("unique-keys",),
        capacity=3, max_examples=7, steps=9, seed=11, adapter="native", call_timeout=2.5)
    assert from_strings == typed
    assert (typed.capacity, typed.max_examples, typed.steps, typed.seed) == (3, 7, 9, 11)


def test_none_means_the_default() -> None:
    config = CheckConfig.from_options(capacity=None, call_timeout=None)
    assert config.capacity == DEFAULT_CAPACITY
    assert config.call_timeout == DEFAULT_CALL_TIMEOUT
    assert config == CheckConfig()


@pytest.mark.parametrize(("options", "message"), [
    ({"profile": "bogus"}, "--profile must be one of strict, safe; got 'bogus'"),
    ({"policy": "fifo"}, "--policy must be one of lru, arc"),
    ({"level": "some"}, "--level must be one of any, exact"),
    ({"adapter": "grpc"}, "--adapter must be one of auto, native"),
    ({"assume": ["no-bugs"]}, "--assume takes"),
    ({"capacity": "four"}, "--capacity takes a whole number"),
    ({"capacity": MAX_CAPACITY + 1}, f"--capacity must be 1 to {MAX_CAPACITY}"),
    ({"max_examples": "0"}, "--max-examples must be 1 to 10000000; got '0'"),
    ({"seed": "x"}, "--seed takes a whole number"),
    ({"call_timeout": "-1"}, "--call-timeout must be a number of seconds >= 0"),
    ({"call_timeout": "nan"}, "--call-timeout must be a number of seconds >= 0"),
])
def test_bad_values_are_usage_errors_naming_the_option(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        CheckConfig.from_options(**options)  # type: ignore[arg-type]  # the wrong values are the test


def test_messages_use_the_callers_spelling() -> None:
    with pytest.raises(UsageError, match="--kvoffload-profile must be"):
        CheckConfig.from_options(profile="bogus", spelling="--kvoffload-")
    with pytest.raises(UsageError, match="profile= must be"):
        CheckConfig.from_options(profile="bogus", spelling="")


def test_check_raises_usage_error_not_value_error() -> None:
    """Issue 9: check(profile="bogus") raised ValueError, not the promised UsageError."""
    with pytest.raises(UsageError, match="profile= must be one of strict, safe"):
        check("kvoffload.impl:OffloadManager", profile="bogus")


def test_a_sized_configuration_is_made_once_and_is_the_configuration_on_that_tier() -> None:
    from dataclasses import replace

    config = CheckConfig(seed=3, capacity=64)
    assert config.sized(64) is config
    small = config.sized(5)
    assert small == replace(config, capacity=5)
    assert config.sized(5) is small
    # what is kept is not part of the configuration: equal, hashed and described alike
    assert config == CheckConfig(seed=3, capacity=64)
    assert hash(config) == hash(CheckConfig(seed=3, capacity=64))
    assert config.describe() == CheckConfig(seed=3, capacity=64).describe()
    assert replace(config, seed=4).sized(5).seed == 4
