"""``kvoffload check``: options, the run, and what it prints and writes.

Exit status, the contract CI gates on: 0 the target conforms, 1 a property failed, 2 the
run could not be made as asked (usage, target, adapter, environment), 130 interrupted
(Ctrl-C; report.json says how far it got). Each ends with a one-line reason on stderr
(2, 130) or the verdict on stdout (0, 1).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

from kvoffload.spec import ASSUMPTIONS, Policy

from .config import (
    ADAPTERS,
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_CAPACITY,
    DEFAULT_MAX_EXAMPLES,
    DEFAULT_STEPS,
    MAX_CAPACITY,
    SMALL_TIERS,
    CheckConfig,
    Level,
    Profile,
)
from .errors import (
    EXIT_CONFORMS,
    EXIT_FAILS,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    MAX_MESSAGE,
    UsageError,
    clip,
)
from .isolation import IN_PROCESS, finish
from .targets import DEFAULT_TARGET, absolute_target

EXIT_TERMINATED = 143
"""SIGTERM from outside stopped the run before a verdict (128 + 15)."""
EXEC_PREFIX = "exec:"
"""``--exec CMD`` is checked as the TARGET ``exec:CMD`` (:mod:`.remote`)."""
SELF_TEST_SEED = 20261202
"""The self-test's seed unless --seed is given, so its verdicts are reproducible."""

EXIT_STATUS = ("exit status: 0 the target conforms; 1 a property failed; 2 the run could "
               "not be made as asked (bad option, unloadable target, no adapter fits, "
               "unwritable --report-dir or --junit); 130 interrupted by Ctrl-C (the first "
               "stops after the current call and writes report.json with the seed and "
               "what held so far; a second quits at once); 143 terminated by SIGTERM "
               "before a verdict (no report)")
DATABASE_FOLDER = "hypothesis-db"
"""Under --report-dir: Hypothesis's example database (failures found replay first)."""


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", default=None,
                        help=f"module:attr, path/to/file.py:attr or vllm==X (default: "
                             f"{DEFAULT_TARGET})")
    parser.add_argument("--adapter", choices=ADAPTERS, default="auto",
                        help="the API the target offers (default: auto, from its signatures)")
    parser.add_argument("--profile", choices=[p.value for p in Profile], default="strict",
                        help="lookup profile: strict (PENDING must be reported) or safe "
                             "(PENDING may read as MISS, never HIT)")
    parser.add_argument("--policy", choices=[p.value for p in Policy], default="lru",
                        help="the eviction policy the target is built with")
    parser.add_argument("--level", choices=[lv.value for lv in Level], default="any",
                        help="any: any allowed victim; exact: the spec's LRU/ARC victims")
    parser.add_argument("--assume", action="append", default=[], choices=sorted(ASSUMPTIONS),
                        metavar="NAME", help="an assumption the target relies on (repeatable): "
                        + ", ".join(sorted(ASSUMPTIONS)))
    parser.add_argument("--capacity", default=None, metavar="N",
                        help=f"the largest tier, in slots, 1 to {MAX_CAPACITY} (default "
                             f"{DEFAULT_CAPACITY}): nine examples in ten draw 1..{SMALL_TIERS} "
                             f"slots, the tenth {SMALL_TIERS + 1}..N")
    parser.add_argument("--max-examples", default=None, metavar="N",
                        help=f"examples to run (default {DEFAULT_MAX_EXAMPLES})")
    parser.add_argument("--steps", default=None, metavar="N",
                        help=f"calls per example (default {DEFAULT_STEPS})")
    parser.add_argument("--max-keys-per-call", default=None, metavar="N",
                        help="generate calls naming at most N keys (0: no limit); default "
                             "1 for lmcache== targets (LMCache's backends store one chunk "
                             "per call), 0 for any other")
    parser.add_argument("--seed", default=None, metavar="N",
                        help="random seed (default: a fresh one, printed in the report)")
    parser.add_argument("--call-timeout", default=None, metavar="SECONDS",
                        help=f"a call into the target running longer is a liveness failure "
                             f"(default {DEFAULT_CALL_TIMEOUT:g}; 0: no limit; a target "
                             f"stuck inside C code cannot be interrupted)")
    parser.add_argument("--stop-at-first", action="store_true",
                        help="end the run at the first failing property")
    parser.add_argument("--report-dir", type=Path, default=Path("kvoffload-report"),
                        help="where report.json, reproducers and the example database go "
                             "(default: ./kvoffload-report)")
    parser.add_argument("--no-database", action="store_true",
                        help=f"do not keep or replay failing examples (default: kept in "
                             f"REPORT_DIR/{DATABASE_FOLDER} and replayed first next run)")
    parser.add_argument("--junit", type=Path, default=None, help="also write JUnit XML here")
    parser.add_argument("--self-test", action="store_true",
                        help="check the suite itself: seeded-bug variants of the reference "
                             "manager must fail, controls must pass")
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    parser.add_argument("--exec", dest="exec_command", default=None, metavar="CMD",
                        help="check the program CMD (a command line), a host that speaks "
                             "the call protocol (docs/protocol.md), instead of a TARGET")
    parser.add_argument("--in-process", action="store_true",
                        help="run the target in this process, unguarded (trusted targets "
                             "only: a target can then reach the verdict); default: a host "
                             "process of its own")


