"""pytest plugin (entry point ``pytest11: kvoffload``): the suite as test items.

``pytest --kvoffload-target=TARGET [--kvoffload-...]`` adds test items per TARGET (the
option repeats); an item fails with the violated property, the shrunk trace and the
spec-versus-target table, and writes report.json and a reproducer under
``--kvoffload-report-dir``. Without ``--kvoffload-target`` the plugin adds nothing and
imports nothing heavy, so it costs nothing in other projects' test runs.

Scale-out: ``--kvoffload-shards N`` splits each target's budget (``--kvoffload-max-examples``)
into N items with disjoint seeds, so ``pytest -n auto`` (pytest-xdist) runs one target
on every core (or host). The controlling process (the only one without xdist) gathers
every item's outcome and, at the end of the session, writes one merged report.json per
sharded target and, with ``--kvoffload-junit``, one JUnit case per target.

Items are ordinary pytest items, made by a collector (:class:`TargetFile`) during
collection. Their node ids are rooted at the file that names the target:
``pyproject.toml::kvoffload[TARGET]`` for a target named on the command line (or in
addopts, or in the ``kvoffload_targets`` ini key) under that ini file (the root
directory's conftest.py, or the name ``kvoffload-targets`` when the run has neither),
``tests/conftest.py::kvoffload[TARGET]`` for one a conftest names in its
``kvoffload_targets`` list; ``kvoffload[TARGET#shard2of4]`` when sharded. They are stable
across runs, so ``--co``, ``-k``, selection by node id, ``--lf``, ``--ff``, ``--sw`` and
xdist's ``--dist`` modes treat them as any other test.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from .options import DATABASE_FOLDER, FrontEnd, add_arguments, options_of, parse_options

_OPTIONS_KEY = pytest.StashKey[dict[str, Any]]()
_ANCHOR_KEY = pytest.StashKey[Path]()
_RECORD = "kvoffload"
"""The user property each item leaves for the controlling process (a JSON string)."""
MERGED_SCHEMA = "kvoffload-conformance-shards/1"


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--kvoffload-target`` (repeatable), then the options the table
    (:mod:`.options`) gives the plugin, every one with no default of pytest's own (None:
    not given), so that :func:`~.options.parse_options` alone judges them."""
    group = parser.getgroup("kvoffload", "kvoffload conformance suite")
    group.addoption("--kvoffload-target", action="append", default=[], metavar="TARGET",
                    help="check TARGET (module:attr, path/to/file.py:attr, vllm==X or "
                         "lmcache==X) against the spec as a test item; repeatable")
    add_arguments(group.addoption, FrontEnd.PLUGIN)
    parser.addini("kvoffload_targets", type="linelist", default=[],
                  help="targets to check, one a line (as --kvoffload-target)")


class ConformanceFailure(Exception):
    """Raised by a conformance item: the counterexample, already formatted."""


