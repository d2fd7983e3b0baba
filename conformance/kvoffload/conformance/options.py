"""The conformance suite's options, declared once.

:data:`OPTIONS` is the one table (name, kind, default, help, bounds or choices, and
which front ends take it). Every front end is made from it: ``kvoffload check``'s flags
(:func:`add_arguments`), the pytest plugin's ``--kvoffload-*`` options (the same
function, on pytest's option group), the keywords of
:func:`kvoffload.conformance.check` (a test keeps its signature equal to the table) and
the fields of :class:`~.config.CheckConfig` (the options the table marks ``config``).
:func:`parse_options` is the one validation: a bad value is a
:class:`~.errors.UsageError` naming the option as that front end spells it, which the
command line turns into exit 2, the plugin into pytest's usage error (exit 4) and
``check()`` raises as it is.

Standard library only, and nothing else of the suite at import time: the pytest plugin
imports this module in every pytest session, target or not (``kvoffload.spec`` and the
error classes are imported when a value is bad). The choices that the spec names
(policies, assumptions) are spelled out here; a test keeps them equal to the spec's.
"""

from __future__ import annotations

import enum
import math
import os
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn


class FrontEnd(enum.Enum):
    """Where options are given, each with its own spelling and its own usage error."""

    CLI = "kvoffload check"
    PLUGIN = "pytest plugin"
    CHECK = "check()"

    def flag(self, name: str) -> str:
        """How this front end spells option ``name`` (``max_keys_per_call``)."""
        if self is FrontEnd.CHECK:
            return f"{name}="
        prefix = "--" if self is FrontEnd.CLI else "--kvoffload-"
        return prefix + name.replace("_", "-")


class Kind(enum.Enum):
    """What an option takes."""

    CHOICE = "one of its choices"
    NAMES = "any of its choices, repeatable"
    INT = "a whole number within its bounds"
    SECONDS = "a number of seconds >= 0"
    FLAG = "a switch (True / False)"
    FOLDER = "a folder that can be written in (made if missing)"
    FILE = "a file that can be written"
    COMMAND = "a command line"
    TRACE = "a request trace: a built-in trace's name or a trace file, NAME:N its first N"


EVERYWHERE = frozenset(FrontEnd)
COMMAND_LINES = frozenset({FrontEnd.CLI, FrontEnd.PLUGIN})

DEFAULT_CAPACITY = 64
MAX_CAPACITY = 1024
"""The largest ``--capacity``: the spec's state, the key pool and the drain grow with it."""
MAX_TRACE_CAPACITY = 10_000_000
"""The largest ``--capacity`` with ``--trace`` (one tier of exactly that size, no key pool)."""
TRACES = ("conversation", "synthetic")
"""The built-in traces (Mooncake's, shipped with the package: ``traffic/traces.py``)."""
SMALL_TIERS = 4
"""Nine examples in ten draw a tier of 1..SMALL_TIERS slots (:func:`~.config.tier_size`)."""
DEFAULT_MAX_EXAMPLES = 300
MAX_EXAMPLES = 10_000_000
DEFAULT_STEPS = 150
MAX_STEPS = 100_000
DEFAULT_CALL_TIMEOUT = 10.0
"""Seconds one call into the target may take before it is a ``liveness`` failure."""
MAX_SEED = 2**64 - 1

ADAPTERS = ("auto", "native", "vllm-int", "vllm-bool", "vllm-enum", "lmcache-cpu",
            "lmcache-disk", "mooncake")
"""``vllm-int``: ``lookup(hashes) -> int`` (<= 0.18); ``vllm-bool``: ``lookup(key, ctx) ->
bool | None`` (0.19-0.24); ``vllm-enum``: ``LookupResult`` (0.25 on); ``mooncake``: a
``mooncake==`` target's own (what auto picks for it, and what its run's configuration
then names)."""
PROFILES = ("strict", "safe")
""":class:`~.config.Profile`'s values."""
LEVELS = ("any", "exact")
""":class:`~.config.Level`'s values."""
POLICIES = ("lru", "arc")
"""The spec's :class:`~kvoffload.spec.Policy` values."""
EVICTIONS = ("on-store", "background")
"""The spec's :class:`~kvoffload.spec.Eviction` values (D14)."""
FAULTS = ("none", "holder-kill", "master-kill")
"""``--fault``'s values (docs/spec.md D15): no fault, or the node a target fails when the
suite injects the spec's ``fail_node`` (a ``mooncake==`` target: the client process
holding the segment, or the master)."""
ASSUMPTION_NAMES = ("no-misuse", "no-reset-in-flight", "no-stale-completions",
                    "no-store-while-storing", "unique-keys")
