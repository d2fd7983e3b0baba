"""CrossHair over the spec's PEP 316 contracts (``pre:`` / ``post:`` / ``raises:``).

CrossHair executes each contracted function on symbolic inputs, path by path, for at
most ``--per_condition_timeout`` seconds per contract. It samples paths: a contract
it reports "Not confirmed" had no counterexample on the paths it tried, "Confirmed
over all paths" was proven, and "Unable to meet precondition" means it found no input
satisfying the ``pre:`` line in time, so that contract was not exercised at all.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

SPEC_DIR = Path(__file__).resolve().parents[2] / "spec" / "kvoffload" / "spec"
TIMEOUT = 10.0
"""Seconds per contract (``--per_condition_timeout``) for the recorded run."""


@dataclass(frozen=True)
class ContractResult:
    """What CrossHair said about each contract, and how long the run took."""

    statuses: tuple[tuple[str, str], ...]
    """``(file:line, status)`` for every contract, in CrossHair's order."""
    errors: tuple[str, ...]
    """Counterexamples and crashes, verbatim."""
    seconds: float
    command: str

    @property
    def verdict(self) -> str:
        return "holds" if not self.errors else "violated"

    def summary(self) -> str:
        counts = Counter(status for _, status in self.statuses)
        parts = [f"{n} {status.rstrip('.').lower()}" for status, n in sorted(counts.items())]
        found = f"{len(self.errors)} counterexample(s)" if self.errors else "no counterexample"
        return f"{found}; " + ", ".join(parts)


def version() -> str:
    """The installed crosshair-tool version."""
    from importlib.metadata import version as installed

    return installed("crosshair-tool")


def spec_files() -> list[Path]:
    """Every module of the spec: CrossHair finds the contracts in them."""
    return sorted(p for p in SPEC_DIR.glob("*.py") if p.name != "__init__.py")


def command(timeout: float = TIMEOUT) -> list[str]:
    root = SPEC_DIR.parents[2]
    files = [str(p.relative_to(root)) for p in spec_files()]
    return [sys.executable, "-m", "crosshair", "check", *files,
            f"--per_condition_timeout={timeout:g}", "--report_all"]


def run(timeout: float = TIMEOUT) -> ContractResult:
    """Run CrossHair over the spec from the repository root and parse its report."""
    argv = command(timeout)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False,
                          cwd=SPEC_DIR.parents[2])
    seconds = time.perf_counter() - start
    statuses: list[tuple[str, str]] = []
    errors: list[str] = []
    for line in (done.stdout + done.stderr).splitlines():
        found = re.match(r"(.+?:\d+): (info|error): (.*)$", line.strip())
        if found is None:
            continue
        where = re.sub(r"^.*?([\w]+\.py:\d+)$", r"\1", found.group(1))
        if found.group(2) == "info":
            statuses.append((where, found.group(3)))
        else:
            errors.append(f"{where}: {found.group(3)}")
    if done.returncode not in (0, 1) or (done.returncode == 1 and not errors):
        raise RuntimeError(f"crosshair exited with {done.returncode}:\n{done.stderr[-2000:]}")
    shown = " ".join(["crosshair", *argv[3:]])
    return ContractResult(tuple(statuses), tuple(errors), seconds, shown)
