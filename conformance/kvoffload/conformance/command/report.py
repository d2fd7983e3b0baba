"""What a run leaves behind: the text report, ``report.json``, a reproducer, JUnit XML.

The JSON schema (``kvoffload-conformance-report/1``) is documented in
``docs/conformance.md``; fields are only ever added to it.
"""

from __future__ import annotations

import json
import re
import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kvoffload.spec import Call

from ..config import CheckConfig, describe_tiers
from ..errors import MAX_MESSAGE, PropertyViolation, clip, format_table
from ..judge.properties import PROPERTIES, describe
from ..judge.shrink import SHRINK_SAFETY_S
from ..target.targets import target_defaults
from .runner import CheckResult, Failure

SCHEMA = "kvoffload-conformance-report/1"


def call_json(call: Call, drain: bool) -> dict[str, Any]:
    return {"op": call.op.value, "keys": [_plain(k) for k in call.keys],
            "success": call.success, "ticket": call.ticket, "job": call.job,
            "text": str(call), "drain": drain}


def _plain(value: object) -> object:
    return value if isinstance(value, str | int | float | bool) or value is None else repr(value)


def violation_json(violation: PropertyViolation, reproducer: str | None) -> dict[str, Any]:
    return {
        "property": violation.prop,
        "description": describe(violation.prop),
        "message": violation.message,
        "capacity": violation.capacity,
        "step": violation.step,
        "trace": [call_json(c, i >= violation.generated) for i, c in enumerate(violation.trace)],
        "table": [{"aspect": a, "spec": s, "target": t} for a, s, t in violation.rows],
        "reproducer": reproducer,
    }


def failure_json(failure: Failure, reproducer: str | None,
                 engine_path: str | None = None) -> dict[str, Any]:
    """One distinct failure: its violation, how it replayed, when it was found, and its
    engine-native reproducer (engine targets)."""
    return {**violation_json(failure.violation, reproducer), "flaky": failure.flaky,
            "replays": failure.replays, "reproduced": failure.reproduced,
            "unreliable": failure.unreliable,
            "found_after_s": failure.found_after_s,
            "found_trace_calls": failure.found_trace_calls,
            "shrink": {"replays": failure.shrink_replays, "stopped": failure.shrink_stopped},
            "engine_reproducer": engine_json(failure, engine_path)}


ENGINE_OUTPUT = 4000
"""How much of an engine-native reproducer's output report.json keeps (its end)."""


def engine_json(failure: Failure, path: str | None) -> dict[str, Any] | None:
    """The failure's engine-native script: where, and what it showed in a fresh process."""
    engine = failure.engine
    if engine is None:
        return None
    return {"path": path, "reproduced": engine.reproduced, "verdict": engine.verdict,
            "status": engine.status, "seconds": engine.seconds,
            "output": engine.output[-ENGINE_OUTPUT:]}


def result_json(result: CheckResult, reproducer: str | None = None,
                reproducers: dict[str, str] | None = None,
                engine_scripts: dict[str, str] | None = None) -> dict[str, Any]:
    """report.json for one check. ``violation`` is the first failure (as before
    ``violations`` listed them all); ``reproducers`` maps each property to its file,
    ``engine_scripts`` to its engine-native reproducer."""
    paths = dict(reproducers or {})
    engines = dict(engine_scripts or {})
    if reproducer is not None and result.violation is not None:
        paths.setdefault(result.violation.prop, reproducer)
    first = result.failures[0] if result.failures else None
    return {
        "schema": SCHEMA,
        "target": result.target,
        "adapter": {"name": result.adapter, "why": result.adapter_reason},
        "configuration": result.config.describe(),
        "calls": result.alphabet,
        "verdict": result.verdict,
        "properties": {"checked": list(result.checked), "not_checked": result.not_checked,
                       "descriptions": {p: PROPERTIES[p] for p in PROPERTIES}},
        "run": {"examples": result.examples, "steps": result.steps,
                "seconds": round(result.seconds, 3), "flaky": result.flaky,
                "stop_at_first": result.config.stop_at_first, **result.extra},
        "violation": None if first is None else failure_json(
            first, paths.get(first.violation.prop), engines.get(first.violation.prop)),
        "violations": [failure_json(f, paths.get(f.violation.prop),
                                    engines.get(f.violation.prop)) for f in result.failures],
        "error": result.error,
    }