"""The spec's :data:`~kvoffload.spec.ASSUMPTIONS`, by name."""
DATABASE_FOLDER = "hypothesis-db"
"""Under the report folder: Hypothesis's example database (failures found replay first)."""


@dataclass(frozen=True)
class Option:
    """One option of the suite, as every front end takes it."""

    name: str
    """The Python name: ``check()``'s keyword, the config's field (``max_keys_per_call``)."""
    kind: Kind
    default: object
    """The value when none is given (None: none, e.g. a fresh seed)."""
    help: str
    """One or two plain sentences, for ``--help``, pytest's help and the docs."""
    choices: tuple[str, ...] = ()
    low: int | None = None
    high: int | None = None
    front_ends: frozenset[FrontEnd] = EVERYWHERE
    elsewhere: str = ""
    """Why the front ends missing from ``front_ends`` do without it (required then)."""
    config: bool = True
    """A field of :class:`~.config.CheckConfig`; else the front end uses it itself."""
    by_target: bool = False
    """A kind of target may set its own default (``lmcache==``: one key per call); the
    config holds None until the target is known (:func:`~.target.targets.with_target_defaults`)."""
    self_test: str = ""
    """Why ``--self-test`` refuses this option when given (empty: it honours it)."""
    metavar: str = ""
    default_text: str = ""
    """The default in words, where the value alone does not say it."""
    more: str = ""
    """What the docs add to ``help`` (Markdown: links to their sections)."""
    trace_high: int | None = None
    """The upper bound instead of ``high`` when ``--trace`` is given."""

    def flag(self, front_end: FrontEnd) -> str:
        return front_end.flag(self.name)

    def bounded(self, trace: bool) -> Option:
        """This option as a run with (``trace``) or without a trace bounds it."""
        return replace(self, high=self.trace_high) if trace and self.trace_high else self

    def parse(self, value: object, front_end: FrontEnd) -> Any:
        """``value`` (text from a command line, or a typed value from Python) as this
        option's value; None is "not given", the table's default (or, for a ``by_target``
        option, None: the target's).

        raises: UsageError naming the option as ``front_end`` spells it
        """
        if value is None:
            if self.by_target or self.default is None:
                return None
            value = self.default
        return _PARSERS[self.kind](self, value, self.flag(front_end))

    def describe_default(self) -> str:
        if self.default_text:
            return self.default_text
        if self.default is None or self.default == ():
            return "none"
        if self.default is False:
            return "off"
        if isinstance(self.default, float):
            return f"{self.default:g}"
        return str(self.default)

    def help_text(self) -> str:
        """The help line both command lines show (``--help``)."""
        return f"{self.help}{self.takes()} (default: {self.describe_default()})"

    def takes(self) -> str:
        """What values it takes, in words ("; 1 to 1024"), empty if the help says it."""
        if self.kind is Kind.CHOICE:
            return f"; one of {', '.join(self.choices)}"
        if self.kind is Kind.NAMES:
            return f"; repeatable: {', '.join(self.choices)}"
        if self.kind is Kind.INT and self.high is not None:
            high = str(self.high)
            if self.high > 2**32 and (self.high + 1).bit_count() == 1:
                high = f"2**{self.high.bit_length()}-1"
            return f"; {self.low} to {high}"
        if self.kind is Kind.INT:
            return f"; {self.low} or more"
        return ""


def _o(name: str, kind: Kind, default: object, help: str, **more: Any) -> Option:
    return Option(name, kind, default, help, **more)


_ALONE = ("the self-test runs each seeded bug under the policy, level and adapter it is "
          "written for (LRU and ARC both, the native adapter)")
_WRITES_NOTHING = "check() writes nothing: it returns the result"

