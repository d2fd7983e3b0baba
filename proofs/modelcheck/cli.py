"""The command line: run checks at a preset, cross-checks, and regenerate the README.

    python proofs/check.py                          every check at TINY
    python proofs/check.py --preset small           the checks that have a SMALL row
    python proofs/check.py --check spec-lru --preset small
    python proofs/check.py --check mutant:EvictsPinnedBlock --laws-only
                                                    the laws alone: no comparison
    python proofs/check.py --list                   the checks, what each checks
    python proofs/check.py --rumur --preset tiny    the Murphi model under rumur
    python proofs/check.py --refinement lru-safe    the reference manager against the spec
    python proofs/check.py --crosshair              CrossHair over the spec's contracts
    python proofs/check.py --diffbehavior           CrossHair: spec vs manager outputs
    python proofs/check.py --all --write-readme     every row of proofs/README.md

Progress goes to stderr every few seconds; the exit status is 1 when any verdict differs
from the one its check calls for.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from kvoffload.spec import NO_STALE_COMPLETIONS, Assumption, Policy

from . import contracts, diffbehavior, rumur, table
from .bounds import PRESETS, Bounds
from .checks import CHECKS, CHECKS_BY_NAME, LAWS_ROWS, Check, laws_only
from .explorer import Result, explore, format_trace, stderr_progress
from .mutants import MUTANTS
from .node import Form
from .refinement import RefinementResult, refine

TOOL = "proofs/check.py (Python BFS, symmetry)"
REFINEMENTS: dict[str, tuple[Policy, Form]] = {
    "lru-ticket": (Policy.LRU, Form.TICKET), "lru-vllm": (Policy.LRU, Form.VLLM),
    "arc-ticket": (Policy.ARC, Form.TICKET), "arc-vllm": (Policy.ARC, Form.VLLM),
}
REFINEMENT_ASSUMPTIONS: dict[Form, tuple[Assumption, ...]] = {
    Form.TICKET: (), Form.VLLM: (NO_STALE_COMPLETIONS,)}
"""vLLM's form is refined at TINY without its duplicate and late reports: with them the
spec's accounting goes wrong (the spec-vllm-form rows) and the space they open does not
finish within minutes even reduced. tests/proofs/test_refinement.py refines it with them
at a smaller bound (slow tier)."""
RUMUR_MUTATIONS = {"TouchQueuesStoring": "mutant:TouchQueuesStoring"}


@dataclass
class Outcome:
    """One row's figures, whether it met its expectation, and its trace text if any."""

    row: table.Row
    expected: bool
    trace: str = ""


def _result_text(result: Result) -> str:
    if result.violation is None:
        return "holds"
    n = len(result.violation.trace)
    return f"violated: {result.violation.prop} ({n} call{'' if n == 1 else 's'})"


LAWS_ONLY = " --laws-only"


def check_command(check: Check, bounds: Bounds, alone: bool = False) -> str:
    """The command that reruns one check at one preset (``alone``: the laws alone)."""
    return (f"python proofs/check.py --check {check.name} --preset {bounds.name}"
            + (LAWS_ONLY if alone else ""))


def check_row(check: Check, bounds: Bounds, result: Result, alone: bool = False) -> table.Row:
    """The README row of one check's result (``alone``: run with ``--laws-only``)."""
    about = laws_only(check).about if alone else check.about
    return table.Row(about, TOOL, bounds.name.upper(), "exhaustive",
                     _result_text(result), str(result.states), f"{result.seconds:.1f} s",
                     check_command(check, bounds, alone))


