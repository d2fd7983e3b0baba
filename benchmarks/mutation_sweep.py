"""How strong ``kvoffload check`` is against seeded bugs: mutants of the reference manager.

Each mutant is a copy of the package ``kvoffload.impl`` with one change to one of the
torch-free manager's modules (``manager.py``, ``lru.py``, ``arc.py``, ``orphans.py``,
``records.py``, ``eviction.py``), made by a small mutator over the standard library's
``ast``: comparison flips, negated conditions, ``and``/``or`` swapped, integer constants
+-1, ``True``/``False`` swapped, ``+``/``-`` swapped, ``min``/``max`` swapped, two
positional arguments swapped, and the removal of one statement that is a call, an
augmented assignment or a ``del``. ``kvoffload check`` (no target: the built-in
reference manager) then runs against it with that copy first on ``PYTHONPATH``; exit
status 1 kills the mutant, 0 lets it survive. A mutant whose import fails, or whose
basic calls (a store, its completion, a load, touch, events, reset) raise, is *killed
trivially* and is not run through the judge. A mutant on a line the reference run at
the same seed never executes is *unreached* (a survivor whose cause is known) and is
not run either, unless ``--run-unreached``.

    python benchmarks/mutation_sweep.py list                       # mutants per file and operator
    python benchmarks/mutation_sweep.py coverage --policy lru --out /tmp/cov-lru.json
    python benchmarks/mutation_sweep.py run --out /tmp/lru.jsonl --coverage /tmp/cov-lru.json
    python benchmarks/mutation_sweep.py run --out /tmp/arc.jsonl --files arc.py --policy arc \\
        --coverage /tmp/cov-arc.json
    python benchmarks/mutation_sweep.py summary /tmp/lru.jsonl /tmp/arc.jsonl
    python benchmarks/mutation_sweep.py show manager.py:4211.0    # one mutant's diff
    python benchmarks/mutation_sweep.py tests manager.py:4211.0   # does tests/impl kill it?

``run`` passes ``--seed 1 --no-database --quiet --stop-at-first --in-process`` and the
default budget; ``--check-args`` adds more (``--level exact``, ``--max-examples 1500``,
a later ``--seed`` wins), ``--host`` drops ``--in-process``; ``--only`` names mutants,
``--shuffle`` runs them in random order (so a run stopped early is a random sample),
``--fraction`` draws that share of each (file, operator) group. It runs one mutant at a
time against a copy of the judge taken when it starts (editing the worktree meanwhile
changes nothing) and appends one JSON line per mutant to ``--out`` (a rerun skips the
mutants already there). The figures depend on the seed and the budget; none of this is
a test. Results of 7 December 2026: ``docs/conformance.md`` (Seeded mutations).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "impl" / "kvoffload" / "impl"
FILES = ("manager.py", "lru.py", "arc.py", "orphans.py", "records.py", "eviction.py")
PATH = [ROOT / "spec", ROOT / "impl", ROOT / "conformance"]

_FLIPS: dict[type[ast.cmpop], tuple[type[ast.cmpop], ...]] = {
    ast.Lt: (ast.LtE, ast.Gt), ast.LtE: (ast.Lt, ast.GtE),
    ast.Gt: (ast.GtE, ast.Lt), ast.GtE: (ast.Gt, ast.LtE),
    ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,),
    ast.In: (ast.NotIn,), ast.NotIn: (ast.In,),
    ast.Is: (ast.IsNot,), ast.IsNot: (ast.Is,),
}
_SYMBOLS: dict[type[ast.AST], str] = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
    ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not",
    ast.Add: "+", ast.Sub: "-", ast.And: "and", ast.Or: "or",
}
_SMOKE = """
import sys
from kvoffload.impl import OffloadManager
m = OffloadManager(4, sys.argv[1])
plan = m.prepare_store([1, 2, 3])
m.complete_store(plan.keys, ticket=plan.ticket)
m.lookup(1); m.lookup(9)
load = m.prepare_load([1])
m.complete_load([1], ticket=load.ticket)
m.touch([2, 1])
m.prepare_store([4, 5, 6])
m.take_events()
m.reset_cache()
"""


@dataclass(frozen=True)
class Mutant:
    """One change: the ``index``-th site of ``file`` in walk order, ``variant`` of it."""

    file: str
    site: int
    variant: int
    op: str
    line: int
    end_line: int
    detail: str

    @property
    def name(self) -> str:
        return f"{self.file}:{self.site}.{self.variant}"


def _skipped(node: ast.AST) -> bool:
    """Subtrees the mutator leaves alone: docstrings, annotations, ``__slots__``,
    messages of raised errors, decorators and ``TYPE_CHECKING`` blocks."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(
            node.value.value, str):
        return True
    if isinstance(node, ast.Raise):
        return True
    if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and (
            node.test.id == "TYPE_CHECKING"):
        return True
    return isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets)