OPTIONS: tuple[Option, ...] = (
    _o("adapter", Kind.CHOICE, "auto",
       "the API the target offers; auto reads the target's lookup signature and says which "
       "it picked and why; vllm-int: lookup(hashes) -> int (<= 0.18), vllm-bool: -> bool | "
       "None (0.19-0.24), vllm-enum: -> LookupResult (0.25 on)",
       choices=ADAPTERS, self_test=_ALONE),
    _o("profile", Kind.CHOICE, "strict",
       "lookup profile: strict (PENDING must be reported) or safe (PENDING may read as "
       "MISS, never as HIT)", choices=PROFILES),
    _o("policy", Kind.CHOICE, "lru",
       "the eviction policy the target is built with (passed to it) and the spec models",
       choices=POLICIES, self_test=_ALONE),
    _o("level", Kind.CHOICE, "any",
       "any: any allowed victim; exact: the victims of the spec's LRU / ARC model",
       choices=LEVELS, self_test=_ALONE),
    _o("eviction", Kind.CHOICE, "on-store",
       "when the target may evict: on-store (only inside prepare_store, to make room) or "
       "background (also between calls, on its own, as a distributed store's master "
       "does: a READY block with no readers that the target no longer holds is taken as "
       "the spec's evict_in_background, not as a failure). A kind of target may set its "
       "own default (mooncake==: background), and the report's header says whose choice "
       "it is", choices=EVICTIONS, by_target=True,
       default_text="on-store; background for mooncake== targets",
       more="([docs/spec.md](spec.md) D14; such a target is driven one call at a time)"),
    _o("fault", Kind.CHOICE, "none",
       "inject a node's failure at calls drawn from the seed: holder-kill kills the "
       "process holding the tier's memory, master-kill the store's master, each then "
       "replaced so the run goes on; the spec takes it as fail_node, which loses every "
       "block (a lookup after it must answer MISS). Only for targets that fail a node of "
       "their own (mooncake==); for any other, a usage error", choices=FAULTS,
       self_test="the self-test's seeded bugs are single-process managers, with no node "
                 "to fail",
       more="([docs/spec.md](spec.md) D15; [engines.md](engines.md#faults-the-suite-injects))"),
    _o("assume", Kind.NAMES, (), "an assumption the target relies on",
       choices=ASSUMPTION_NAMES, metavar="NAME"),
    _o("max_keys_per_call", Kind.INT, 0,
       "every prepare_store, prepare_load and touch generated names at most N keys (so the "
       "completions of their jobs do too); 0: no limit. A kind of target may set its own "
       "default (lmcache==: 1, LMCache's backends store one chunk per call), and the "
       "report's header says whose choice the limit is",
       low=0, by_target=True, metavar="N",
       default_text="0, no limit; 1 for lmcache== targets"),
    _o("capacity", Kind.INT, DEFAULT_CAPACITY,
       f"the largest tier, in slots: nine examples in ten draw a tier of 1..{SMALL_TIERS} "
       f"slots, the tenth one of {SMALL_TIERS + 1}..N",
       low=1, high=MAX_CAPACITY, metavar="N", trace_high=MAX_TRACE_CAPACITY,
       more=f"([Tiers](#tiers); the spec's state, the key pool and the drain grow with N: "
            f"a 1024-slot run took 45 MB); with `--trace`, the one tier of the run, 1 to "
            f"{MAX_TRACE_CAPACITY}"),
    _o("trace", Kind.TRACE, None,
       f"drive the lockstep with a request trace's call stream instead of random calls: "
       f"a built-in trace ({', '.join(TRACES)}: Mooncake's) or a trace file in its "
       f"format, TRACE:N for its first N requests; one pass over it on a tier of "
       f"--capacity slots (up to {MAX_TRACE_CAPACITY:,}), the jobs' delays drawn from "
       f"--seed; --max-examples and --steps do not apply",
       metavar="TRACE", self_test="the self-test's seeded bugs run on random calls",
       more="([Real traffic](#real-traffic-a-trace-as-the-workload))"),
    _o("max_examples", Kind.INT, DEFAULT_MAX_EXAMPLES,
       "generated examples (Hypothesis); the plugin splits them over a target's shards",
       low=1, high=MAX_EXAMPLES, metavar="N"),
    _o("steps", Kind.INT, DEFAULT_STEPS, "calls per example", low=1, high=MAX_STEPS,
       metavar="N"),
    _o("seed", Kind.INT, None,
       "random seed, printed in every report; the same seed gives the same run",
       low=0, high=MAX_SEED, metavar="N",
       default_text="a fresh one; the plugin: --hypothesis-seed if given",
       more="(with `--no-database`, or the same database: saved failures replay first)"),
    _o("call_timeout", Kind.SECONDS, DEFAULT_CALL_TIMEOUT,
       "seconds one call into the target may take, and each construction of it (the "
       "first: twice that); longer is a liveness failure; 0: no limit (a target stuck "
       "inside C code cannot be interrupted)", metavar="SECONDS",
       more="([Timeouts](#timeouts-and-interrupts), [protocol.md](protocol.md))"),
    _o("stop_at_first", Kind.FLAG, False, "end the run at the first failing property"),
    _o("database", Kind.FOLDER, None,
       "a folder for Hypothesis's example database: a failure found once replays first "
       "next run", front_ends=frozenset({FrontEnd.CHECK}), metavar="DIR",
       elsewhere=f"the command lines keep it in REPORT_DIR/{DATABASE_FOLDER} "
                 f"(--no-database: none)"),
    _o("report_dir", Kind.FOLDER, "kvoffload-report",
       "where report.json, the reproducers and the example database go (the plugin: one "
       "folder per target)", front_ends=COMMAND_LINES, config=False, metavar="DIR",
       elsewhere=_WRITES_NOTHING),
    _o("no_database", Kind.FLAG, False,
       f"keep no example database (else one in REPORT_DIR/{DATABASE_FOLDER}: failures "
       f"found replay first next run)", front_ends=COMMAND_LINES, config=False,
       elsewhere="check() takes database=DIR instead (None, its default: none)"),
    _o("junit", Kind.FILE, None,
       "also write JUnit XML here: one test case per property (kvoffload check), per "
       "target with its shards merged (the plugin)", front_ends=COMMAND_LINES,
       config=False, metavar="PATH", elsewhere=_WRITES_NOTHING),
    _o("shards", Kind.INT, 1,
       "split each target's budget into N items with disjoint seeds (with pytest -n, one "
       "target runs on every core); at most the number of examples",
       low=1, front_ends=frozenset({FrontEnd.PLUGIN}), config=False, metavar="N",
       elsewhere="kvoffload check and check() run in one process; pytest-xdist spreads "
                 "the plugin's shards"),
    _o("self_test", Kind.FLAG, False,
       "check the suite itself: seeded-bug variants of the reference manager must fail, "
       "controls must pass", front_ends=frozenset({FrontEnd.CLI}), config=False,
       elsewhere="the self-test is a command of its own (kvoffload check --self-test)"),
    _o("exec", Kind.COMMAND, None,
       "check the program CMD (a command line), a host that speaks the call protocol "
       "(docs/protocol.md), instead of a TARGET: any language",
       front_ends=frozenset({FrontEnd.CLI}), config=False, metavar="CMD",
       elsewhere="the plugin and check() take it as the TARGET exec:CMD"),
    _o("in_process", Kind.FLAG, False,
       "run the target in the judge's process, unguarded (trusted targets only: a target "
       "can then reach the verdict); default: a host process of its own",
       front_ends=frozenset({FrontEnd.CLI}), config=False,
       elsewhere="the plugin and check() follow KVOFFLOAD_IN_PROCESS=1 in the environment"),
    _o("quiet", Kind.FLAG, False, "no progress display on stderr",
       front_ends=frozenset({FrontEnd.CLI}), config=False,
       elsewhere="the plugin's output is pytest's; check() shows no progress"),
)
"""Every option of the suite, in the order ``--help`` and the docs list them."""