def configuration_text(result: CheckResult) -> str:
    config = result.config
    lines = [
        f"target         {result.target}",
        f"adapter        {result.adapter} ({result.adapter_reason})",
        f"profile        {config.profile.value}",
        f"policy         {config.policy.value}",
        f"level          {config.level.value}",
        f"eviction       {eviction_text(result.target, config)}",
        *([f"faults         {config.fault} at calls drawn from the seed (the spec's "
           f"fail_node: every block is lost, docs/spec.md D15)"]
          if config.injects_faults else []),
        f"assumptions    {', '.join(config.assume) or 'none'}",
        f"keys per call  {keys_per_call_text(result.target, config)}",
        f"budget         {config.max_examples} examples x {config.steps} steps, "
        f"{describe_tiers(config.capacity)}, seed {config.seed}" if config.trace is None
        else f"workload       the trace {config.trace}: one pass on a tier of "
             f"{config.capacity:,} slots, delays drawn from seed {config.seed}",
    ]
    lines += [f"calls          {what}: {how}" for what, how in result.alphabet.items()]
    return "\n".join(lines)


def eviction_text(target: str, config: CheckConfig) -> str:
    """When the target may evict, and whose choice it is when the kind of target chose
    it (``mooncake==``: in the background)."""
    chosen = config.describe()["eviction"]
    text = str(chosen)
    if config.background_eviction:
        text += (" (a READY block with no readers may go between calls: the spec's "
                 "evict_in_background, docs/spec.md D14)")
    if "eviction" in config.target_defaults:
        why = target_defaults(target).get("eviction", (None, ""))[1]
        other = "on-store" if config.background_eviction else "background"
        text += f"; this target's default: {why}; --eviction {other} to change it"
    return text


def keys_per_call_text(target: str, config: CheckConfig) -> str:
    """The limit on keys per generated call, and whose choice it is when the kind of
    target chose it (``lmcache==``: one chunk per call)."""
    limit = config.max_keys_per_call
    text = f"at most {limit}" if limit else "no limit"
    if "max_keys_per_call" in config.target_defaults:
        why = target_defaults(target).get("max_keys_per_call", (None, ""))[1]
        text += (f" (this target's default: {why}; --max-keys-per-call N to change it, "
                 "0 for no limit)")
    return text


def summary_text(result: CheckResult) -> str:
    """The summary table: one row per property."""
    failed = {f.violation.prop: f for f in result.failures}
    rows = []
    for prop in PROPERTIES:
        if prop in failed:  # a legal call rejected fails 'misuse' even under no-misuse
            status = "FAILED" + _flaky_note(failed[prop]) + _engine_note(failed[prop])
        elif prop in result.not_checked:
            status = f"not checked: {result.not_checked[prop]}"
        elif result.verdict == "fails" and result.config.stop_at_first:
            status = "held until the first failure (--stop-at-first)"
        elif result.error is not None:
            status = "unknown (the run did not finish)"
        elif result.verdict == "interrupted":
            status = "held so far (interrupted by Ctrl-C)"
        else:
            status = "held"
        rows.append((prop, status, ""))
    table = format_table(("property", "result", ""), rows)
    runs = (f"{result.examples} examples" if result.config.trace is None else
            f"{result.examples} pass{'es' * (result.examples != 1)} over the trace")
    head = (f"{result.verdict.upper()}: {runs}, {result.steps} steps, "
            f"{result.seconds:.1f} s")
    if result.violation is not None and result.error is not None:
        head += ("\nafter the failure below was found, the run stopped on an error: "
                 + clip(result.error.splitlines()[0], MAX_MESSAGE))
    return head + "\n" + "\n".join(line.rstrip() for line in table.splitlines())