def _walk(tree: ast.AST) -> Iterator[tuple[ast.AST, ast.AST | None]]:
    """Every node worth mutating with its parent, in a fixed (depth-first) order."""
    stack: list[tuple[ast.AST, ast.AST | None]] = [(tree, None)]
    while stack:
        node, parent = stack.pop()
        if _skipped(node):
            continue
        yield node, parent
        children: list[ast.AST] = []
        for field, value in ast.iter_fields(node):
            if field in ("annotation", "returns", "decorator_list", "type_comment"):
                continue
            if isinstance(value, ast.AST):
                children.append(value)
            elif isinstance(value, list):
                children.extend(v for v in value if isinstance(v, ast.AST))
        stack.extend((child, node) for child in reversed(children))


def _variants(node: ast.AST, parent: ast.AST | None) -> list[tuple[str, str]]:
    """(operator, description) for each mutation of ``node`` itself, in a fixed order."""
    found: list[tuple[str, str]] = []
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            for new in _FLIPS[type(op)]:
                found.append(("cmp", f"{_SYMBOLS[type(op)]} -> {_SYMBOLS[new]} (#{i})"))
    if isinstance(node, (ast.If, ast.While, ast.IfExp)):
        found.append(("negate", "condition negated"))
    if isinstance(node, ast.comprehension):
        found.extend(("negate", f"comprehension filter #{i} negated")
                     for i in range(len(node.ifs)))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and not (
            isinstance(parent, (ast.If, ast.While, ast.IfExp)) and parent.test is node):
        found.append(("negate", "not removed"))
    if isinstance(node, ast.BoolOp):
        found.append(("boolop", "and -> or" if isinstance(node.op, ast.And) else "or -> and"))
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        found.append(("const", f"{node.value} -> {not node.value}"))
    if isinstance(node, ast.Constant) and type(node.value) is int:
        found.append(("const", f"{node.value} -> {node.value + 1}"))
        found.append(("const", f"{node.value} -> {node.value - 1}"))
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, (ast.Add, ast.Sub)):
        new_op = ast.Sub if isinstance(node.op, ast.Add) else ast.Add
        found.append(("arith", f"{_SYMBOLS[type(node.op)]} -> {_SYMBOLS[new_op]}"))
    if isinstance(node, ast.Name) and node.id in ("min", "max"):
        found.append(("call", f"{node.id} -> {'max' if node.id == 'min' else 'min'}"))
    if isinstance(node, ast.Call) and len(node.args) == 2 and not any(
            isinstance(a, ast.Starred) for a in node.args):
        found.append(("swap", "two positional arguments swapped"))
    if isinstance(node, (ast.AugAssign, ast.Delete)) or (
            isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        found.append(("delete", f"statement removed: {ast.unparse(node)[:60]}"))
    return found


def mutants(file: str) -> list[Mutant]:
    """Every mutant of ``file`` (a name in :data:`FILES`)."""
    tree = ast.parse((PACKAGE / file).read_text())
    found: list[Mutant] = []
    for site, (node, parent) in enumerate(_walk(tree)):
        for variant, (op, detail) in enumerate(_variants(node, parent)):
            where = node.target if isinstance(node, ast.comprehension) else node  # no lineno
            line = getattr(where, "lineno", 0)
            end = node.ifs[-1] if isinstance(node, ast.comprehension) and node.ifs else where
            found.append(Mutant(file, site, variant, op, line,
                                getattr(end, "end_lineno", line) or line, detail))
    return found


def by_name() -> dict[str, Mutant]:
    """Every mutant of every file in :data:`FILES`, by name."""
    return {m.name: m for f in FILES for m in mutants(f)}


def _not(test: ast.expr) -> ast.expr:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand
    return ast.UnaryOp(op=ast.Not(), operand=test)


def _apply(node: ast.AST, parent: ast.AST | None, op: str, detail: str,
           variant: int, siblings: list[tuple[str, str]]) -> None:
    """Change ``node`` in place (or in ``parent``) as the mutant says."""
    rank = sum(1 for o, _ in siblings[:variant] if o == op)  # which of this op's variants
    if op == "cmp" and isinstance(node, ast.Compare):
        position = int(detail.rsplit("#", 1)[1].rstrip(")"))
        choices = _FLIPS[type(node.ops[position])]
        before = sum(1 for o, d in siblings[:variant]
                     if o == "cmp" and d.endswith(f"(#{position})"))
        node.ops[position] = choices[before]()
    elif op == "negate" and isinstance(node, (ast.If, ast.While, ast.IfExp)):
        node.test = _not(node.test)
    elif op == "negate" and isinstance(node, ast.comprehension):
        node.ifs[rank] = _not(node.ifs[rank])
    elif op == "negate" and isinstance(node, ast.UnaryOp):
        _replace(parent, node, node.operand)
    elif op == "boolop" and isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif op == "const" and isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            node.value = not value
        elif isinstance(value, int):
            node.value = value + (1 if rank == 0 else -1)
    elif op == "arith" and isinstance(node, (ast.BinOp, ast.AugAssign)):
        node.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
    elif op == "call" and isinstance(node, ast.Name):
        node.id = "max" if node.id == "min" else "min"
    elif op == "swap" and isinstance(node, ast.Call):
        node.args.reverse()
    elif op == "delete":
        _replace(parent, node, ast.Pass())
    else:
        raise ValueError(f"cannot apply {op} to {type(node).__name__}")


def _replace(parent: ast.AST | None, old: ast.AST, new: ast.AST) -> None:
    if parent is None:
        raise ValueError("no parent")
    for field, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, field, new)
            return
        if isinstance(value, list) and any(v is old for v in value):
            value[next(i for i, v in enumerate(value) if v is old)] = new
            return
    raise ValueError("child not found")