BY_NAME: dict[str, Option] = {option.name: option for option in OPTIONS}


def options_of(front_end: FrontEnd) -> tuple[Option, ...]:
    """The options ``front_end`` takes, in the table's order."""
    return tuple(option for option in OPTIONS if front_end in option.front_ends)


def parse_options(
    given: Mapping[str, object], front_end: FrontEnd, names: Iterable[str] | None = None
) -> dict[str, Any]:
    """The one validation. ``given`` maps option names to what the user gave (None or
    missing: not given); the result maps every option of ``front_end`` (or only
    ``names``) to its value, the table's default where none was given.

    Each value is checked on its own (kind, bounds, choices), then the rules between
    options, then (last, as they make folders) that folders and files can be written.

    raises: UsageError naming the first bad option as ``front_end`` spells it
    """
    wanted = options_of(front_end) if names is None else tuple(BY_NAME[n] for n in names)
    unknown = sorted(set(given) - {option.name for option in wanted})
    if unknown:
        _usage(f"{front_end.value} takes no option {', '.join(unknown)}")
    trace = given.get("trace") is not None
    values = {option.name: option.bounded(trace).parse(given.get(option.name), front_end)
              for option in wanted}
    _check_together(given, values, front_end)
    for option in wanted:
        if option.kind in (Kind.FOLDER, Kind.FILE) and values[option.name] is not None:
            _check_writable(option, values[option.name], front_end)
    return values


