"""``kvoffload corpus write DIR`` and ``kvoffload corpus replay DIR TARGET``.

``replay`` is judged as ``kvoffload check`` judges (:mod:`.corpus_replay`), prints what
it prints (the configuration, one row per property, each failure's shrunk-trace table
and reproducer), writes the same ``report.json`` and reproducers under ``--report-dir``,
and exits with the same statuses: 0 every replayed case passed, 1 a property failed, 2
the replay could not be made as asked (bad option, unloadable target or corpus), 130
interrupted by Ctrl-C (the report says how far it got).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..command.check_command import exit_status
from ..config import CheckConfig
from ..errors import EXIT_CONFORMS, EXIT_FAILS, EXIT_INTERRUPTED, EXIT_USAGE, UsageError
from ..options import FrontEnd, add_arguments, parse_options
from ..target.targets import DEFAULT_TARGET, absolute_target

if TYPE_CHECKING:
    from .corpus_replay import ReplayResult

REPLAY_OPTIONS = ("adapter", "profile", "policy", "level", "assume", "max_keys_per_call",
                  "call_timeout", "report_dir", "in_process")
"""The options of ``kvoffload check`` that ``corpus replay`` takes, declared and judged by
the one table (:mod:`kvoffload.conformance.options`): the budget options do not apply (the corpus is
the budget)."""


def add_corpus_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="corpus_command", required=True)
    write = sub.add_parser("write", help="write the corpus (JSON cases, schema, index)")
    write.add_argument("directory", type=Path)
    write.add_argument("--max-calls", type=int, default=6,
                       help="the model checker's TINY traces of up to this many calls "
                       "(0 to 6, default 6)")
    replay = sub.add_parser("replay", help="replay a corpus against TARGET, judged as "
                            "kvoffload check judges (the spec is the oracle)")
    replay.add_argument("directory", type=Path)
    replay.add_argument("target", nargs="?", default=DEFAULT_TARGET)
    add_arguments(replay.add_argument, FrontEnd.CLI, REPLAY_OPTIONS)
    replay.add_argument("--show", type=int, default=10, help="failed cases to list "
                        "(default 10; report.json lists them all)")


def run_corpus_command(args: argparse.Namespace) -> int:
    if args.corpus_command == "write":
        return _write(args)
    from ..judge.guard import stop_on_sigint
    from .corpus_replay import replay_corpus  # here: its imports (Hypothesis's) are for
    # replays only, not for every command the CLI parses (kvoffload demo)

    try:
        values = parse_options({name: getattr(args, name) for name in REPLAY_OPTIONS},
                               FrontEnd.CLI, REPLAY_OPTIONS)
        config = CheckConfig.from_values(values)
        target = absolute_target(args.target)
        with stop_on_sigint():
            print(f"kvoffload corpus: replaying {args.directory} against {target}",
                  file=sys.stderr, flush=True)
            replayed = replay_corpus(target, config, args.directory,
                                     in_process=True if values["in_process"] else None)
    except UsageError as error:
        print(f"kvoffload corpus: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, ValueError, KeyError) as error:
        print(f"kvoffload corpus: error: cannot read the corpus: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("kvoffload corpus: interrupted (a second Ctrl-C): no report written",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    return _report(replayed, values["report_dir"], args.show)


def _write(args: argparse.Namespace) -> int:
    from .corpus_write import write_corpus

    if not 0 <= args.max_calls <= 6:
        print("kvoffload corpus: error: --max-calls must be 0 to 6 (the model checker's "
              "traces are written up to 6 calls)", file=sys.stderr)
        return EXIT_USAGE
    try:
        counts = write_corpus(args.directory, max_calls=args.max_calls)
    except OSError as error:
        print(f"kvoffload corpus: error: cannot write the corpus: {error}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {sum(counts.values())} cases to {args.directory}: "
          + ", ".join(f"{n} {source}" for source, n in counts.items()))
    return EXIT_CONFORMS


def _report(replayed: ReplayResult, report_dir: Path, show: int) -> int:
    """Print and write what ``kvoffload check`` prints and writes, plus the cases."""
    from ..command.report import configuration_text, failures_text, summary_text, write_check_report

    result, outcome = replayed.check, replayed.outcome
    header = [line for line in configuration_text(result).splitlines()
              if not line.startswith("budget")]
    print("\n".join([*header, f"corpus         {result.extra['corpus']['directory']}"]))
    print()
    print(summary_text(result).replace(" examples,", " cases,").replace(" steps,", " calls,"))
    print(f"cases: {len(outcome.passed)} passed, {len(outcome.failed)} failed, "
          f"{sum(outcome.skipped.values())} skipped")
    for why, count in sorted(outcome.skipped.items()):
        print(f"  skipped {count}: {why}")
    for failed in outcome.failed[:show]:
        violation = failed.violation
        print(f"FAILED {failed.case} at step {violation.step}: property {violation.prop!r}: "
              f"{violation.message}")
    try:
        report, _ = write_check_report(result, report_dir)
    except OSError as error:
        print(f"kvoffload corpus: error: the report could not be written in "
              f"{str(report_dir)!r}: {error.strerror or error}", file=sys.stderr)
        return EXIT_FAILS if result.verdict == "fails" else EXIT_USAGE
    if result.failures:
        print()
        # the trace shown is the failing case's, as written (the replay shrinks nothing)
        print(failures_text(result, report_dir).replace("shrunk trace (", "the case's trace ("))
    print(f"\nreport: {report}")
    return exit_status(result.verdict, result.error)
