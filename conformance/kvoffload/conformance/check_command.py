"""``kvoffload check``: options, the run, and what it prints and writes."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from kvoffload.spec import ASSUMPTIONS, Policy

from .config import (
    DEFAULT_CAPACITY,
    DEFAULT_MAX_EXAMPLES,
    DEFAULT_STEPS,
    CheckConfig,
    Level,
    Profile,
)
from .errors import UsageError
from .targets import ADAPTERS, DEFAULT_TARGET

SELF_TEST_SEED = 20261202
"""The self-test's seed unless --seed is given, so its verdicts are reproducible."""


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
    parser.add_argument("--capacity", type=int, default=DEFAULT_CAPACITY,
                        help=f"the largest tier, in slots; each example draws 1..N "
                             f"(default {DEFAULT_CAPACITY})")
    parser.add_argument("--max-examples", type=int, default=DEFAULT_MAX_EXAMPLES,
                        help=f"examples to run (default {DEFAULT_MAX_EXAMPLES})")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS,
                        help=f"calls per example (default {DEFAULT_STEPS})")
    parser.add_argument("--max-keys-per-call", type=int, default=0, metavar="N",
                        help="generate calls naming at most N keys (default 0: no limit); "
                             "1 for engines that store one chunk per call, as LMCache's "
                             "backends do")
    parser.add_argument("--seed", type=int, default=None,
                        help="random seed (default: a fresh one, printed in the report)")
    parser.add_argument("--report-dir", type=Path, default=Path("kvoffload-report"),
                        help="where report.json and reproducers go (default: ./kvoffload-report)")
    parser.add_argument("--junit", type=Path, default=None, help="also write JUnit XML here")
    parser.add_argument("--self-test", action="store_true",
                        help="check the suite itself: seeded-bug variants of the reference "
                             "manager must fail, controls must pass")
    parser.add_argument("--quiet", action="store_true", help="no progress display")


def config_of(args: argparse.Namespace) -> CheckConfig:
    return CheckConfig(
        profile=Profile(args.profile), policy=Policy(args.policy), level=Level(args.level),
        assume=tuple(args.assume), capacity=args.capacity, max_examples=args.max_examples,
        steps=args.steps, seed=args.seed, adapter=args.adapter,
        max_keys_per_call=args.max_keys_per_call)


def run_check_command(args: argparse.Namespace) -> int:
    try:
        config = config_of(args)
        if args.self_test:
            if args.target is not None:
                raise UsageError("--self-test checks the suite itself; give no TARGET")
            return _self_test(args, config)
        return _check(args, config)
    except UsageError as error:
        print(f"kvoffload check: error: {error}", file=sys.stderr)
        return 2


def _check(args: argparse.Namespace, config: CheckConfig) -> int:
    from .report import (
        check_junit,
        configuration_text,
        counterexample_text,
        summary_text,
        write_check_report,
    )
    from .runner import run_check

    target = args.target or DEFAULT_TARGET
    target = _absolute_file(target)
    result = run_check(target, config, show_progress=not args.quiet)
    print(configuration_text(result))
    print()
    print(summary_text(result))
    report, reproducer = write_check_report(result, args.report_dir)
    if result.violation is not None:
        print()
        print(counterexample_text(result.violation, str(reproducer) if reproducer else None))
    if result.error is not None:
        print(f"\nkvoffload check: error: the run did not finish: {result.error}",
              file=sys.stderr)
    print(f"\nreport: {report}")
    if args.junit is not None:
        args.junit.parent.mkdir(parents=True, exist_ok=True)
        args.junit.write_text(check_junit(result), encoding="utf-8")
    return {"conforms": 0, "fails": 1}.get(result.verdict, 2)


def _absolute_file(target: str) -> str:
    """``path/to/file.py:attr`` with an absolute path, so reproducers run from anywhere."""
    where, sep, attr = target.rpartition(":")
    if sep and (where.endswith(".py") or "/" in where) and Path(where).is_file():
        return f"{Path(where).resolve()}:{attr}"
    return target


def _self_test(args: argparse.Namespace, config: CheckConfig) -> int:
    from .selftest import run_self_test
    from .selftest_report import print_self_test, write_self_test

    if config.seed is None:
        config = replace(config, seed=SELF_TEST_SEED)
    report = run_self_test(config, show_progress=not args.quiet)
    print_self_test(report, config)
    write_self_test(report, config, args.report_dir, args.junit)
    return 0 if report.ok else 1
