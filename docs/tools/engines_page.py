"""docs/engines.md, generated: a list of ``kvoffload check`` runs in, the page out.

Each :class:`Run` is one plain command line (``kvoffload check vllm==X ...``, run in a
subprocess with ``--report-dir``); the page is built from the report.json files those
runs write, so another engine or a re-recorded verdict is one more entry in
:data:`RUNS`. Regenerate (downloads each missing vLLM wheel, about 250 MB, into
``~/.cache/kvoffload``)::

    python -m docs.tools.engines_page --write docs/engines.md

``--reports DIR`` keeps the reports (default: a temporary folder); ``--render-only``
rebuilds the page from reports already in DIR without running anything. ``--only
ENGINE`` runs (or loads) that engine's runs alone and, with ``--write``, replaces only
that engine's section of the page already there. The LMCache runs need LMCache
installed beside the interpreter that runs this module (the runs use
``sys.executable``)::

    python -m docs.tools.engines_page --only lmcache --write docs/engines.md

``--corpus FILE`` also writes every counterexample the page lists (each run's each
violation's shrunk trace) as data for the trace corpus: one entry per failures-table row,
named ``<engine>-<release>-<policy>-<assumption dropped or all>-<property>``, with the
run's profile, policy, level, assumptions and tier capacity and the calls in the
corpus's call encoding (``[op, keys, success, ticket, job]``). The committed file is
``conformance/kvoffload/conformance/corpus/corpus_engines.json`` (shipped in the wheel, read by
:mod:`kvoffload.conformance.corpus.corpus`); from the reports already kept::

    python -m docs.tools.engines_page --render-only --reports DIR \
        --write docs/engines.md \
        --corpus conformance/kvoffload/conformance/corpus/corpus_engines.json

With ``--only ENGINE`` only that engine's entries are replaced in the file.
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
LMCACHE_ASSUME = "--assume no-reset-in-flight --assume no-store-while-storing"
SEED = 1
LMCACHE_RELEASE = "0.5.6"
ENGINES = ("vllm", "lmcache")


@dataclass(frozen=True)
class Run:
    """One ``kvoffload check`` command and where its result goes on the page."""

    table: str
    """vLLM: "main" (all four assumptions, by policy), "dropped" or "optimized" (``-O``);
    "lmcache": an LMCache run, its options in :attr:`options`."""
    release: str
    policy: str = "lru"
    dropped: str | None = None
    python_flags: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    """An LMCache run's options after ``lmcache==X --max-keys-per-call 1 --seed 1``."""
    label: str = ""
    """An LMCache run's name (its report folder is ``lmcache-<label>``)."""

    @property
    def engine(self) -> str:
        return "lmcache" if self.table == "lmcache" else "vllm"

    @property
    def name(self) -> str:
        if self.engine == "lmcache":
            return f"lmcache-{self.label}"
        flags = "".join(self.python_flags).replace("-", "")
        return "-".join(p for p in (self.release, self.policy, self.dropped or "all",
                                    flags) if p)

    def arguments(self) -> list[str]:
        if self.engine == "lmcache":
            return [f"lmcache=={self.release}", "--max-keys-per-call", "1",
                    "--seed", str(SEED), *self.options]
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
    *(Run("lmcache", LMCACHE_RELEASE, options=tuple(o.split()), label=label)
      for label, o in (
          ("cpu-safe", f"--profile safe {LMCACHE_ASSUME}"),
          ("cpu-strict", f"--profile strict {LMCACHE_ASSUME}"),
          ("cpu-safe-exact", f"--profile safe --level exact {LMCACHE_ASSUME}"),
          ("cpu-safe-none", "--profile safe"),
          ("disk-strict-none", "--adapter lmcache-disk --profile strict"))),
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
            props.append(f"`{v['property']}`{flaky}{_not_reproduced(v)}")
        return "**fails** " + ", ".join(props)
    return f"not run: {report.get('error')}"


