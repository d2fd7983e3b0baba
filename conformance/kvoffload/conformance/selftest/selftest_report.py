"""What ``kvoffload check --self-test`` prints and writes (selftest.json, JUnit XML)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..command.report import junit_xml, violation_json
from ..config import CheckConfig, describe_tiers
from ..errors import format_table
from .selftest import Outcome, SelfTestReport


def _doc(outcome: Outcome) -> str:
    from . import mutants

    doc = getattr(mutants, outcome.entry.cls).__doc__ or ""
    return " ".join(doc.split())


def print_self_test(report: SelfTestReport, config: CheckConfig) -> None:
    rows = []
    for o in report.outcomes:
        v = o.result.violation
        rows.append((f"{o.entry.cls} [{o.entry.policy.value}/{o.entry.level.value}]",
                     f"{o.status}" + (f" by {v.prop!r}" if v is not None else ""),
                     f"{o.result.seconds:.2f} s" + (f", {len(v.trace)} calls" if v else "")))
    print(f"self-test: seeded-bug variants of kvoffload.impl:OffloadManager, budget "
          f"{config.max_examples} examples x {config.steps} steps, "
          f"{describe_tiers(config.capacity)}, seed {config.seed}")
    print(format_table(("variant or control [policy/level]", "result", "time, trace"), rows))
    variants = [o for o in report.outcomes if o.entry.kind == "variant"]
    controls = [o for o in report.outcomes if o.entry.kind == "control"]
    killed = sum(o.ok for o in variants)
    passed = sum(o.ok for o in controls)
    print(f"\n{killed}/{len(variants)} variants killed, {passed}/{len(controls)} controls "
          f"passed, {report.seconds:.1f} s: {'OK' if report.ok else 'NOT OK'}")


def self_test_json(report: SelfTestReport, config: CheckConfig) -> dict[str, Any]:
    return {
        "schema": "kvoffload-self-test/1",
        "configuration": config.describe(),
        "ok": report.ok,
        "seconds": round(report.seconds, 3),
        "entries": [{
            "class": o.entry.cls, "kind": o.entry.kind, "policy": o.entry.policy.value,
            "level": o.entry.level.value, "bug": _doc(o), "status": o.status,
            "verdict": o.result.verdict, "seconds": round(o.result.seconds, 3),
            "examples": o.result.examples,
            "violation": None if o.result.violation is None
            else violation_json(o.result.violation, None),
            "error": o.result.error,
        } for o in report.outcomes],
    }


def write_self_test(report: SelfTestReport, config: CheckConfig, report_dir: Path,
                    junit: Path | None) -> None:
    report_dir.mkdir(parents=True, exist_ok=True)
    path = report_dir / "selftest.json"
    path.write_text(json.dumps(self_test_json(report, config), indent=2) + "\n",
                    encoding="utf-8")
    print(f"report: {path}")
    if junit is not None:
        cases = [(o.entry.label, f"kvoffload.selftest.{o.entry.kind}",
                  None if o.ok else f"{o.status}: {o.entry.label}", None, o.result.seconds)
                 for o in report.outcomes]
        junit.parent.mkdir(parents=True, exist_ok=True)
        junit.write_text(junit_xml("kvoffload-self-test", cases), encoding="utf-8")