def run_check(check: Check, bounds: Bounds, quiet: bool = False, alone: bool = False
              ) -> Outcome:
    """Explore one check at one preset; print its verdict, figures and any trace.
    ``alone``: with the comparison off, only the laws and invariants count."""
    name = check.name + (" (laws alone)" if alone else "")
    row_check = check
    if alone:
        check = laws_only(check)
    result = explore(check.setup, bounds, progress=None if quiet else stderr_progress)
    ok = result.verdict == check.expect
    mark = "" if ok else f"  UNEXPECTED (the check calls for: {check.expect})"
    print(f"{name} [{bounds.name.upper()}]: {result.verdict} - {result.states} states, "
          f"{result.transitions} calls, depth {result.depth}, {result.seconds:.1f} s{mark}",
          flush=True)
    trace = ""
    if result.violation is not None:
        v = result.violation
        listing = format_trace(v.trace) if v.trace else "(the initial state)"
        print(f"  {v.prop}: {v.detail}\n" + "    " + listing.replace("\n", "\n    "))
        trace = (f"**{name}** ({bounds.name.upper()}): `{v.prop}` - {v.detail}\n\n"
                 f"```\n{listing}\n```\n")
    return Outcome(check_row(row_check, bounds, result, alone), ok, trace)


def run_rumur(bounds: Bounds, mutation: str | None = None, symmetry: str = "exhaustive",
              threads: int = 1, background: bool = False, node_failure: bool = False
              ) -> Outcome:
    """The Murphi model under rumur; compared with the Python check of the same model
    (``background``: with the opt-in background eviction, as ``spec-lru+background-eviction``;
    ``node_failure``: with the node's failure, as ``spec-lru+node-failure``)."""
    if background and node_failure:
        raise ValueError("the Murphi rows have background eviction or node failure, not both")
    result = rumur.check(bounds, symmetry=symmetry, threads=threads, mutation=mutation,
                         background=background, node_failure=node_failure)
    plain = ("spec-lru+background-eviction" if background
             else "spec-lru+node-failure" if node_failure else "spec-lru")
    ours = CHECKS_BY_NAME[RUMUR_MUTATIONS[mutation] if mutation else plain]
    rules = rumur.trace_rules(result.output)
    name = result.error.split('"')[1] if '"' in result.error else result.error
    n = len(rules)
    text = "holds" if result.verdict == "holds" else (
        f"violated: {name} ({n} rule{'' if n == 1 else 's'})")
    print(f"rumur [{bounds.name.upper()}{', ' + mutation if mutation else ''}"
          f"{', background eviction' if background else ''}"
          f"{', node failure' if node_failure else ''}]: "
          f"{result.verdict} - {result.states} states, {result.rules_fired} rules fired, "
          f"{result.seconds:.1f} s (generate {result.generate_seconds:.1f} s, compile "
          f"{result.compile_seconds:.1f} s, run {result.run_seconds:.1f} s)", flush=True)
    if rules:
        print("    " + "\n    ".join(f"{i}. {r}" for i, r in enumerate(rules, 1)))
    about = ("the spec-lru model (ticket completions) written in Murphi: the spec's "
             "invariants, liveness (some state with no copy in flight stays reachable)")
    if background:
        about = ("the spec-lru model written in Murphi with the opt-in background eviction "
                 "(as spec-lru+background-eviction): the spec's invariants, liveness")
    if node_failure:
        about = ("the spec-lru model written in Murphi with the node's failure (as "
                 "spec-lru+node-failure): the spec's invariants, liveness")
    if mutation:
        about = f"the Murphi model with mutant {mutation} (as {ours.name})"
    command = f"python proofs/check.py --rumur --preset {bounds.name}"
    command += " --background-eviction" if background else ""
    command += " --node-failure" if node_failure else ""
    command += f" --mutation {mutation}" if mutation else ""
    row = table.Row(about, f"rumur {rumur.version().split()[-1]} (symmetry {symmetry}, "
                    f"{threads} thread)", bounds.name.upper(), "exhaustive", text,
                    str(result.states), f"{result.seconds:.1f} s (compile "
                    f"{result.compile_seconds:.1f} s)", command)
    return Outcome(row, result.verdict == ours.expect)


