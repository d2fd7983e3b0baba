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
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace
from typing import NoReturn

from ..config import CheckConfig
from ..errors import (
    EXIT_CONFORMS,
    EXIT_FAILS,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    MAX_MESSAGE,
    UsageError,
    clip,
)
from ..options import DATABASE_FOLDER, FrontEnd, add_arguments, options_of, parse_options
from ..target.isolation import IN_PROCESS, finish
from ..target.targets import DEFAULT_TARGET, absolute_target

EXIT_TERMINATED = 143
"""SIGTERM from outside stopped the run before a verdict (128 + 15)."""
EXEC_PREFIX = "exec:"
"""``--exec CMD`` is checked as the TARGET ``exec:CMD``
(:mod:`kvoffload.conformance.target.remote`)."""
SELF_TEST_SEED = 20261202
"""The self-test's seed unless --seed is given, so its verdicts are reproducible."""

EXIT_STATUS = ("exit status: 0 the target conforms; 1 a property failed; 2 the run could "
               "not be made as asked (bad option, unloadable target, no adapter fits, "
               "unwritable --report-dir or --junit); 130 interrupted by Ctrl-C (the first "
               "stops after the current call and writes report.json with the seed and "
               "what held so far; a second quits at once); 143 terminated by SIGTERM "
               "before a verdict (no report)")


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    """TARGET, then the options the table (:mod:`kvoffload.conformance.options`) gives the command
    line."""
    parser.add_argument("target", nargs="?", default=None,
                        help=f"module:attr, path/to/file.py:attr, vllm==X or lmcache==X "
                             f"(default: {DEFAULT_TARGET})")
    add_arguments(parser.add_argument, FrontEnd.CLI)
    parser.error = _one_line_error(parser)  # type: ignore[method-assign,assignment]  # argparse's own error (usage text, then the reason) becomes the command's one line


def _one_line_error(parser: argparse.ArgumentParser) -> Callable[[str], NoReturn]:
    """What argparse itself refuses (``--quiet=yes``, a flag with no value) ends as
    every other usage error does: one line on stderr, exit 2."""

    def error(message: str) -> NoReturn:
        print(f"{parser.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)

    return error


def parse_check_arguments(args: argparse.Namespace) -> tuple[argparse.Namespace, CheckConfig]:
    """The command line's options judged by :func:`~kvoffload.conformance.options.parse_options`
    (the one validation every front end shares), as values (``run.report_dir`` is a Path) and as the
    run's configuration.

    raises: UsageError
    """
    given = {option.name: getattr(args, option.name) for option in options_of(FrontEnd.CLI)}
    if args.target is not None and given["self_test"]:
        raise UsageError("--self-test checks the suite itself; give no TARGET")
    if args.target is not None and given["exec"] is not None:
        raise UsageError("--exec CMD is the target: give no TARGET")
    values = parse_options(given, FrontEnd.CLI)
    database = None if values["no_database"] else values["report_dir"] / DATABASE_FOLDER
    config = CheckConfig.from_values({**values, "database": database})
    return argparse.Namespace(target=args.target, **values), config


def run_check_command(args: argparse.Namespace) -> int:
    from ..judge.guard import stop_on_sigint, stop_when_stuck

    try:
        args, config = parse_check_arguments(args)
        with _stop_on_sigterm(), _in_process(args.in_process), stop_on_sigint(), \
                stop_when_stuck(_stop_stuck):
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


@contextmanager
def _in_process(asked: bool) -> Iterator[None]:
    """``--in-process``: ``KVOFFLOAD_IN_PROCESS=1`` for this run (the hosts' code reads
    it), the environment as it was afterwards, for a caller that runs more checks."""
    if not asked:
        yield
        return
    before = os.environ.get(IN_PROCESS)
    os.environ[IN_PROCESS] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(IN_PROCESS, None)
        else:
            os.environ[IN_PROCESS] = before


@contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    """SIGTERM from outside (CI cancelled, ``timeout``) during the run: end the hosts, say
    so, exit 143. The handler found is put back afterwards, for a caller of :func:`main`
    in its own program."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        from ..target.remote import kill_all

        kill_all()
        with suppress(OSError, ValueError, AttributeError):
            print("kvoffload check: terminated (SIGTERM) before a verdict; no report was "
                  "written", file=sys.stderr, flush=True)
        os._exit(EXIT_TERMINATED)

    found = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        if found is not None:  # None: not set from Python, nothing this process can put back
            signal.signal(signal.SIGTERM, found)


def _stop_stuck(message: str) -> NoReturn:
    """A call swallows every interrupt: print the liveness failure and end the process
    (it will not give the run back, so no report can be written)."""
    from ..target.remote import kill_all

    kill_all()
    print(f"\nFAILS: property 'liveness' violated: {message}; no report written",
          flush=True)
    print(f"kvoffload check: {message}; exit {EXIT_FAILS}", file=sys.stderr, flush=True)
    finish(EXIT_FAILS)


def _check(args: argparse.Namespace, config: CheckConfig) -> int:
    from .report import (
        check_junit,
        configuration_text,
        failures_text,
        summary_text,
        write_check_report,
    )
    from .runner import add_engine_reproducers, run_check

    target = DEFAULT_TARGET if args.target is None else args.target
    if args.exec is not None:
        target = EXEC_PREFIX + args.exec
    target = absolute_target(target)
    result = run_check(target, config, show_progress=not args.quiet)
    add_engine_reproducers(result)
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
    from ..judge.guard import stop_requested
    from ..selftest.selftest import run_self_test
    from ..selftest.selftest_report import print_self_test, write_self_test

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