def mutated_source(mutant: Mutant) -> str:
    """The source of ``mutant.file`` with the mutant's one change."""
    tree = ast.parse((PACKAGE / mutant.file).read_text())
    for site, (node, parent) in enumerate(_walk(tree)):
        if site == mutant.site:
            siblings = _variants(node, parent)
            op, detail = siblings[mutant.variant]
            if (op, detail) != (mutant.op, mutant.detail):
                raise ValueError(f"{mutant.name}: the site moved")
            _apply(node, parent, op, detail, mutant.variant, siblings)
            return ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    raise ValueError(f"{mutant.name}: no such site")


def _diff(mutant: Mutant) -> str:
    original = ast.unparse(ast.parse((PACKAGE / mutant.file).read_text())).splitlines()
    changed = mutated_source(mutant).splitlines()
    return "\n".join(line for line in difflib.unified_diff(original, changed, lineterm="", n=1)
                     if not line.startswith(("---", "+++")))


def _env(copy_root: Path) -> dict[str, str]:
    """The mutant's package first, then the judge: the spec and the suite as copied
    beside it when the run began (:func:`_copy_package`), else the worktree's."""
    env = dict(os.environ)
    frozen = [copy_root.parent / "judge" / p.name for p in PATH]
    path = frozen if all(p.is_dir() for p in frozen) else PATH
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (copy_root, *path))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the judge's copy compiled once (see run)
    return env