def _check_together(given: Mapping[str, object], values: Mapping[str, Any],
                    front_end: FrontEnd) -> None:
    """The rules between options (each front end's options are those it takes)."""
    flag = front_end.flag
    if values.get("self_test"):
        refused = [o for o in OPTIONS if o.self_test and given.get(o.name) is not None]
        if refused:
            _usage(f"--self-test takes no {', '.join(flag(o.name) for o in refused)}: "
                   f"{refused[0].self_test}")
        if values.get("exec") is not None:
            _usage("--exec CMD is the target: give no --self-test")
    if values.get("exec") is not None and values.get("in_process"):
        _usage("--exec CMD runs a program: it cannot run --in-process")
    shards, examples = values.get("shards"), values.get("max_examples")
    if isinstance(shards, int) and isinstance(examples, int) and shards > examples:
        _usage(f"{flag('shards')} {shards} is more than {flag('max_examples')} {examples}: "
               f"every shard needs one")


def add_arguments(add: Any, front_end: FrontEnd, names: Iterable[str] | None = None) -> None:
    """Declare ``front_end``'s options (or only ``names``) through ``add`` (argparse's
    ``add_argument`` or pytest's ``addoption``): every value arrives as given (text, or
    None when not given), so that :func:`parse_options` alone judges it. The command
    line's values land under the options' names (``args.max_keys_per_call``); pytest's
    under its own (read them with ``config.getoption(option.flag(FrontEnd.PLUGIN))``).
    Another command taking some of the same options (``kvoffload corpus replay``) passes
    their ``names`` here and to :func:`parse_options`."""
    wanted = options_of(front_end) if names is None else tuple(BY_NAME[n] for n in names)
    for option in wanted:
        more: dict[str, Any] = {"default": None, "help": option.help_text()}
        if front_end is FrontEnd.CLI:  # pytest's dests are shared by every plugin: its own
            more["dest"] = option.name
        if option.kind is Kind.FLAG:
            more["action"] = "store_true"
        else:
            more["metavar"] = option.metavar or option.name.upper()
            if option.kind is Kind.NAMES:
                more["action"] = "append"
        add(option.flag(front_end), **more)


def _usage(message: str) -> NoReturn:
    from .errors import UsageError  # imported when needed: it imports the spec

    raise UsageError(message)


def _choice(option: Option, value: object, flag: str) -> str:
    text = value.value if isinstance(value, enum.Enum) else value
    if not isinstance(text, str) or text not in option.choices:
        _usage(f"{flag} must be one of {', '.join(option.choices)}; got {value!r}")
    return text


def _names(option: Option, value: object, flag: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str | bytes) else value
    if not isinstance(items, Iterable):
        _usage(f"{flag} takes names ({', '.join(option.choices)}); got {value!r}")
    names = tuple(items)
    unknown = [n for n in names if not isinstance(n, str) or n not in option.choices]
    if unknown:
        _usage(f"{flag} takes {', '.join(option.choices)}; got "
               f"{', '.join(map(repr, unknown))}")
    return names


