"""pytest plugin (entry point ``pytest11: kvoffload``): the suite as test items.

``pytest --kvoffload-target=TARGET [--kvoffload-...]`` adds one test item per TARGET
(the option repeats); it fails with the violated property, the shrunk trace and the
spec-versus-target table, and writes report.json and a reproducer under
``--kvoffload-report-dir``. Without ``--kvoffload-target`` the plugin adds nothing and
imports nothing heavy, so it costs nothing in other projects' test runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_OPTIONS = ("adapter", "profile", "policy", "level", "assume", "capacity", "max_examples",
            "steps", "seed", "report_dir")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kvoffload", "kvoffload conformance suite")
    group.addoption("--kvoffload-target", action="append", default=[], metavar="TARGET",
                    help="check TARGET (module:attr, path/to/file.py:attr or vllm==X) "
                         "against the spec as a test item; repeatable")
    group.addoption("--kvoffload-adapter", default="auto",
                    help="auto, native, vllm-int, vllm-bool or vllm-enum (default: auto)")
    group.addoption("--kvoffload-profile", default="strict", help="strict or safe")
    group.addoption("--kvoffload-policy", default="lru", help="lru or arc")
    group.addoption("--kvoffload-level", default="any", help="any or exact")
    group.addoption("--kvoffload-assume", action="append", default=[], metavar="NAME",
                    help="an assumption the target relies on (repeatable)")
    group.addoption("--kvoffload-capacity", type=int, default=None,
                    help="the largest tier in slots (default 4)")
    group.addoption("--kvoffload-max-examples", type=int, default=None,
                    help="examples per target (default 300)")
    group.addoption("--kvoffload-steps", type=int, default=None,
                    help="calls per example (default 150)")
    group.addoption("--kvoffload-seed", type=int, default=None, help="random seed")
    group.addoption("--kvoffload-report-dir", default="kvoffload-report",
                    help="where report.json and reproducers go (one folder per target)")


class ConformanceFailure(Exception):
    """Raised by a conformance item: the counterexample, already formatted."""


class ConformanceItem(pytest.Item):
    """One TARGET checked under the session's --kvoffload-* configuration."""

    def __init__(self, *, target: str, options: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.target = target
        self.options = options

    def runtest(self) -> None:
        from kvoffload.spec import Policy

        from .config import (
            DEFAULT_CAPACITY,
            DEFAULT_MAX_EXAMPLES,
            DEFAULT_STEPS,
            CheckConfig,
            Level,
            Profile,
        )
        from .errors import UsageError
        from .report import configuration_text, counterexample_text, write_check_report
        from .runner import run_check

        o = self.options
        try:
            config = CheckConfig(
                profile=Profile(o["profile"]), policy=Policy(o["policy"]),
                level=Level(o["level"]), assume=tuple(o["assume"]),
                capacity=o["capacity"] or DEFAULT_CAPACITY,
                max_examples=o["max_examples"] or DEFAULT_MAX_EXAMPLES,
                steps=o["steps"] or DEFAULT_STEPS, seed=o["seed"], adapter=o["adapter"])
            result = run_check(self.target, config)
        except (UsageError, ValueError) as error:
            raise ConformanceFailure(f"cannot check {self.target}: {error}") from error
        folder = Path(o["report_dir"]) / _folder_name(self.target)
        _, reproducer = write_check_report(result, folder)
        self.user_properties.append(("verdict", result.verdict))
        if result.violation is not None:
            raise ConformanceFailure(
                configuration_text(result) + "\n\n"
                + counterexample_text(result.violation, str(reproducer) if reproducer else None))
        if result.error is not None:
            raise ConformanceFailure(f"the run did not finish: {result.error}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        if isinstance(excinfo.value, ConformanceFailure):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return Path("kvoffload"), None, f"kvoffload conformance: {self.target}"


def _folder_name(target: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in target)[-80:]


def _items(session: pytest.Session) -> Iterator[ConformanceItem]:
    config = session.config
    options = {name: config.getoption(f"--kvoffload-{name.replace('_', '-')}")
               for name in _OPTIONS}
    for target in config.getoption("--kvoffload-target"):
        yield ConformanceItem.from_parent(session, name=f"kvoffload[{target}]", target=target,
                                          options=options)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    if config.getoption("--kvoffload-target"):
        items.extend(_items(session))
