"""The options table (kvoffload.conformance.options): every front end is made from it,
and one validation makes a bad value a usage error in each, in its own convention
(issue 23, item 2). The bad-value tests are made from the table, so a new option is
covered as soon as it is declared."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
from pathlib import Path

import pytest
from inprocess_suite import SUITE

from kvoffload.conformance import UsageError, check, pytest_plugin
from kvoffload.conformance.cli import main
from kvoffload.conformance.command.check_command import add_check_arguments
from kvoffload.conformance.config import CheckConfig, Level, Profile
from kvoffload.conformance.corpus.corpus_command import REPLAY_OPTIONS
from kvoffload.conformance.judge.lockstep import Lockstep
from kvoffload.conformance.options import (
    ASSUMPTION_NAMES,
    BY_NAME,
    EVERYWHERE,
    LEVELS,
    OPTIONS,
    POLICIES,
    PROFILES,
    FrontEnd,
    Kind,
    Option,
    options_markdown,
    options_of,
    parse_options,
)
from kvoffload.conformance.target import lmcache_loader
from kvoffload.conformance.target.isolation import IN_PROCESS
from kvoffload.conformance.target.targets import with_target_defaults
from kvoffload.spec import ASSUMPTIONS, Call, Op, Policy

assert SUITE  # imported before any in-process run (see inprocess_suite)
pytest_plugins = ["pytester"]

REFERENCE = "kvoffload.impl:OffloadManager"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"
A_FILE = "<a file>/sub"
"""Stands for a path under a regular file (no folder can be made there)."""
A_FOLDER = "<a folder>"
"""Stands for an existing folder (no file can be written there)."""


def bad_values(option: Option) -> list[object]:
    """Values each front end must refuse for ``option``, from its kind and bounds."""
    if option.kind in (Kind.CHOICE, Kind.NAMES):
        return ["bogus"]
    if option.kind is Kind.INT:
        assert option.low is not None
        return ["x", option.low - 1, *([] if option.high is None else [option.high + 1])]
    if option.kind is Kind.SECONDS:
        return ["x", "-1", "nan"]
    if option.kind is Kind.FLAG:
        return ["yes"]
    if option.kind is Kind.FOLDER:
        return [A_FILE]
    if option.kind is Kind.FILE:
        return [A_FOLDER]
    if option.kind is Kind.TRACE:
        return ["no-such-trace", "", "conversation:0"]
    return ["", "'unbalanced"]


def cases(front_end: FrontEnd) -> list[object]:
    """Every bad value of every option ``front_end`` takes; for the plugin (a pytest run
    each) the first of each option's: the others go through the same function. Of the
    plugin's, the default tier runs the first option of each kind (the parser is the
    kind's, :data:`options._PARSERS`); the others of that kind are in the wide tier, and
    every option's every bad value is judged through the same parse_options on the
    command line (test_a_bad_value_on_the_command_line_exits_2_with_one_line)."""
    plugin = front_end is FrontEnd.PLUGIN
    kinds: set[Kind] = set()
    params = []
    for option in options_of(front_end):
        marks = [pytest.mark.wide] if plugin and option.kind in kinds else []
        kinds.add(option.kind)
        params += [pytest.param(option.name, value, id=f"{option.name}={value!r}", marks=marks)
                   for value in bad_values(option)[:1 if plugin else None]]
    return params


def resolve(value: object, tmp_path: Path) -> object:
    if value == A_FILE:
        (tmp_path / "a-file").write_text("")
        return str(tmp_path / "a-file" / "sub")
    if value == A_FOLDER:
        return str(tmp_path)
    return value


def test_every_kind_has_bad_values() -> None:
    assert all(bad_values(option) for option in OPTIONS)


@pytest.mark.parametrize(("name", "value"), cases(FrontEnd.CLI))
def test_a_bad_value_on_the_command_line_exits_2_with_one_line(
    name: str, value: object, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(IN_PROCESS, "1")  # were the value taken, the run stays cheap
    flag = BY_NAME[name].flag(FrontEnd.CLI)
    argv = ["check", "--max-examples=1", "--steps=1", "--quiet",
            f"--report-dir={tmp_path / 'report'}", f"{flag}={resolve(value, tmp_path)}"]
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's own refusals (--quiet=yes)
        status = exit_.code  # type: ignore[assignment]  # argparse exits with an int
    assert status == 2
    err = capsys.readouterr().err
    assert err.startswith("kvoffload check: error: ")
    assert err.count("\n") == 1, err
    assert flag in err
    assert not (tmp_path / "report" / "report.json").exists()


@pytest.mark.parametrize(("name", "value"), cases(FrontEnd.PLUGIN))
def test_a_bad_plugin_value_is_pytests_usage_error_before_any_item(
    name: str, value: object, tmp_path: Path, pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(IN_PROCESS, "1")
    flag = BY_NAME[name].flag(FrontEnd.PLUGIN)
    report = tmp_path / "report"
    result = pytester.runpytest(
        f"--kvoffload-target={REFERENCE}", "--kvoffload-max-examples=1",
        "--kvoffload-steps=1", "--kvoffload-no-database", f"--kvoffload-report-dir={report}",
        f"{flag}={resolve(value, tmp_path)}", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert flag in result.stderr.str()
    assert not list(report.glob("*/report.json"))


@pytest.mark.parametrize(("name", "value"), cases(FrontEnd.CHECK))
def test_a_bad_keyword_of_check_raises_usage_error(
    name: str, value: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(IN_PROCESS, "1")
    keywords = {"max_examples": 1, "steps": 1, name: resolve(value, tmp_path)}
    with pytest.raises(UsageError, match=f"^{name}= "):
        check(REFERENCE, **keywords)  # type: ignore[arg-type]  # the wrong values are the test


def _cli_flags() -> set[str]:
    parser = argparse.ArgumentParser()
    add_check_arguments(parser)
    return {flag for action in parser._actions for flag in action.option_strings
            if flag.startswith("--")} - {"--help"}


class _Options:
    """Stands in for pytest's parser and option group: keeps each option's name."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def getgroup(self, *args: object, **kwargs: object) -> _Options:
        return self

    def addoption(self, name: str, *args: object, **kwargs: object) -> None:
        self.names.add(name)

    def addini(self, *args: object, **kwargs: object) -> None:
        pass