def _integer(option: Option, value: object, flag: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        _usage(f"{flag} takes a whole number; got {value!r}")
    try:
        number = int(value)
    except ValueError:
        _usage(f"{flag} takes a whole number; got {value!r}")
    low, high = option.low, option.high
    if (low is not None and number < low) or (high is not None and number > high):
        bounds = f"{low} or more" if high is None else f"{low} to {high}"
        _usage(f"{flag} must be {bounds}; got {value!r}")
    return number


def _seconds(option: Option, value: object, flag: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        _usage(f"{flag} takes a number of seconds; got {value!r}")
    try:
        seconds = float(value)
    except ValueError:
        _usage(f"{flag} takes a number of seconds; got {value!r}")
    if not (math.isfinite(seconds) and seconds >= 0):
        _usage(f"{flag} must be a number of seconds >= 0 (0: no limit); got {value!r}")
    return seconds


def _flag(option: Option, value: object, flag: str) -> bool:
    if not isinstance(value, bool):
        _usage(f"{flag} is a switch: True or False; got {value!r}")
    return value


def _path(option: Option, value: object, flag: str) -> Path:
    if not isinstance(value, str | os.PathLike) or not str(value).strip():
        _usage(f"{flag} takes a path; got {value!r}")
    return Path(value)


def _command(option: Option, value: object, flag: str) -> str:
    if not isinstance(value, str):
        _usage(f"{flag} takes a command line; got {value!r}")
    try:
        words = shlex.split(value)
    except ValueError as error:
        _usage(f"{flag} {value!r} is not a command line: {error}")
    if not words:
        _usage(f"{flag} takes a command line; got an empty one")
    return value


def _trace(option: Option, value: object, flag: str) -> str:
    """A built-in trace's name or an existing file, with an optional ``:N`` (N >= 1)."""
    if not isinstance(value, str | os.PathLike) or not str(value).strip():
        _usage(f"{flag} takes a trace: {', '.join(TRACES)} or a trace file; got {value!r}")
    text = str(value)
    name, count = split_trace(text)
    if count is not None and count < 1:
        _usage(f"{flag} {text!r}: the number of requests after ':' must be 1 or more")
    if name not in TRACES and not Path(name).is_file():
        _usage(f"{flag} {text!r} is no trace: give {', '.join(TRACES)} or a trace file "
               f"(Mooncake's format, gzip or plain)")
    return text


def split_trace(text: str) -> tuple[str, int | None]:
    """``NAME:N`` as (NAME, N); a value without a ``:N`` suffix as (value, None)."""
    name, colon, count = text.rpartition(":")
    if colon and count.isdigit():
        return name, int(count)
    return text, None


_PARSERS: dict[Kind, Any] = {
    Kind.CHOICE: _choice, Kind.NAMES: _names, Kind.INT: _integer, Kind.SECONDS: _seconds,
    Kind.FLAG: _flag, Kind.FOLDER: _path, Kind.FILE: _path, Kind.COMMAND: _command,
    Kind.TRACE: _trace,
}


def _check_writable(option: Option, path: Path, front_end: FrontEnd) -> None:
    """Fail before running, not after: a FOLDER must be one we can write in (made if
    missing), a FILE one we can write."""
    import tempfile  # here, not by every host (through targets.py): shutil, bz2, lzma, random

    flag = option.flag(front_end)
    try:
        if option.kind is Kind.FOLDER:
            path.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=path):
                pass
            return
        if path.is_dir():
            raise IsADirectoryError(21, "is a directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            if not os.access(path, os.W_OK):
                raise PermissionError(13, "permission denied")
        else:
            with tempfile.TemporaryFile(dir=path.parent):
                pass
    except OSError as error:
        what = "is not a writable folder" if option.kind is Kind.FOLDER else (
            "cannot be written")
        _usage(f"{flag} {str(path)!r} {what}: {error.strerror or error}")


def options_markdown() -> str:
    """The options as the Markdown table docs/conformance.md shows (a test keeps the
    page equal to it): ``python -m kvoffload.conformance.options`` prints it."""
    lines = ["| option | default | meaning | taken by |", "| --- | --- | --- | --- |"]
    for option in OPTIONS:
        front_end = next(f for f in FrontEnd if f in option.front_ends)
        shown = option.flag(front_end)
        if option.metavar:
            shown += option.metavar if front_end is FrontEnd.CHECK else f" {option.metavar}"
        meaning = option.help + option.takes() + (f" {option.more}" if option.more else "")
        if option.self_test:
            meaning += " (refused with `--self-test`: [The self-test](#the-self-test))"
        cells = (f"`{shown}`", option.describe_default(), meaning, _taken_by(option))
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def _taken_by(option: Option) -> str:
    if option.front_ends == EVERYWHERE:
        return "all three"
    names = {FrontEnd.CLI: "`kvoffload check`", FrontEnd.PLUGIN: "the plugin",
             FrontEnd.CHECK: "`check()`"}
    taken = " and ".join(names[f] for f in FrontEnd if f in option.front_ends)
    return f"{taken} only: {option.elsewhere}"


if __name__ == "__main__":
    print(options_markdown(), end="")