def run_refinement(name: str, bounds: Bounds) -> Outcome:
    """The reference manager against the spec on every reachable state x every call."""
    policy, form = REFINEMENTS[name]
    assumptions = REFINEMENT_ASSUMPTIONS[form]
    result: RefinementResult = refine(bounds, policy, form, assumptions=assumptions)
    print(f"refinement {name} [{bounds.name.upper()}]: {result.verdict} - {result.states} "
          f"states, {result.comparisons} calls compared, {result.seconds:.1f} s", flush=True)
    text = "holds"
    if result.divergence is not None:
        text = "violated: outputs differ"
        print(f"  {result.divergence.problem}\n    "
              + format_trace(result.divergence.trace).replace("\n", "\n    "))
    forms = {Form.TICKET: "ticket", Form.VLLM: "vLLM"}
    assumed = "".join(f", assuming {a.name}" for a in assumptions)
    about = (f"kvoffload.impl.OffloadManager refines the spec ({policy.value.upper()}, "
             f"{forms[form]} completions{assumed}): equal outputs and errors")
    row = table.Row(about, "proofs/check.py --refinement", bounds.name.upper(),
                    "exhaustive: every reachable state x every call", text,
                    str(result.states), f"{result.seconds:.1f} s",
                    f"python proofs/check.py --refinement {name} --preset {bounds.name}")
    return Outcome(row, result.verdict == "holds")


def run_crosshair(timeout: float) -> Outcome:
    """CrossHair over every contract of the spec."""
    result = contracts.run(timeout)
    print(f"crosshair: {result.summary()} - {result.seconds:.1f} s\n  {result.command}")
    for where, status in result.statuses:
        print(f"    {where}: {status}")
    for error in result.errors:
        print(f"    {error}")
    row = table.Row("the spec's PEP 316 contracts (post: and raises: lines, pre: the "
                    "invariants)", f"CrossHair {contracts.version()}",
                    f"--per_condition_timeout={timeout:g}",
                    "sampled: symbolic paths within the timeout", result.summary(), "-",
                    f"{result.seconds:.0f} s", "python proofs/check.py --crosshair")
    return Outcome(row, result.verdict == "holds")


def run_diffbehavior(other: str, timeout: float = diffbehavior.TIMEOUT) -> Outcome:
    """CrossHair diffbehavior between the spec's and a manager's outputs."""
    result = diffbehavior.run(other, timeout)
    print(f"diffbehavior spec vs {other}: {result.summary} - {result.seconds:.1f} s\n"
          f"  {result.command}")
    if result.differs:
        print(result.text)
    expected = result.differs if other == "buggy-manager" else not result.differs
    about = ("outputs of kvoffload.impl.OffloadManager equal the spec's" if other == "manager"
             else "control: a manager with the pre-PR-#41795 lookup differs from the spec")
    row = table.Row(f"{about} (LRU, 2 slots, keys 0..2, up to 6 calls, slots left out)",
                    "CrossHair diffbehavior", f"--per_condition_timeout={timeout:g}",
                    "sampled: symbolic paths within the timeout",
                    result.summary.replace("|", "/")[:120], "-", f"{result.seconds:.0f} s",
                    "python proofs/check.py --diffbehavior")
    return Outcome(row, expected)