def _flaky_note(failure: Failure) -> str:
    if not failure.flaky:
        return ""
    why = [f"the shrunk trace failed {failure.reproduced} of {failure.replays} replays"]
    if failure.unreliable is not None:
        why.insert(0, failure.unreliable)
    return f" (flaky: {'; '.join(why)})"


def _engine_note(failure: Failure) -> str:
    engine = failure.engine
    return "" if engine is None or engine.reproduced else f" ({engine.verdict})"


def engine_script_path(report_dir: Path, violation: PropertyViolation) -> Path:
    """Where the engine-native reproducer of ``violation`` is written."""
    return report_dir / f"engine_{_identifier(violation.prop)}.py"


def reproducer_path(report_dir: Path, violation: PropertyViolation) -> Path:
    """Where the reproducer of ``violation`` is written under ``report_dir``."""
    return report_dir / f"reproduce_{_identifier(violation.prop)}.py"


def failures_text(result: CheckResult, report_dir: Path | None) -> str:
    """Every failure's counterexample, each with its reproducer (under ``report_dir``)."""
    parts = []
    for number, failure in enumerate(result.failures, 1):
        path = None if report_dir is None else str(reproducer_path(report_dir,
                                                                   failure.violation))
        head = (f"failure {number} of {len(result.failures)}"
                + (f"{_flaky_note(failure)}" if failure.flaky else "") + ":\n"
                if len(result.failures) > 1 or failure.flaky else "")
        parts.append(head + counterexample_text(failure.violation, path)
                     + shrink_text(failure) + engine_text(failure, report_dir))
    return "\n\n".join(parts)


def shrink_text(failure: Failure) -> str:
    """A line when shrinking was cut short: by its replays (the same trace on every
    machine) or by the wall clock's safety net (another machine may shrink further)."""
    if failure.shrink_stopped == "time":
        return (f"\nshrinking was cut by its {SHRINK_SAFETY_S:.0f} s safety net after "
                f"{failure.shrink_replays:,} replays: a faster machine may report a "
                "shorter trace (the verdict is the same)")
    if failure.shrink_stopped == "replays":
        return (f"\nshrinking stopped at its budget of {failure.shrink_replays:,} replays "
                "(the same trace on every machine)")
    return ""


def engine_text(failure: Failure, report_dir: Path | None) -> str:
    """The engine-native reproducer's line: where it is and what it showed."""
    engine = failure.engine
    if engine is None:
        return ""
    if not engine.source:
        return f"\nengine-native reproducer: none ({engine.output}); {NOT_ENGINES}"
    path = None if report_dir is None else engine_script_path(report_dir, failure.violation)
    shown = ("the engine's own API shows this divergence in a fresh process, without "
             "kvoffload" if engine.reproduced else
             f"{engine.verdict.upper()}: its engine calls did not answer as under kvoffload "
             f"(exit {engine.status}); {NOT_ENGINES}")
    return f"\nengine-native reproducer: {path or '(not written)'}  (python {path}): {shown}"


NOT_ENGINES = "a failure, but not shown to be the engine's own"