def _plugin_flags() -> set[str]:
    options = _Options()
    pytest_plugin.pytest_addoption(options)  # type: ignore[arg-type]  # a stand-in for pytest's parser
    return options.names - {"--kvoffload-target"}


def test_each_front_end_takes_exactly_the_tables_options() -> None:
    assert _cli_flags() == {o.flag(FrontEnd.CLI) for o in options_of(FrontEnd.CLI)}
    assert _plugin_flags() == {o.flag(FrontEnd.PLUGIN) for o in options_of(FrontEnd.PLUGIN)}
    keywords = dict(inspect.signature(check).parameters)
    keywords.pop("target")
    assert set(keywords) == {o.name for o in options_of(FrontEnd.CHECK)}
    for name, parameter in keywords.items():
        option = BY_NAME[name]
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
        assert parameter.default == (None if option.by_target else option.default), name


def test_the_config_holds_the_options_the_table_marks_config() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(CheckConfig)}
    fields.pop("target_defaults")  # not an option: which options the target chose
    assert set(fields) == {o.name for o in OPTIONS if o.config}
    for name, default in fields.items():
        option = BY_NAME[name]
        expected = None if option.by_target else option.default
        assert getattr(default, "value", default) == expected, name


def test_the_three_front_ends_share_every_option_but_those_marked_with_a_reason() -> None:
    shared = {o.name for o in OPTIONS if o.front_ends == EVERYWHERE}
    for front_end in FrontEnd:
        own = {o.name for o in options_of(front_end)} - shared
        assert all(BY_NAME[name].elsewhere for name in own), front_end
    assert "max_keys_per_call" in shared  # missing from the plugin and check() before
    assert all(o.elsewhere == "" for o in OPTIONS if o.front_ends == EVERYWHERE)