def _copy_package(into: Path) -> Path:
    """A copy of the package to mutate, and one of the judge (so that editing the
    worktree during a sweep changes neither)."""
    root = into / "pkg"
    shutil.copytree(PACKAGE, root / "kvoffload" / "impl",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for path in PATH:
        shutil.copytree(path, into / "judge" / path.name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _judge(copy_root: Path, policy: str, check_args: Sequence[str], host: bool,
           timeout: float, report_dir: Path) -> dict[str, Any]:
    """Run ``kvoffload check`` on the copy; return rc, seconds and the failing properties."""
    command = [sys.executable, "-m", "kvoffload.conformance.cli", "check", "--seed", "1",
               "--no-database", "--quiet", "--stop-at-first", "--policy", policy,
               "--report-dir", str(report_dir), *check_args]
    if not host:
        command.append("--in-process")
    shutil.rmtree(report_dir, ignore_errors=True)
    start = time.perf_counter()
    try:
        done = subprocess.run(command, env=_env(copy_root), capture_output=True, text=True,
                              timeout=timeout, check=False)
        rc: int | str = done.returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    seconds = round(time.perf_counter() - start, 2)
    failed: list[str] = []
    report = report_dir / "report.json"
    if report.exists():
        data = json.loads(report.read_text())
        failed = sorted({str(v.get("property")) for v in data.get("violations") or ()})
    return {"rc": rc, "seconds": seconds, "failed": failed}


def _smoke(copy_root: Path, policy: str) -> bool:
    done = subprocess.run([sys.executable, "-c", _SMOKE, policy], env=_env(copy_root),
                          capture_output=True, timeout=60, check=False)
    return done.returncode == 0


def _covered(coverage: Path | None) -> dict[str, set[int]] | None:
    if coverage is None:
        return None
    data = json.loads(coverage.read_text())
    return {file: set(lines) for file, lines in data.items()}


def _reached(mutant: Mutant, covered: dict[str, set[int]] | None) -> bool:
    lines = set(range(mutant.line, mutant.end_line + 1))
    return covered is None or bool(lines & covered.get(mutant.file, set()))


def _stratified(chosen: list[Mutant], covered: dict[str, set[int]] | None, fraction: float,
                seed: int) -> list[Mutant]:
    """Every unreached mutant, and of the reached ones ``fraction`` of each (file,
    operator) group, drawn at random (rounded up)."""
    groups: dict[tuple[str, str], list[Mutant]] = defaultdict(list)
    kept = [m for m in chosen if not _reached(m, covered)]
    for mutant in chosen:
        if _reached(mutant, covered):
            groups[(mutant.file, mutant.op)].append(mutant)
    draw = random.Random(seed)
    for _, group in sorted(groups.items()):
        kept += draw.sample(group, -(-len(group) * round(fraction * 1000) // 1000))
    return sorted(kept, key=lambda m: (FILES.index(m.file), m.site, m.variant))


def run(args: argparse.Namespace) -> None:
    chosen = [m for f in args.files for m in mutants(f)]
    if args.only:
        chosen = [m for m in chosen if m.name in set(args.only)]
    covered = _covered(Path(args.coverage) if args.coverage else None)
    if args.fraction < 1.0:
        chosen = _stratified(chosen, covered, args.fraction, args.sample_seed)
    if args.shuffle:  # any prefix of the run is then a random sample
        random.Random(args.sample_seed).shuffle(chosen)
    out = Path(args.out)
    done = set()
    if out.exists():
        done = {json.loads(line)["name"] for line in out.read_text().splitlines() if line}
    check_args = args.check_args.split() if args.check_args else []
    with tempfile.TemporaryDirectory(prefix="mutants-") as scratch:
        copy_root = _copy_package(Path(scratch))
        target = copy_root / "kvoffload" / "impl"
        for number, mutant in enumerate(chosen):
            if mutant.name in done:
                continue
            row: dict[str, Any] = {"name": mutant.name, **asdict(mutant), "policy": args.policy,
                                   "check_args": check_args, "host": args.host}
            if not args.run_unreached and not _reached(mutant, covered):
                row.update(status="unreached", rc=None, seconds=0.0, failed=[])
            else:
                # A mutant's file may keep its size and time: no bytecode of another.
                shutil.rmtree(target / "__pycache__", ignore_errors=True)
                (target / mutant.file).write_text(mutated_source(mutant))
                try:
                    if not _smoke(copy_root, args.policy):
                        row.update(status="trivial", rc=None, seconds=0.0, failed=[])
                    else:
                        row.update(_judge(copy_root, args.policy, check_args, args.host,
                                          args.timeout, Path(scratch) / "report"))
                        row["status"] = {0: "survived", 1: "killed", "timeout": "killed"}.get(
                            row["rc"], "error")
                finally:
                    shutil.copyfile(PACKAGE / mutant.file, target / mutant.file)
            with out.open("a") as stream:
                stream.write(json.dumps(row) + "\n")
            if not args.quiet:
                print(f"[{number + 1}/{len(chosen)}] {mutant.name} {mutant.op} "
                      f"line {mutant.line}: {row['status']} {row['seconds']}s {row['failed']}",
                      flush=True)


TESTS = ("test_lru.py", "test_orphans.py", "test_records.py", "test_arc.py", "test_manager.py",
         "test_manager_scenarios.py", "test_manager_vs_spec.py",
         "test_manager_job_identity.py", "test_manager_arc_paper.py")
"""The project's tests of the torch-free manager (``tests/impl``, the default tier)."""


def tests(args: argparse.Namespace) -> None:
    """Does the project's own test suite (:data:`TESTS`) kill each named mutant?"""
    every = by_name()
    for name in args.names:
        mutant = every[name]
        with tempfile.TemporaryDirectory(prefix="mutants-tests-") as scratch:
            copy_root = _copy_package(Path(scratch))
            (copy_root / "kvoffload" / "impl" / mutant.file).write_text(mutated_source(mutant))
            env = {**_env(copy_root), "CI": "true"}
            done = subprocess.run(
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-x",
                 *(str(ROOT / "tests" / "impl" / t) for t in TESTS)],
                env=env, cwd=ROOT, capture_output=True, text=True, check=False)
            last = done.stdout.strip().splitlines()[-1:] or ["?"]
            failed = [line for line in done.stdout.splitlines() if line.startswith("FAILED")]
            print(f"{name}: {'killed' if done.returncode else 'survived'} by tests/impl "
                  f"({last[0]}) {failed[:1]}", flush=True)


def coverage(args: argparse.Namespace) -> None:
    """Lines of the target files that a reference run (in this process) executes."""
    for path in reversed(PATH):
        sys.path.insert(0, str(path))
    os.environ["PYTHONPATH"] = os.pathsep.join(str(p) for p in PATH)
    wanted = {str(PACKAGE / f): f for f in FILES}
    hit: dict[str, set[int]] = defaultdict(set)

    def local(frame: FrameType, event: str, arg: object) -> Any:
        if event == "line":
            hit[wanted[frame.f_code.co_filename]].add(frame.f_lineno)
        return local

    def tracer(frame: FrameType, event: str, arg: object) -> Any:
        if frame.f_code.co_filename in wanted:
            hit[wanted[frame.f_code.co_filename]].add(frame.f_lineno)
            return local
        return None

    from kvoffload.conformance.cli import main  # the judge, after the path is set

    threading.settrace(tracer)
    sys.settrace(tracer)
    argv = ["check", "--seed", "1", "--no-database", "--quiet", "--in-process",
            "--policy", args.policy, "--report-dir",
            tempfile.mkdtemp(prefix="mutants-cov-"), *args.check_args.split()]
    try:
        main(argv)
    except SystemExit:
        pass
    finally:
        sys.settrace(None)
        threading.settrace(None)
    # Module-level lines ran at import, before the tracer: count every line outside a def.
    for file in FILES:
        tree = ast.parse((PACKAGE / file).read_text())
        inside = {line for node in ast.walk(tree)
                  if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)}
        total = len((PACKAGE / file).read_text().splitlines())
        hit[file] |= set(range(1, total + 1)) - inside
    Path(args.out).write_text(json.dumps({f: sorted(v) for f, v in hit.items()}))


def summary(args: argparse.Namespace) -> None:
    rows = [json.loads(line) for path in args.results
            for line in Path(path).read_text().splitlines() if line]
    by: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    cpu = 0.0
    for row in rows:
        by[(row["file"], row["op"])][row["status"]] += 1
        by[(row["file"], "ALL")][row["status"]] += 1
        by[("ALL", "ALL")][row["status"]] += 1
        cpu += row["seconds"]
    statuses = ("killed", "trivial", "survived", "unreached", "error")
    print(f"{'file':12} {'op':8} {'total':>6} " + " ".join(f"{s:>9}" for s in statuses))
    for (file, op), counts in sorted(by.items()):
        print(f"{file:12} {op:8} {sum(counts.values()):6} "
              + " ".join(f"{counts[s]:9}" for s in statuses))
    print(f"judge seconds (wall, one process): {cpu:.0f}")
    if args.survivors:
        for row in rows:
            if row["status"] in ("survived", "error"):
                print(f"{row['name']} ({row['policy']}) line {row['line']} {row['op']}: "
                      f"{row['detail']}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="count the mutants per file and operator")
    show = sub.add_parser("show", help="print mutants' diffs")
    show.add_argument("names", nargs="+")
    cov = sub.add_parser("coverage", help="the lines a reference run executes")
    cov.add_argument("--policy", default="lru")
    cov.add_argument("--check-args", default="")
    cov.add_argument("--out", required=True)
    go = sub.add_parser("run", help="run the judge against mutants")
    go.add_argument("--files", nargs="+", default=list(FILES), choices=FILES)
    go.add_argument("--only", nargs="*", help="mutant names (FILE:SITE.VARIANT)")
    go.add_argument("--policy", default="lru", choices=("lru", "arc"))
    go.add_argument("--check-args", default="", help="more options for kvoffload check")
    go.add_argument("--host", action="store_true", help="targets in a host process")
    go.add_argument("--timeout", type=float, default=180.0, help="seconds per mutant")
    go.add_argument("--coverage", help="a coverage file: unreached mutants are not run")
    go.add_argument("--run-unreached", action="store_true")
    go.add_argument("--fraction", type=float, default=1.0,
                    help="run this fraction of each (file, operator) group's reached mutants")
    go.add_argument("--sample-seed", type=int, default=1)
    go.add_argument("--shuffle", action="store_true", help="run the mutants in random order")
    go.add_argument("--out", required=True, help="JSON lines, appended")
    go.add_argument("--quiet", action="store_true")
    suite = sub.add_parser("tests", help="run tests/impl against mutants")
    suite.add_argument("names", nargs="+")
    summ = sub.add_parser("summary", help="tables of results files")
    summ.add_argument("results", nargs="+")
    summ.add_argument("--survivors", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "list":
        counts = Counter((m.file, m.op) for f in FILES for m in mutants(f))
        for (file, op), n in sorted(counts.items()):
            print(f"{file:12} {op:8} {n}")
        print(f"total {sum(counts.values())}")
    elif args.command == "show":
        every = by_name()
        for name in args.names:
            print(f"# {name}: {every[name].op} {every[name].detail}\n{_diff(every[name])}")
    elif args.command == "coverage":
        coverage(args)
    elif args.command == "run":
        run(args)
    elif args.command == "tests":
        tests(args)
    else:
        summary(args)


if __name__ == "__main__":
    main()