def counterexample_text(violation: PropertyViolation, reproducer: str | None) -> str:
    lines = [f"property {violation.prop!r} violated: {describe(violation.prop)}",
             f"  {violation.message}",
             f"shrunk trace ({_count(len(violation.trace), 'call')}, tier of "
             f"{_count(violation.capacity, 'slot')}):",
             *violation.trace_lines(),
             "at the first divergence:",
             textwrap.indent(violation.table(), "  ")]
    if reproducer:
        lines.append(f"reproducer: {reproducer}  (python -m pytest {reproducer})")
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def reproducer_source(result: CheckResult, violation: PropertyViolation) -> str:
    """A standalone pytest file that fails while the target still diverges."""
    config = result.config.describe()
    config["capacity"] = violation.capacity
    config_lines = "\n".join(f"    {k!r}: {v!r}," for k, v in config.items()
                             if k in ("adapter", "profile", "policy", "level", "assume",
                                      "capacity", "call_timeout"))
    drain = violation.in_drain
    calls = violation.trace[:violation.generated] if drain else violation.trace
    call_lines = "\n".join(f"    {_call_source(c)},  # {i}" for i, c in enumerate(calls, 1))
    table = textwrap.indent(violation.table(), "    ")
    return f'''"""Reproducer written by `kvoffload check`.

{result.target} violates {violation.prop!r}: {describe(violation.prop)}.
{violation.message}

Run it with `python -m pytest {{this file}}` (or `python {{this file}}`): it fails while the
target still diverges from the spec on this trace, and passes once it is fixed.
Seen at the first divergence:

{table}
"""

from kvoffload.conformance.reproduce import reproduce
from kvoffload.spec import Call, Op

TARGET = {result.target!r}
CONFIGURATION = {{
{config_lines}
}}
CALLS = [
{call_lines}
]
DRAIN = {drain!r}
"""After the calls, complete every running copy and check nothing leaked (liveness)."""


def test_{_identifier(violation.prop)}() -> None:
    reproduce(TARGET, CONFIGURATION, CALLS, drain=DRAIN)


if __name__ == "__main__":
    test_{_identifier(violation.prop)}()
    print("the target conforms on this trace")
'''


def _call_source(call: Call) -> str:
    parts = [f"Op.{call.op.name}"]
    if call.keys:
        parts.append(repr(tuple(call.keys)))
    if not call.success:
        parts.append("success=False")
    if call.ticket is not None:
        parts.append(f"ticket={call.ticket}")
    if call.job is not None:
        parts.append(f"job={call.job}")
    return f"Call({', '.join(parts)})"


def _identifier(prop: str) -> str:
    return re.sub(r"\W", "_", prop)


def write_check_report(result: CheckResult, report_dir: Path) -> tuple[Path, Path | None]:
    """Write report.json and a reproducer per failure; returns the report's path and the
    first failure's reproducer (all of them: :func:`reproducer_path`)."""
    report_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    engines: dict[str, str] = {}
    for failure in result.failures:
        path = reproducer_path(report_dir, failure.violation)
        path.write_text(reproducer_source(result, failure.violation), encoding="utf-8")
        written[failure.violation.prop] = str(path)
        if failure.engine is not None and failure.engine.source:
            script = engine_script_path(report_dir, failure.violation)
            script.write_text(failure.engine.source, encoding="utf-8")
            engines[failure.violation.prop] = str(script)
    reproducer = Path(written[result.failures[0].violation.prop]) if written else None
    report = report_dir / "report.json"
    data = result_json(result, None, written, engines)
    report.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return report, reproducer


def junit_xml(
    suite: str, cases: Sequence[tuple[str, str, str | None, str | None, float]]
) -> str:
    """JUnit XML: (name, classname, failure message or None, skipped reason or None, s)."""
    root = ET.Element("testsuite", name=suite, tests=str(len(cases)),
                      failures=str(sum(1 for c in cases if c[2] is not None)),
                      skipped=str(sum(1 for c in cases if c[3] is not None)),
                      time=f"{sum(c[4] for c in cases):.3f}")
    for name, classname, failure, skipped, seconds in cases:
        case = ET.SubElement(root, "testcase", name=name, classname=classname,
                             time=f"{seconds:.3f}")
        if failure is not None:
            ET.SubElement(case, "failure", message=failure.splitlines()[0]).text = failure
        elif skipped is not None:
            ET.SubElement(case, "skipped", message=skipped)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def check_junit(result: CheckResult) -> str:
    """One test case per property (the violated one fails; unchecked ones are skipped)."""
    cases: list[tuple[str, str, str | None, str | None, float]] = []
    failed = {v.prop: v for v in result.violations}
    for prop in PROPERTIES:
        failure = None
        if prop in failed:
            failure = str(failed[prop])
        elif result.error is not None:
            failure = f"the run did not finish: {result.error}"
        skipped = result.not_checked.get(prop) or (
            "interrupted by Ctrl-C" if result.verdict == "interrupted" else None)
        cases.append((prop, f"kvoffload.{result.target}", failure, skipped,
                      result.seconds if failure else 0.0))
    return junit_xml("kvoffload-conformance", cases)