def test_the_choices_are_the_specs_and_the_configs() -> None:
    assert tuple(p.value for p in Policy) == POLICIES
    assert tuple(sorted(ASSUMPTIONS)) == ASSUMPTION_NAMES
    assert tuple(p.value for p in Profile) == PROFILES
    assert tuple(lv.value for lv in Level) == LEVELS


def test_a_kind_of_target_sets_only_options_the_table_lets_it() -> None:
    assert set(lmcache_loader.DEFAULTS) <= {o.name for o in OPTIONS if o.by_target}


def test_the_docs_table_is_made_from_the_options() -> None:
    text = DOCS.read_text(encoding="utf-8")
    start = "<!-- options table: generated from kvoffload/conformance/options.py, do not edit -->\n"
    table = text[text.index(start) + len(start):text.index("<!-- end of options table -->")]
    assert table == options_markdown(), "regenerate: python -m kvoffload.conformance.options"


def test_not_given_is_the_tables_default_and_none_for_a_targets_own() -> None:
    values = parse_options({}, FrontEnd.CHECK)
    assert values["capacity"] == BY_NAME["capacity"].default
    assert values["max_keys_per_call"] is None  # the kind of target decides
    assert CheckConfig.from_values(values) == CheckConfig()


def test_an_unknown_option_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="check\\(\\) takes no option shards"):
        parse_options({"shards": 2}, FrontEnd.CHECK)


# --- the defects measured in issue 23 ------------------------------------------------


