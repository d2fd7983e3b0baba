"""kvoffload.conformance: check any engine's offloading manager against the spec.

From the command line: ``kvoffload check TARGET``; from pytest:
``pytest --kvoffload-target=TARGET``; from Python::

    from kvoffload.conformance import check
    result = check("mypkg.offload:Manager", assume=["unique-keys"])
    result.raise_if_failed()      # PropertyViolation with the shrunk trace

Names are imported on first use, so importing this package (a reproducer does) pulls
in neither Hypothesis nor any target.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .errors import PropertyViolation, UsageError
    from .runner import CheckResult

__all__ = ["CheckResult", "PropertyViolation", "UsageError", "check"]


def check(
    target: Any,
    *,
    profile: str = "strict",
    policy: str = "lru",
    level: str = "any",
    assume: Iterable[str] = (),
    capacity: int | None = None,
    max_examples: int | None = None,
    steps: int | None = None,
    seed: int | None = None,
    adapter: str = "auto",
    call_timeout: float | None = None,
    database: str | None = None,
    stop_at_first: bool = False,
) -> CheckResult:
    """Check ``target`` (a TARGET string, or a manager class or factory) against the spec.

    ``database``: a folder for Hypothesis's example database (a failure found once
    replays first next time); None (the default) keeps none.

    raises: UsageError (bad option, unloadable target, no adapter fits)
    """
    from .config import CheckConfig
    from .runner import run_check
    from .targets import absolute_target

    config = CheckConfig.from_options(
        profile=profile, policy=policy, level=level, assume=assume, capacity=capacity,
        max_examples=max_examples, steps=steps, seed=seed, adapter=adapter,
        call_timeout=call_timeout, database=database, stop_at_first=stop_at_first,
        spelling="")
    if isinstance(target, str):
        return run_check(absolute_target(target), config)
    name = f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', target)}"
    return run_check(name, config, obj=target)


def __getattr__(name: str) -> Any:
    if name in ("PropertyViolation", "UsageError"):
        from . import errors

        return getattr(errors, name)
    if name == "CheckResult":
        from .runner import CheckResult

        return CheckResult
    raise AttributeError(f"module 'kvoffload.conformance' has no attribute {name!r}")
