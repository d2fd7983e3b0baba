"""Run CrossHair over a file of contracts written against the spec's public API.

    python -m proofs.crosshair_check FILE [FILE ...] [--timeout S] [--domains lru,arc]
                                     [--mutant NAME] [--manager module:Class]
    python -m proofs.crosshair_check --power [--timeout S]

The first form is ``crosshair check FILE --per_condition_timeout=S --report_all`` with
the project's plugin (:mod:`proofs.crosshair.plugin`): ``CacheState`` arguments range
over the states the spec reaches at the named bounds, the spec runs natively, and
``--mutant`` / ``--manager`` put a spec mutant or a manager in place. It prints
CrossHair's report and one line per contract, and exits 1 if a contract was refuted,
0 if none was, 2 if the run failed. The second form measures CrossHair's power on the
fixed population of ``proofs/README.md`` (section CrossHair) and prints its table.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "proofs" / "crosshair" / "extra_plugin.py"
TIMEOUT = 10.0
"""Seconds of CPU per contract (``--per_condition_timeout``) unless told otherwise."""


@dataclass(frozen=True)
class Verdict:
    """What CrossHair said about one contract."""

    where: str
    status: str
    """``refuted``, ``confirmed`` (every path exhausted), ``not confirmed`` (no
    counterexample within the time) or ``unmet`` (no input met the precondition)."""
    text: str


@dataclass(frozen=True)
class Run:
    verdicts: tuple[Verdict, ...]
    seconds: float
    command: str
    output: str

    @property
    def refuted(self) -> bool:
        return any(v.status == "refuted" for v in self.verdicts)


def _path() -> str:
    parts = [str(ROOT / p) for p in ("spec", "impl", "conformance", "benchmarks")] + [str(ROOT)]
    old = os.environ.get("PYTHONPATH")
    return os.pathsep.join(parts + ([old] if old else []))


def prepare(domains: str) -> None:
    """Build the domains and cache them (CrossHair's audit wall forbids writing files)."""
    sys.path[:0] = [p for p in _path().split(os.pathsep) if p not in sys.path]
    from proofs.crosshair.domain import BOUNDS, load

    for name in domains.split(","):
        load(BOUNDS[name.strip()], write=True)


_STATUS = {"Confirmed over all paths.": "confirmed", "Not confirmed.": "not confirmed",
           "Unable to meet precondition.": "unmet"}


def check(targets: Sequence[str], timeout: float = TIMEOUT, domains: str = "lru,arc",
          mutant: str | None = None, manager: str | None = None) -> Run:
    """One ``crosshair check`` over ``targets`` (files, or dotted function names)."""
    prepare(domains)
    env = dict(os.environ, PYTHONPATH=_path(), KVOFFLOAD_CROSSHAIR_DOMAINS=domains)
    for name, value in (("KVOFFLOAD_CROSSHAIR_MUTANT", mutant),
                        ("KVOFFLOAD_CROSSHAIR_MANAGER", manager)):
        env.pop(name, None)
        if value:
            env[name] = value
    argv = [sys.executable, "-m", "crosshair", "check", *targets,
            f"--extra_plugin={PLUGIN}", f"--per_condition_timeout={timeout:g}", "--report_all"]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=ROOT, env=env)
    seconds = time.perf_counter() - start
    output = done.stdout + done.stderr
    verdicts = []
    for line in done.stdout.splitlines():
        found = re.match(r"(.+?:\d+): (info|error): (.*)$", line.strip())
        if found is None:
            continue
        where = re.sub(r"^.*?([\w]+\.py:\d+)$", r"\1", found.group(1))
        status = "refuted" if found.group(2) == "error" else next(
            (word for text, word in _STATUS.items() if found.group(3).startswith(text[:-1])),
            "?")
        verdicts.append(Verdict(where, status, found.group(3)))
    if done.returncode not in (0, 1) or (done.returncode == 1 and not verdicts):
        raise RuntimeError(f"crosshair exited with {done.returncode}:\n{output[-3000:]}")
    settings = [f"--timeout {timeout:g}", f"--domains {domains}"]
    settings += [f"--mutant {mutant}"] if mutant else []
    settings += [f"--manager {manager}"] if manager else []
    command = " ".join(["python -m proofs.crosshair_check", *targets, *settings])
    return Run(tuple(verdicts), seconds, command, output)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m proofs.crosshair_check",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("targets", nargs="*", help="contract files (or dotted functions)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT,
                        help=f"CPU seconds per contract (default {TIMEOUT:g})")
    parser.add_argument("--domains", default="lru,arc",
                        help="the bounds CacheState arguments range over (default lru,arc)")
    parser.add_argument("--mutant", help="a spec mutant of proofs/modelcheck/mutants.py")
    parser.add_argument("--manager",
                        help="module:Class, the manager proofs/crosshair/refines.py drives")
    parser.add_argument("--power", action="store_true",
                        help="measure the refutation power on the fixed population")
    parser.add_argument("--part", action="append", choices=("planted", "mutants", "managers"),
                        help="with --power: only this part of the population (repeatable)")
    args = parser.parse_args(argv)
    if args.power:
        from proofs.crosshair import power

        return power.main(args.timeout, tuple(args.part or power.PARTS))
    if not args.targets:
        parser.error("name a file of contracts (or --power)")
    try:
        run = check(args.targets, args.timeout, args.domains, args.mutant, args.manager)
    except RuntimeError as error:
        print(error, file=sys.stderr)
        return 2
    print(run.output.rstrip())
    for verdict in run.verdicts:
        print(f"{verdict.where}: {verdict.status}")
    print(f"{sum(v.status == 'refuted' for v in run.verdicts)} refuted of {len(run.verdicts)} "
          f"contract(s) in {run.seconds:.1f} s: {run.command}")
    return 1 if run.refuted else 0


if __name__ == "__main__":
    sys.exit(main())