def mutant_table(rows: list[table.Row]) -> str:
    """The spec mutants, each caught twice at TINY (by the comparison with the spec, and
    by the laws alone), beside the conformance suite's seeded bugs of the same class."""
    found = {row.command: row.result for row in rows}
    lines = ["| spec mutant (`--check mutant:NAME`) | decision | rule broken | caught by the "
             "comparison: `python proofs/check.py --check mutant:NAME --preset tiny` | "
             "caught by the laws alone: the same command with `--laws-only` | hidden by | "
             "seeded bug of the same class in `kvoffload.conformance.selftest.mutants` |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for m in MUTANTS:
        check = CHECKS_BY_NAME[f"mutant:{m.name}"]
        caught = [found.get(check_command(check, PRESETS["tiny"], alone), NOT_RERUN)
                  for alone in (False, True)]
        suite = f"`{m.name}`" if m.in_suite else "none (a spec-level rule)"
        hidden = f"`{m.hidden_by.name}`" if m.hidden_by else "-"
        lines.append(f"| `{m.name}` | {m.decision} | {m.rule.replace('|', '/')} | {caught[0]} "
                     f"| {caught[1]} | {hidden} | {suite} |")
    return "\n".join(lines)


def _laws_rows() -> list[tuple[Check, Bounds]]:
    """The checks recorded a second time with the laws alone, with their preset."""
    return [(CHECKS_BY_NAME[name], PRESETS[preset]) for name, preset in LAWS_ROWS]


def every_command() -> list[str]:
    """The command of every row of the README, in table order (nothing is run)."""
    commands = [check_command(c, preset)
                for preset in PRESETS.values() for c in CHECKS if preset.name in c.presets]
    commands += [check_command(c, preset, alone=True) for c, preset in _laws_rows()]
    commands += [f"python proofs/check.py --rumur --preset {p}" for p in PRESETS]
    commands.append("python proofs/check.py --rumur --preset tiny --background-eviction")
    commands.append("python proofs/check.py --rumur --preset tiny --node-failure")
    commands.append("python proofs/check.py --rumur --preset tiny --mutation TouchQueuesStoring")
    commands += [f"python proofs/check.py --refinement {n} --preset tiny" for n in REFINEMENTS]
    commands.append("python proofs/check.py --crosshair")
    commands += ["python proofs/check.py --diffbehavior"] * len(diffbehavior.PAIRS)
    return commands


NOT_RERUN = "not rerun since the last change of the spec"


def updated_rows(ran: list[table.Row], recorded: list[table.Row] | None = None
                 ) -> list[table.Row]:
    """Every row of the README in table order: the ones just run, and for the others a
    row that says they were not rerun (never an old result against an older spec), or
    with ``recorded`` (``--keep-recorded``), the row recorded before for that command."""
    fresh: dict[str, list[table.Row]] = {}
    for row in ran:
        fresh.setdefault(row.command, []).append(row)
    old: dict[str, list[table.Row]] = {}
    for row in recorded or ():
        old.setdefault(row.command, []).append(row)
    rows = []
    for command in every_command():
        done = fresh.get(command) or old.get(command)
        rows.append(done.pop(0) if done else table.Row(
            "-", "-", "-", "-", NOT_RERUN, "-", "-", command))
    return rows


def every_row(quiet: bool, long_rows: bool = True) -> list[Outcome]:
    """Every row of the README, in table order; without ``long_rows``, of the
    refinements only lru-ticket, and no CrossHair or diffbehavior."""
    outcomes: list[Outcome] = []
    for preset in PRESETS.values():
        outcomes += [run_check(c, preset, quiet) for c in CHECKS if preset.name in c.presets]
    outcomes += [run_check(c, preset, quiet, alone=True) for c, preset in _laws_rows()]
    for preset in PRESETS.values():
        outcomes.append(run_rumur(preset))
    outcomes.append(run_rumur(PRESETS["tiny"], background=True))
    outcomes.append(run_rumur(PRESETS["tiny"], node_failure=True))
    outcomes.append(run_rumur(PRESETS["tiny"], "TouchQueuesStoring"))
    outcomes += [run_refinement(name, PRESETS["tiny"]) for name in REFINEMENTS
                 if long_rows or name == "lru-ticket"]
    if long_rows:
        outcomes.append(run_crosshair(contracts.TIMEOUT))
        outcomes += [run_diffbehavior(other) for other in diffbehavior.PAIRS]
    return outcomes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python proofs/check.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), help="the bounds (default tiny)")
    parser.add_argument("--check", action="append", metavar="NAME", help="run this check")
    parser.add_argument("--laws-only", action="store_true",
                        help="with --check (or none): the comparison with the spec's "
                        "transitions off, and every environment property and liveness too: "
                        "only the spec's laws and invariants count (a mutant must still be "
                        "caught, the spec must still hold)")
    parser.add_argument("--list", action="store_true", help="list the checks")
    parser.add_argument("--rumur", action="store_true", help="run the Murphi model")
    parser.add_argument("--mutation", choices=sorted(RUMUR_MUTATIONS))
    parser.add_argument("--background-eviction", action="store_true",
                        help="with --rumur: the Murphi model with the opt-in background "
                             "eviction (docs/spec.md D14)")
    parser.add_argument("--node-failure", action="store_true",
                        help="with --rumur: the Murphi model with the node's failure "
                             "(docs/spec.md D15)")
    parser.add_argument("--symmetry", default="exhaustive",
                        choices=("exhaustive", "heuristic", "off"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--refinement", nargs="?", const="all",
                        choices=("all", *REFINEMENTS))
    parser.add_argument("--crosshair", action="store_true")
    parser.add_argument("--diffbehavior", action="store_true",
                        help="CrossHair diffbehavior: spec vs manager, and a buggy control")
    parser.add_argument("--timeout", type=float, default=contracts.TIMEOUT,
                        help="CrossHair's --per_condition_timeout")
    parser.add_argument("--all", action="store_true", help="every row of the README")
    parser.add_argument("--checks", action="store_true",
                        help="every check at every preset, the rumur rows and the lru-ticket "
                        "refinement (the README rows that take minutes, not hours)")
    parser.add_argument("--write-readme", action="store_true",
                        help="with --all: rewrite the results in proofs/README.md")
    parser.add_argument("--update-readme", action="store_true",
                        help="rewrite the results in proofs/README.md with the rows run "
                        "now; every other row says it was not rerun")
    parser.add_argument("--keep-recorded", action="store_true",
                        help="with --update-readme: rows not run now keep what was recorded "
                        "(only when neither the spec nor the manager changed since)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    bounds = PRESETS[args.preset or "tiny"]
    if args.write_readme and not args.all:
        parser.error("--write-readme needs --all (the table has every row)")
    if args.list:
        for check in CHECKS:
            print(f"{check.name:55} {','.join(check.presets):11} {check.about}")
        return 0
    outcomes: list[Outcome] = []
    if args.all:
        outcomes = every_row(args.quiet)
    elif args.checks:
        outcomes = every_row(args.quiet, long_rows=False)
    elif args.rumur:
        if args.background_eviction and args.node_failure:
            parser.error("--background-eviction and --node-failure: one at a time")
        outcomes.append(run_rumur(bounds, args.mutation, args.symmetry, args.threads,
                                  args.background_eviction, args.node_failure))
    elif args.refinement:
        names = list(REFINEMENTS) if args.refinement == "all" else [args.refinement]
        outcomes += [run_refinement(name, bounds) for name in names]
    elif args.crosshair:
        outcomes.append(run_crosshair(args.timeout))
    elif args.diffbehavior:
        outcomes += [run_diffbehavior(other) for other in diffbehavior.PAIRS]
    else:
        unknown = [n for n in args.check or () if n not in CHECKS_BY_NAME]
        if unknown:
            parser.error(f"unknown check(s) {unknown}; see --list")
        chosen = [CHECKS_BY_NAME[n] for n in args.check] if args.check else [
            c for c in CHECKS if bounds.name in c.presets]
        outcomes += [run_check(c, bounds, args.quiet, args.laws_only) for c in chosen]
    failed = [o.row.command for o in outcomes if not o.expected]
    if args.write_readme or args.update_readme:
        rows = [o.row for o in outcomes]
        if args.update_readme:
            rows = updated_rows(rows, table.read() if args.keep_recorded else None)
        traces = "\n".join(o.trace for o in outcomes if o.trace)
        if args.keep_recorded and not traces.strip():
            traces = table.read_traces()
        table.write(rows, traces, mutant_table(rows))
        print(f"wrote {table.README}")
    if failed:
        print(f"{len(failed)} verdict(s) differ from what the checks call for:", *failed,
              sep="\n  ", file=sys.stderr)
        return 1
    return 0
