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
    adapter: str = "auto",
    profile: str = "strict",
    policy: str = "lru",
    level: str = "any",
    eviction: str | None = None,
    fault: str = "none",
    assume: Iterable[str] = (),
    max_keys_per_call: int | None = None,
    capacity: int = 64,
    trace: str | None = None,
    max_examples: int = 300,
    steps: int = 150,
    seed: int | None = None,
    call_timeout: float = 10.0,
    stop_at_first: bool = False,
    database: str | None = None,
) -> CheckResult:
    """Check ``target`` (a TARGET string, or a manager class or factory) against the spec.

    The keywords are the suite's options as ``check()`` takes them: the table in
    :mod:`kvoffload.conformance.options` (and docs/conformance.md, made from it) says
    what each means; a test keeps this signature equal to it. ``max_keys_per_call=None``
    is the kind of target's default (1 for ``lmcache==``, else no limit), and so is
    ``eviction=None`` (``background`` for ``mooncake==``, else ``on-store``); ``database``:
    a folder for Hypothesis's example database (a failure found once replays first next
    time), None (the default) keeps none.

    raises: UsageError (bad option, unloadable target, no adapter fits)
    """
    given = {name: value for name, value in locals().items() if name != "target"}
    from .config import CheckConfig
    from .options import FrontEnd, parse_options
    from .runner import run_check
    from .targets import absolute_target

    config = CheckConfig.from_values(parse_options(given, FrontEnd.CHECK))
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