def run_label(run: Run) -> str:
    """How a failures table names the run."""
    if run.engine == "lmcache":
        return f"`{shlex.join(run.options)}`"
    return f"{run.release} {run.policy.upper()}" + (
        f", `{run.dropped}` dropped" if run.dropped else "")


def failures_rows(reports: Sequence[tuple[Run, dict[str, Any]]]) -> list[str]:
    lines = []
    for run, report in reports:
        for v in report.get("violations") or []:
            lines.append(f"| {run_label(run)} | `{v['property']}` | {trace_text(v)} | "
                         f"{_cell(v['message'])}{_cell(_not_reproduced(v))} |")
    return lines


def _not_reproduced(violation: dict[str, Any]) -> str:
    """A failure whose engine-native reproducer did not show it (report.json's
    ``engine_reproducer``) is never listed as the engine's without saying so."""
    from kvoffload.conformance.command.engine_script import NOT_REPRODUCED

    engine = violation.get("engine_reproducer")
    if isinstance(engine, dict) and engine.get("reproduced") is False:
        return f" ({NOT_REPRODUCED})"
    return ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


FAILURES_HEADER = ["| run | property | shrunk trace | at the first divergence |",
                   "| --- | --- | --- | --- |"]


def render_vllm(results: dict[Run, dict[str, Any]]) -> str:
    """The vLLM section: the tables of the vLLM runs and the prose around them."""
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
    lines += [FAILURES, *FAILURES_HEADER,
              *failures_rows([(r, rep) for r, rep in results.items()
                              if r.table in ("main", "dropped")])]
    optimized = [(r, rep) for r, rep in results.items() if r.table == "optimized"]
    lines += [OPTIMIZED.format(command=optimized[0][0].command() if optimized else ""),
              "| release | verdict under `-O`, `no-misuse` dropped |", "| --- | --- |",
              *(f"| {r.release} | {verdict_cell(rep)} |" for r, rep in optimized),
              "", *FAILURES_HEADER, *failures_rows(optimized), AFTER]
    return "\n".join(lines) + "\n"


def render_lmcache(results: dict[Run, dict[str, Any]]) -> str:
    """The LMCache section (and the SGLang note after it): a verdict per run, what
    each verdict means for an LMCache user, and every failure's shrunk trace."""
    from .engines_text import (
        LMCACHE_AFTER,
        LMCACHE_BEFORE,
        LMCACHE_FAILURES,
        LMCACHE_HEADER,
        LMCACHE_MEANING,
    )

    runs = [(r, rep) for r, rep in results.items() if r.engine == "lmcache"]
    lines = [LMCACHE_BEFORE, LMCACHE_HEADER, "| --- | --- | --- |"]
    for run, report in runs:
        options = f"`{shlex.join(run.options)}`" + (
            "" if "--assume" in run.options else " (no assumptions)")
        meaning = LMCACHE_MEANING.get(run.label, "")
        lines.append(f"| {options} | {verdict_cell(report)} | {meaning} |")
    lines += [LMCACHE_FAILURES, *FAILURES_HEADER, *failures_rows(runs), LMCACHE_AFTER]
    return "\n".join(lines) + "\n"


def corpus_name(run: Run, prop: str) -> str:
    """A counterexample's stable name: engine, release, policy, assumption dropped, property."""
    if run.engine == "lmcache":
        return f"lmcache-{run.release}-{run.label}-{prop}"
    flags = "".join(run.python_flags).replace("-", "")
    return "-".join(p for p in ("vllm", run.release, run.policy, run.dropped or "all",
                                flags, prop) if p)


