"""docs/engines.md, generated: a list of ``kvoffload check`` runs in, the page out.

Each :class:`Run` is one plain command line (``kvoffload check vllm==X ...``, run in a
subprocess with ``--report-dir``); the page is built from the report.json files those
runs write, so another engine or a re-recorded verdict is one more entry in
:data:`RUNS`. Regenerate (downloads each missing vLLM wheel, about 250 MB, into
``~/.cache/kvoffload``)::

    python -m kvoffload.conformance.engines_page --write docs/engines.md

``--reports DIR`` keeps the reports (default: a temporary folder); ``--render-only``
rebuilds the page from reports already in DIR without running anything.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RELEASES = ("0.18.0", "0.20.2", "0.21.0", "0.24.0", "0.25.0", "0.27.0", "0.34.0")
VLLM_ASSUMPTIONS = ("unique-keys", "no-misuse", "no-stale-completions", "no-reset-in-flight")
"""What vLLM's scheduler and workers guarantee its manager."""
SEED = 1


@dataclass(frozen=True)
class Run:
    """One ``kvoffload check`` command and where its result goes on the page."""

    table: str
    """"main" (all four assumptions, by policy), "dropped" or "optimized" (``-O``)."""
    release: str
    policy: str = "lru"
    dropped: str | None = None
    python_flags: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        flags = "".join(self.python_flags).replace("-", "")
        return "-".join(p for p in (self.release, self.policy, self.dropped or "all",
                                    flags) if p)

    def arguments(self) -> list[str]:
        assume = [a for a in VLLM_ASSUMPTIONS if a != self.dropped]
        profile = "safe" if self.release == "0.18.0" else "strict"
        return [f"vllm=={self.release}", "--profile", profile, "--policy", self.policy,
                *(x for a in assume for x in ("--assume", a)), "--seed", str(SEED)]

    def command(self) -> str:
        python = f"python {' '.join(self.python_flags)} -m kvoffload.conformance.cli" \
            if self.python_flags else "kvoffload"
        return f"{python} check {shlex.join(self.arguments())}"


RUNS: tuple[Run, ...] = (
    *(Run("main", r, policy) for policy in ("lru", "arc") for r in RELEASES),
    *(Run("dropped", r, "lru", d) for r in RELEASES for d in VLLM_ASSUMPTIONS),
    *(Run("optimized", r, "lru", "no-misuse", ("-O",)) for r in ("0.21.0", "0.24.0")),
)
"""Every run the page reports, at the default budget with ``--seed 1``."""


def execute(run: Run, reports: Path) -> dict[str, Any]:
    """Run ``run``'s command; its report.json (or, exit 2, the reason) as a dict."""
    folder = reports / run.name
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, *run.python_flags, "-m", "kvoffload.conformance.cli",
               "check", *run.arguments(), "--quiet", "--report-dir", str(folder)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode == 2:
        reason = (done.stderr.strip().splitlines() or ["exit 2"])[-1]
        (folder / "report.json").write_text(json.dumps(
            {"verdict": "error", "error": reason, "exit": 2}) + "\n", encoding="utf-8")
    return load(run, reports)


def load(run: Run, reports: Path) -> dict[str, Any]:
    path = reports / run.name / "report.json"
    if not path.is_file():
        return {"verdict": "missing", "error": f"no report at {path}"}
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


# --- rendering ---------------------------------------------------------------------


def trace_text(violation: dict[str, Any]) -> str:
    calls = [f"`{c['text'].split('  #')[0]}`" + (" (drain)" if c.get("drain") else "")
             for c in violation["trace"]]
    slots = violation["capacity"]
    return f"{', '.join(calls)} (tier of {slots} slot{'' if slots == 1 else 's'})"


def verdict_cell(report: dict[str, Any]) -> str:
    verdict = report.get("verdict")
    if verdict == "conforms":
        run = report["run"]
        return f"**conforms** ({run['examples']} examples, {run['seconds']:.1f} s)"
    if verdict == "fails":
        props = []
        for v in report["violations"]:
            flaky = f", flaky {v['reproduced']}/{v['replays']}" if v.get("flaky") else ""
            props.append(f"`{v['property']}`{flaky}")
        return "**fails** " + ", ".join(props)
    return f"not run: {report.get('error')}"


def failures_rows(reports: Sequence[tuple[Run, dict[str, Any]]]) -> list[str]:
    lines = []
    for run, report in reports:
        for v in report.get("violations") or []:
            label = f"{run.release} {run.policy.upper()}" + (
                f", `{run.dropped}` dropped" if run.dropped else "")
            lines.append(f"| {label} | `{v['property']}` | {trace_text(v)} | "
                         f"{_cell(v['message'])} |")
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(results: dict[Run, dict[str, Any]]) -> str:
    from .engines_text import AFTER, BEFORE, DROPPED, FAILURES, OPTIMIZED

    main = {(r.release, r.policy): rep for r, rep in results.items() if r.table == "main"}
    lines = [BEFORE.format(command=Run("main", "0.20.2").command()),
             "| release | adapter | LRU (`--policy lru`) | ARC (`--policy arc`) |",
             "| --- | --- | --- | --- |"]
    for release in RELEASES:
        lru, arc = main.get((release, "lru"), {}), main.get((release, "arc"), {})
        adapter = (lru.get("adapter") or {}).get("name", "?")
        lines.append(f"| {release} | `{adapter}` | {verdict_cell(lru)} | {verdict_cell(arc)} |")
    lines += [DROPPED, "| release | " + " | ".join(f"`{d}` dropped" for d in VLLM_ASSUMPTIONS)
              + " |", "| --- |" + " --- |" * len(VLLM_ASSUMPTIONS)]
    dropped = {(r.release, r.dropped): rep for r, rep in results.items() if r.table == "dropped"}
    for release in RELEASES:
        cells = [verdict_cell(dropped.get((release, d), {})) for d in VLLM_ASSUMPTIONS]
        lines.append(f"| {release} | " + " | ".join(cells) + " |")
    lines += [FAILURES, "| run | property | shrunk trace | at the first divergence |",
              "| --- | --- | --- | --- |",
              *failures_rows([(r, rep) for r, rep in results.items() if r.table != "optimized"])]
    optimized = [(r, rep) for r, rep in results.items() if r.table == "optimized"]
    lines += [OPTIMIZED.format(command=optimized[0][0].command() if optimized else ""),
              "| release | verdict under `-O`, `no-misuse` dropped |", "| --- | --- |",
              *(f"| {r.release} | {verdict_cell(rep)} |" for r, rep in optimized),
              "", "| run | property | shrunk trace | at the first divergence |",
              "| --- | --- | --- | --- |", *failures_rows(optimized), AFTER]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="write the page here (default: stdout)")
    parser.add_argument("--reports", type=Path, help="keep the runs' reports here")
    parser.add_argument("--render-only", action="store_true",
                        help="build the page from the reports in --reports; run nothing")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (default 2)")
    args = parser.parse_args(argv)
    reports = args.reports or Path(tempfile.mkdtemp(prefix="kvoffload-engines-"))
    if args.render_only:
        results = {run: load(run, reports) for run in RUNS}
    else:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            done = pool.map(lambda run: execute(run, reports), RUNS)
            results = dict(zip(RUNS, done, strict=True))
    page = render(results)
    if args.write is None:
        print(page, end="")
    else:
        args.write.write_text(page, encoding="utf-8")
        print(f"wrote {args.write} from {len(results)} runs (reports: {reports})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
