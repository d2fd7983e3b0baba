"""CrossHair ``diffbehavior``: the spec against the reference manager, symbolically.

The drivers in :mod:`proofs.diffbehavior.drivers` decode a list of ints into at most
six calls on a two-slot LRU tier and render the outputs without slot numbers. A run
compares the spec with ``OffloadManager`` (expected: no difference found within the
budget) and, as a control that the comparison can fail, with a manager whose lookup has
the pre-PR-#41795 bug (expected: a difference).
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass

TIMEOUT = 60.0
"""CrossHair's --per_condition_timeout for one comparison, in seconds."""

DRIVERS = "proofs.diffbehavior.drivers"
PAIRS = {"manager": "manager_outputs", "buggy-manager": "buggy_manager_outputs"}


@dataclass(frozen=True)
class DiffResult:
    """What one ``crosshair diffbehavior`` run said."""

    other: str
    differs: bool
    summary: str
    seconds: float
    command: str
    text: str
    """CrossHair's whole report (the inputs and both return values when they differ)."""


def run(other: str, timeout: float = TIMEOUT) -> DiffResult:
    """Compare ``spec_outputs`` with the driver named by ``other`` (a key of PAIRS).

    raises: RuntimeError
    """
    argv = [sys.executable, "-m", "crosshair", "diffbehavior",
            f"{DRIVERS}.spec_outputs", f"{DRIVERS}.{PAIRS[other]}",
            f"--per_condition_timeout={timeout:g}"]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    text = (done.stdout + done.stderr).strip()
    if done.returncode not in (0, 1):
        raise RuntimeError(f"crosshair diffbehavior exited with {done.returncode}:\n{text}")
    differs = done.returncode == 1 and "Given:" in text
    first = text.splitlines()[0] if text else ""
    summary = ("difference found: " + first) if differs else first
    return DiffResult(other, differs, summary, seconds, " ".join(["crosshair", *argv[3:]]),
                      text)