def corpus_entries(results: dict[Run, dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per counterexample the page lists, in page order (see ``--corpus``)."""
    entries: list[dict[str, Any]] = []
    for engine in ENGINES:
        for run, report in results.items():
            if run.engine != engine:
                continue
            config = report.get("configuration") or {}
            for v in report.get("violations") or []:
                name = corpus_name(run, v["property"])
                if any(e["name"] == name for e in entries):
                    raise SystemExit(f"two counterexamples named {name!r}")
                entries.append({
                    "name": name, "engine": engine, "release": run.release,
                    "run": run.name, "command": run.command(), "property": v["property"],
                    "message": v["message"], "profile": config["profile"],
                    "policy": config["policy"], "level": config["level"],
                    "assume": sorted(config["assume"]), "capacity": v["capacity"],
                    "calls": [[c["op"], c["keys"], c["success"], c["ticket"], c["job"]]
                              for c in v["trace"]]})
    return entries


def write_corpus_data(path: Path, entries: list[dict[str, Any]],
                      engine: str | None = None) -> None:
    """Write ``entries`` to ``path``; with ``engine``, keep the other engines' entries."""
    if engine is not None and path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))["counterexamples"]
        kept = [e for e in old if e["engine"] != engine]
        entries = sorted([*kept, *entries], key=lambda e: ENGINES.index(e["engine"]))
    lines = [json.dumps(e, separators=(", ", ": ")) for e in entries]
    path.write_text('{"generated_by": "python -m docs.tools.engines_page '
                    '--corpus",\n "counterexamples": [\n  ' + ",\n  ".join(lines)
                    + "\n ]}\n", encoding="utf-8")


SECTIONS = {"vllm": render_vllm, "lmcache": render_lmcache}
"""Each engine's section of the page, in page order."""


def render(results: dict[Run, dict[str, Any]], engines: Sequence[str] = ENGINES) -> str:
    """The page (or only the sections of ``engines``) from the runs' reports."""
    return "".join(SECTIONS[e](results) for e in engines)


MOONCAKE_HEADING = "# Mooncake Store 0.3.13.post1: a real master and two clients"
"""The line that opens the Mooncake section, written by hand (its runs are listed
there): the page's end from this line on is kept as it is when the page is written."""


def hand_written(page: str) -> str:
    """The page's hand-written end (the Mooncake section), or nothing."""
    at = page.find(f"\n{MOONCAKE_HEADING}\n")
    return page[at:] if at >= 0 else ""


def splice(page: str, engine: str, section: str) -> str:
    """``page`` with ``engine``'s section replaced by ``section``."""
    from .engines_text import LMCACHE_HEADING

    at = page.find(f"\n{LMCACHE_HEADING}\n")
    if at < 0:
        raise SystemExit(f"cannot replace the {engine} section: no line "
                         f"{LMCACHE_HEADING!r} in the page")
    if engine == "vllm":
        return section + page[at:]
    return page[:at] + section + hand_written(page)


def results_of(runs: Sequence[Run], reports: Path, render_only: bool,
               jobs: int) -> dict[Run, dict[str, Any]]:
    if render_only:
        return {run: load(run, reports) for run in runs}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return dict(zip(runs, pool.map(lambda run: execute(run, reports), runs),
                        strict=True))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="write the page here (default: stdout)")
    parser.add_argument("--reports", type=Path, help="keep the runs' reports here")
    parser.add_argument("--render-only", action="store_true",
                        help="build the page from the reports in --reports; run nothing")
    parser.add_argument("--only", choices=ENGINES,
                        help="only this engine's runs; with --write, replace only its "
                             "section of the page there")
    parser.add_argument("--corpus", type=Path,
                        help="also write every listed counterexample here as corpus data "
                             "(conformance/kvoffload/conformance/corpus/corpus_engines.json)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (default 2)")
    args = parser.parse_args(argv)
    reports = args.reports or Path(tempfile.mkdtemp(prefix="kvoffload-engines-"))
    runs = [run for run in RUNS if args.only in (None, run.engine)]
    results = results_of(runs, reports, args.render_only, args.jobs)
    page = render(results, [args.only] if args.only else ENGINES)
    if args.corpus is not None:
        write_corpus_data(args.corpus, corpus_entries(results), args.only)
    if args.write is None:
        print(page, end="")
        return 0
    if args.only:
        page = splice(args.write.read_text(encoding="utf-8"), args.only, page)
    elif args.write.is_file():
        page += hand_written(args.write.read_text(encoding="utf-8"))
    args.write.write_text(page, encoding="utf-8")
    print(f"wrote {args.write} from {len(results)} runs (reports: {reports})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