@pytest.mark.parametrize("option", ["--policy=arc", "--level=exact", "--adapter=native"])
def test_the_self_test_refuses_what_it_would_ignore(
    option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 23: ``--self-test --policy arc`` ran the catalogue and ignored --policy."""
    assert main(["check", "--self-test", option, "--quiet",
                 f"--report-dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"--self-test takes no {option.split('=')[0]}" in err
    assert not (tmp_path / "report.json").exists()


def test_the_self_test_takes_the_budget_options() -> None:
    values = parse_options({"self_test": True, "max_examples": "5", "seed": "3",
                            "max_keys_per_call": "1"}, FrontEnd.CLI, ["self_test",
                           "max_examples", "seed", "max_keys_per_call", "policy"])
    assert (values["max_examples"], values["seed"], values["max_keys_per_call"]) == (5, 3, 1)


def test_more_shards_than_examples_is_a_usage_error(pytester: pytest.Pytester) -> None:
    """Issue 23: --kvoffload-shards 100 with 60 examples failed 100 items."""
    result = pytester.runpytest(
        f"--kvoffload-target={REFERENCE}", "--kvoffload-shards=100",
        "--kvoffload-max-examples=60", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--kvoffload-shards 100 is more than "
                                 "--kvoffload-max-examples 60: every shard needs one*"])


ONE_KEY = """\
from kvoffload.impl import OffloadManager


class OneKeyAtATime(OffloadManager):
    \"\"\"Stores one key per call, as LMCache's backends do: more is a crash.\"\"\"

    def prepare_store(self, keys):
        keys = list(keys)
        if len(keys) > 1:
            raise RuntimeError("one key per call")
        return super().prepare_store(keys)
"""


@pytest.mark.parametrize("limit", [None, "1"])
def test_max_keys_per_call_reaches_the_plugins_check(
    limit: str | None, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 23: the plugin had no --kvoffload-max-keys-per-call. A small budget: the
    option's reaching the check is the subject; without it the target fails on its
    first call of two keys (a few calls in), with it no call has two."""
    monkeypatch.setenv(IN_PROCESS, "1")
    (pytester.path / "onekey.py").write_text(ONE_KEY)
    given = [] if limit is None else [f"--kvoffload-max-keys-per-call={limit}"]
    result = pytester.runpytest(
        "--kvoffload-target=onekey.py:OneKeyAtATime", "--kvoffload-max-examples=5",
        "--kvoffload-steps=20", "--kvoffload-seed=5", "--kvoffload-no-database", *given,
        "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1) if limit else result.assert_outcomes(failed=1)
    report = json.loads(next(pytester.path.glob("kvoffload-report/*/report.json")).read_text())
    assert report["configuration"]["max_keys_per_call"] == (1 if limit else 0)


def test_max_keys_per_call_reaches_checks_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 23: check() had no max_keys_per_call. Every call counts, the drain's too
    (it stored every free slot in one call, and completed every copy in one)."""
    monkeypatch.setenv(IN_PROCESS, "1")
    seen: list[Call] = []
    step = Lockstep.step

    def recording(self: Lockstep, call: Call) -> object:
        seen.append(call)
        return step(self, call)

    monkeypatch.setattr(Lockstep, "step", recording)
    result = check(REFERENCE, max_keys_per_call=1, max_examples=30, steps=40, seed=7)
    assert result.verdict == "conforms"
    assert result.config.max_keys_per_call == 1
    assert result.config.target_defaults == ()
    keyed = [c for c in seen if c.op not in (Op.RESET_CACHE, Op.TAKE_EVENTS)]
    assert keyed
    assert max(len(c.keys) for c in keyed) == 1


def _replay_cases() -> list[object]:
    return [pytest.param(name, value, id=f"{name}={value!r}")
            for name in REPLAY_OPTIONS for value in bad_values(BY_NAME[name])]


@pytest.mark.parametrize(("name", "value"), _replay_cases())
def test_corpus_replay_judges_its_options_by_the_table(
    name: str, value: object, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """``kvoffload corpus replay`` takes some of check's options: declared and judged by
    the same table, a bad value is a usage error (exit 2) before any case is read."""
    flag = BY_NAME[name].flag(FrontEnd.CLI)
    argv = ["corpus", "replay", str(tmp_path / "no-corpus"), REFERENCE,
            f"--report-dir={tmp_path / 'report'}", f"{flag}={resolve(value, tmp_path)}"]
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's own refusals (--in-process=yes)
        status = exit_.code  # type: ignore[assignment]  # argparse exits with an int
    assert status == 2
    err = capsys.readouterr().err
    assert flag in err
    assert "cannot read the corpus" not in err
    assert not (tmp_path / "report" / "report.json").exists()


def test_corpus_replay_takes_no_budget_option() -> None:
    assert set(REPLAY_OPTIONS) <= {o.name for o in options_of(FrontEnd.CLI)}
    assert not {"max_examples", "steps", "capacity", "seed"} & set(REPLAY_OPTIONS)


@pytest.mark.parametrize("front_end", list(FrontEnd))
def test_an_lmcache_target_chooses_the_limit_no_front_end_was_given(
    front_end: FrontEnd,
) -> None:
    """The table marks max_keys_per_call ``by_target``: not given in any front end, an
    lmcache== target sets it (and says so); given, even 0, the user's value stands."""
    unset = CheckConfig.from_values(parse_options({}, front_end, ["max_keys_per_call"]))
    chosen = with_target_defaults("lmcache==0.5.6", unset)
    assert (chosen.max_keys_per_call, chosen.target_defaults) == (1, ("max_keys_per_call",))
    given = CheckConfig.from_values(
        parse_options({"max_keys_per_call": 0}, front_end, ["max_keys_per_call"]))
    kept = with_target_defaults("lmcache==0.5.6", given)
    assert (kept.max_keys_per_call, kept.target_defaults) == (0, ())