class ConformanceItem(pytest.Item):
    """One TARGET (or one shard of its budget) checked under the session's
    --kvoffload-* configuration."""

    def __init__(self, *, target: str, options: dict[str, Any], shard: int = 0,
                 shards: int = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.target = target
        self.options = options
        self.shard = shard
        self.shards = shards

    def runtest(self) -> None:
        from .command.report import configuration_text, failures_text, write_check_report
        from .command.runner import run_check
        from .errors import UsageError
        from .target.targets import absolute_target

        folder = Path(self.options["report_dir"]) / folder_name(self.target)
        if self.shards > 1:
            folder = folder / f"shard-{self.shard + 1}-of-{self.shards}"
        try:
            config = self._config()
            result = run_check(absolute_target(self.target), config)
        except UsageError as error:
            self._record({"verdict": "error", "error": str(error)}, None)
            raise ConformanceFailure(f"cannot check {self.target}: {error}") from error
        report, _ = write_check_report(result, folder)
        self.user_properties.append(("verdict", result.verdict))
        self._record(_shard_record(result, folder), report)
        if result.violation is not None:
            raise ConformanceFailure(
                configuration_text(result) + "\n\n"
                + failures_text(result, folder))
        if result.error is not None:
            raise ConformanceFailure(f"the run did not finish: {result.error}")
        if result.verdict == "interrupted":
            raise KeyboardInterrupt

    def _config(self) -> Any:
        return check_config(self.options, self.shard, self.shards)

    def _record(self, record: dict[str, Any], report: Path | None) -> None:
        record.update(target=self.target, shard=self.shard + 1, shards=self.shards,
                      report=None if report is None else str(report.resolve()))
        self.user_properties.append((_RECORD, json.dumps(record)))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        if isinstance(excinfo.value, ConformanceFailure):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return Path("kvoffload"), None, f"kvoffload conformance: {self.name}"


def check_config(options: dict[str, Any], shard: int, shards: int) -> Any:
    """Shard ``shard``'s CheckConfig, from the session's options (judged once by
    :func:`~.options.parse_options`, the command line's validation too)."""
    from dataclasses import replace

    from .config import CheckConfig

    database = None if options["no_database"] else (
        Path(options["report_dir"]) / DATABASE_FOLDER)
    config = CheckConfig.from_values({**options, "seed": None, "database": database})
    total = config.max_examples
    share = total // shards + (1 if shard < total % shards else 0)
    return replace(config, max_examples=share, seed=shard_seed(options["seed"], shard))


def shard_seed(base: int | None, shard: int) -> int | None:
    """Shard ``shard``'s seed: ``base + shard`` (distinct for distinct shards)."""
    return None if base is None else (base + shard) % 2**64


def folder_name(target: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in target)[-80:]


def _shard_record(result: Any, folder: Path) -> dict[str, Any]:
    """What the controlling process needs of one item's run (JSON-able)."""
    from .command.report import reproducer_path

    failures = [{"property": f.violation.prop, "message": f.violation.message,
                 "calls": len(f.violation.trace), "flaky": f.flaky,
                 "reproduced": f"{f.reproduced}/{f.replays}",
                 "reproducer": str(reproducer_path(folder, f.violation).resolve())}
                for f in result.failures]
    return {"verdict": result.verdict, "seed": result.config.seed,
            "configuration": result.config.describe(), "examples": result.examples,
            "steps": result.steps, "seconds": round(result.seconds, 3),
            "failures": failures, "error": result.error}


def _base_seed(config: pytest.Config, given: int | None) -> int | None:
    """--kvoffload-seed (``given``), else --hypothesis-seed, else (under xdist) one
    every worker derives alike from the run's id, so shards stay disjoint; else None
    (fresh)."""
    if given is not None:
        return given
    hypothesis_seed = _hypothesis_seed(config)
    if hypothesis_seed is not None:
        return hypothesis_seed
    workerinput = getattr(config, "workerinput", None)
    if isinstance(workerinput, dict) and "testrunuid" in workerinput:
        return _digest(str(workerinput["testrunuid"]))
    return None


def _hypothesis_seed(config: pytest.Config) -> int | None:
    try:
        value = config.getoption("hypothesis_seed")
    except ValueError:  # Hypothesis's pytest plugin is not loaded
        return None
    if value is None:
        return None
    text = str(value)
    return int(text) if text.isdigit() else _digest(text)


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


def _session_options(config: pytest.Config) -> dict[str, Any]:
    """The --kvoffload-* options every item of the session shares, judged once by
    :func:`~.options.parse_options`: a bad value is pytest's usage error (exit 4) before
    any item runs, with the message the command line gives (spelled ``--kvoffload-``)."""
    from .errors import UsageError

    options: dict[str, Any] | None = config.stash.get(_OPTIONS_KEY, None)
    if options is None:
        given = {option.name: config.getoption(option.flag(FrontEnd.PLUGIN))
                 for option in options_of(FrontEnd.PLUGIN)}
        try:
            options = parse_options(given, FrontEnd.PLUGIN)
        except UsageError as error:
            raise pytest.UsageError(str(error)) from error
        options["seed"] = _base_seed(config, options["seed"])
        if options["seed"] is None and options["shards"] > 1:
            options["seed"] = random.SystemRandom().randrange(2**32)
        config.stash[_OPTIONS_KEY] = options
    return options


class TargetFile(pytest.File):
    """The targets one file names: the ini file (for ``--kvoffload-target`` and the
    ``kvoffload_targets`` ini key) or a ``conftest.py`` (its ``kvoffload_targets``
    list). Its items' node ids are rooted there: ``pyproject.toml::kvoffload[TARGET]``."""

    def __init__(self, *, targets: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.targets = targets

    def collect(self) -> Iterator[ConformanceItem]:
        options = _session_options(self.config)
        shards = int(options["shards"])
        for target in self.targets:
            for shard in range(shards):
                name = f"kvoffload[{target}]" if shards == 1 else (
                    f"kvoffload[{target}#shard{shard + 1}of{shards}]")
                # The node id is given as text: pytest 9.2 parses it into its name
                # and its [params], as it does for the ids --lf stores in its cache
                # (a name with brackets made by .child() would never match them).
                yield ConformanceItem.from_parent(self, name=name, target=target,
                                                  options=options, shard=shard,
                                                  shards=shards,
                                                  nodeid=f"{self.nodeid}::{name}")


def _named_targets(config: pytest.Config) -> tuple[str, ...]:
    """The targets the command line (addopts included) and the ini file name."""
    given = [*config.getoption("--kvoffload-target"), *config.getini("kvoffload_targets")]
    return tuple(dict.fromkeys(str(target).strip() for target in given if str(target).strip()))


VIRTUAL_ANCHOR = "kvoffload-targets"
"""Where the named targets' items are rooted when the run has neither an ini file nor
a root conftest.py: a name under the root directory that is no file (so such an item
cannot be picked by its node id; -k, --lf, --ff and --sw still work)."""


def _anchor(config: pytest.Config) -> Path:
    """The file the named targets' items are rooted at: the ini file, else the root
    directory's conftest.py, else :data:`VIRTUAL_ANCHOR`."""
    anchor: Path | None = config.stash.get(_ANCHOR_KEY, None)
    if anchor is None:
        if config.inipath is not None:
            anchor = config.inipath
        elif (config.rootpath / "conftest.py").is_file():
            anchor = config.rootpath / "conftest.py"
        else:
            anchor = config.rootpath / VIRTUAL_ANCHOR
        config.stash[_ANCHOR_KEY] = anchor
    return anchor


def _conftest_targets(config: pytest.Config, path: Path) -> tuple[str, ...]:
    """A conftest.py's ``kvoffload_targets`` (a list of TARGET strings)."""
    module = config.pluginmanager.get_plugin(str(path))
    value = getattr(module, "kvoffload_targets", None)
    if value is None:
        return ()
    if isinstance(value, str) or not all(isinstance(target, str) for target in value):
        raise pytest.UsageError(f"{path}: kvoffload_targets must be a list of TARGET "
                                f"strings (module:attr, path.py:attr or vllm==X); got {value!r}")
    return tuple(dict.fromkeys(value))


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> TargetFile | None:
    config = parent.config
    targets: tuple[str, ...] = ()
    if file_path.name == "conftest.py":
        targets = _conftest_targets(config, file_path)
    named = _named_targets(config)
    if named and file_path == _anchor(config) and parent.session.isinitpath(file_path):
        # Named on the command line (pytest pyproject.toml::kvoffload[T]): collected here.
        targets = (*named, *(t for t in targets if t not in named))
    if not targets:
        return None
    return TargetFile.from_parent(parent, path=file_path, targets=targets)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """The ini file is rarely among the paths pytest collects (testpaths): the session
    collects its TargetFile itself, unless the run names the ini file or picks
    particular tests (``path::name``) elsewhere."""
    report = yield
    if isinstance(collector, pytest.Session) and report.passed:
        config = collector.config
        named = _named_targets(config)
        if named:
            anchor = _anchor(config)
            picked = any("::" in str(arg) for arg in config.args)
            if not collector.isinitpath(anchor) and not picked:
                report.result.append(
                    TargetFile.from_parent(collector, path=anchor, targets=named))
    return report


def pytest_configure(config: pytest.Config) -> None:
    if _named_targets(config):
        _session_options(config)
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(Merger(config), "kvoffload-merger")


class Merger:
    """In the controlling process: every item's outcome, merged per target at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.records: dict[str, list[dict[str, Any]]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for name, value in report.user_properties:
            if name == _RECORD and isinstance(value, str):
                record = json.loads(value)
                self.records.setdefault(record["target"], []).append(record)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.records and not self.config.getoption("--kvoffload-junit"):
            return  # no target ran: import nothing (this runs in every pytest session)
        from .command.report import junit_xml

        # Judged at configuration when a target is named; when none is, only --junit
        # matters (an empty JUnit file), and nothing else is judged.
        options = self.config.stash.get(_OPTIONS_KEY, None) or {
            "report_dir": "", "junit": self.config.getoption("--kvoffload-junit")}
        report_dir = Path(options["report_dir"])
        cases: list[tuple[str, str, str | None, str | None, float]] = []
        for target, records in self.records.items():
            merged = merge(target, records)
            if merged["shards"] > 1:
                folder = report_dir / folder_name(target)
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "report.json").write_text(json.dumps(merged, indent=2) + "\n",
                                                    encoding="utf-8")
            cases.append((target, "kvoffload", _failure_text(merged), None,
                          merged["seconds"]))
        if options["junit"] is not None:
            path = Path(options["junit"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(junit_xml("kvoffload-conformance", cases), encoding="utf-8")


def merge(target: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """One target's verdict from its shards' records: fails if any shard failed, error
    if any could not run, interrupted if any was stopped, else conforms."""
    records = sorted(records, key=lambda r: int(r["shard"]))
    verdicts = {r["verdict"] for r in records}
    shards = int(records[0]["shards"])
    verdict = next((v for v in ("fails", "error", "interrupted") if v in verdicts),
                   "conforms")
    if verdict == "conforms" and len(records) < shards:
        verdict = "incomplete"
    configuration = dict(records[0].get("configuration") or {})
    configuration.pop("seed", None)
    configuration["max_examples"] = sum(
        int((r.get("configuration") or {}).get("max_examples", 0)) for r in records)
    return {
        "schema": MERGED_SCHEMA,
        "target": target,
        "verdict": verdict,
        "configuration": configuration,
        "shards": shards,
        "shards_run": len(records),
        "examples": sum(int(r.get("examples", 0)) for r in records),
        "steps": sum(int(r.get("steps", 0)) for r in records),
        "seconds": max((float(r.get("seconds", 0.0)) for r in records), default=0.0),
        "runs": [{key: r.get(key) for key in ("shard", "seed", "verdict", "examples", "steps",
                                                "seconds", "failures", "error", "report")}
                 for r in records],
    }


def _failure_text(merged: dict[str, Any]) -> str | None:
    if merged["verdict"] in ("conforms",):
        return None
    lines = [f"{merged['target']}: {merged['verdict']}"]
    for run in merged["runs"]:
        for failure in run.get("failures") or []:
            lines.append(f"shard {run['shard']} (seed {run['seed']}): property "
                         f"{failure['property']!r}: {failure['message']}")
        if run.get("error"):
            lines.append(f"shard {run['shard']}: {run['error']}")
    return "\n".join(lines)