def config_of(args: argparse.Namespace) -> CheckConfig:
    database = None if args.no_database else args.report_dir / DATABASE_FOLDER
    return CheckConfig.from_options(
        profile=args.profile, policy=args.policy, level=args.level, assume=args.assume,
        capacity=args.capacity, max_examples=args.max_examples, steps=args.steps,
        seed=args.seed, adapter=args.adapter, call_timeout=args.call_timeout,
        database=database, stop_at_first=args.stop_at_first,
        max_keys_per_call=args.max_keys_per_call)


def run_check_command(args: argparse.Namespace) -> int:
    from .guard import stop_on_sigint, stop_when_stuck

    _stop_on_sigterm()
    try:
        config = config_of(args)
        if args.self_test and args.target is not None:
            raise UsageError("--self-test checks the suite itself; give no TARGET")
        if args.exec_command is not None and (args.target is not None or args.self_test):
            raise UsageError("--exec CMD is the target: give no TARGET (and no --self-test)")
        if args.exec_command is not None and args.in_process:
            raise UsageError("--exec CMD runs a program: it cannot run --in-process")
        if args.in_process:
            os.environ[IN_PROCESS] = "1"
        check_writable(args.report_dir, args.junit)
        with stop_on_sigint(), stop_when_stuck(_stop_stuck):
            return _self_test(args, config) if args.self_test else _check(args, config)
    except UsageError as error:
        print(f"kvoffload check: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("kvoffload check: interrupted (a second Ctrl-C): no report written",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    except SystemExit as exit_:  # never a false green: a SystemExit here is the target's
        print(f"kvoffload check: error: SystemExit({exit_.code!r}) escaped the run (raised "
              f"by the target outside a call); no verdict", file=sys.stderr)
        return EXIT_USAGE
    except Exception as error:  # the suite's own bug: say so in one line, exit 2
        print(f"kvoffload check: error: internal error, please report it: "
              f"{type(error).__name__}: {error}", file=sys.stderr)
        return EXIT_USAGE


def _stop_on_sigterm() -> None:
    """SIGTERM from outside (CI cancelled, ``timeout``): end the hosts, say so, exit 143."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def stop(signum: int, frame: object) -> None:
        from .remote import kill_all

        kill_all()
        with suppress(OSError, ValueError, AttributeError):
            print("kvoffload check: terminated (SIGTERM) before a verdict; no report was "
                  "written", file=sys.stderr, flush=True)
        os._exit(EXIT_TERMINATED)

    signal.signal(signal.SIGTERM, stop)


def _stop_stuck(message: str) -> NoReturn:
    """A call swallows every interrupt: print the liveness failure and end the process
    (it will not give the run back, so no report can be written)."""
    from .remote import kill_all

    kill_all()
    print(f"\nFAILS: property 'liveness' violated: {message}; no report written",
          flush=True)
    print(f"kvoffload check: {message}; exit {EXIT_FAILS}", file=sys.stderr, flush=True)
    finish(EXIT_FAILS)


def check_writable(report_dir: Path, junit: Path | None) -> None:
    """Fail before running, not after: --report-dir must be a folder we can write in,
    --junit a file we can write.

    raises: UsageError
    """
    try:
        report_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=report_dir):
            pass
    except OSError as error:
        raise UsageError(f"--report-dir {str(report_dir)!r} is not a writable folder: "
                         f"{error.strerror or error}") from error
    if junit is None:
        return
    try:
        if junit.is_dir():
            raise IsADirectoryError(21, "is a directory")
        junit.parent.mkdir(parents=True, exist_ok=True)
        if junit.exists():
            if not os.access(junit, os.W_OK):
                raise PermissionError(13, "permission denied")
        else:
            with tempfile.TemporaryFile(dir=junit.parent):
                pass
    except OSError as error:
        raise UsageError(f"--junit {str(junit)!r} cannot be written: "
                         f"{error.strerror or error}") from error


def _check(args: argparse.Namespace, config: CheckConfig) -> int:
    from .report import (
        check_junit,
        configuration_text,
        failures_text,
        summary_text,
        write_check_report,
    )
    from .runner import run_check

    target = DEFAULT_TARGET if args.target is None else args.target
    if args.exec_command is not None:
        target = EXEC_PREFIX + args.exec_command
    target = absolute_target(target)
    result = run_check(target, config, show_progress=not args.quiet)
    print(configuration_text(result))
    print()
    print(summary_text(result))
    try:
        report, _ = write_check_report(result, args.report_dir)
    except OSError as error:  # the folder was replaced by a file in the meantime, say
        print(f"kvoffload check: error: the report could not be written in "
              f"{str(args.report_dir)!r}: {error.strerror or error}", file=sys.stderr)
        return EXIT_FAILS if result.verdict == "fails" else EXIT_USAGE
    if result.failures:
        print()
        print(failures_text(result, args.report_dir))
    if args.junit is not None:
        args.junit.write_text(check_junit(result), encoding="utf-8")
    print(f"\nreport: {report}")
    return exit_status(result.verdict, result.error)


def exit_status(verdict: str, error: str | None) -> int:
    """The exit-code contract, from a verdict; prints the one-line reason for 2 and 130."""
    if verdict == "interrupted":
        print("kvoffload check: interrupted by Ctrl-C: report.json has the seed, the "
              "budget spent and what held so far", file=sys.stderr)
        return EXIT_INTERRUPTED
    if verdict == "conforms":
        return EXIT_CONFORMS
    if verdict == "fails":
        if error is not None:  # a failure found is never lost: exit 1, the error beside it
            print(f"kvoffload check: error after the failure was found (the run stopped "
                  f"there): {clip(str(error).splitlines()[0] if error else '', MAX_MESSAGE)}",
                  file=sys.stderr)
        return EXIT_FAILS
    lines = str(error).splitlines() or [""]
    more = " (the rest in report.json)" if len(lines) > 1 else ""
    print(f"kvoffload check: error: the run did not finish: {clip(lines[0], MAX_MESSAGE)}"
          f"{more}", file=sys.stderr)
    return EXIT_USAGE


def _self_test(args: argparse.Namespace, config: CheckConfig) -> int:
    from .guard import stop_requested
    from .selftest import run_self_test
    from .selftest_report import print_self_test, write_self_test

    # Fixed seed, no example database: the self-test's verdicts are reproducible.
    config = replace(config, database=None)
    if config.seed is None:
        config = replace(config, seed=SELF_TEST_SEED)
    report = run_self_test(config, show_progress=not args.quiet)
    print_self_test(report, config)
    write_self_test(report, config, args.report_dir, args.junit)
    if stop_requested():
        return exit_status("interrupted", None)
    return EXIT_CONFORMS if report.ok else EXIT_FAILS
