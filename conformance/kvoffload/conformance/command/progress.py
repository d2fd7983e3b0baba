"""The progress display on stderr while a check runs.

On a terminal one line is rewritten in place; elsewhere (CI logs) a line is printed
when the run starts, when the first failure is found (shrinking begins) and at the end,
so logs stay short.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from ..judge.machine import Counters


class Progress:
    """Shows examples and steps run, and whether a failure is being shrunk."""

    def __init__(self, label: str, total: int, stream: TextIO | None = None,
                 enabled: bool = True, unit: str = "examples") -> None:
        self.label = label
        self.total = total
        self.unit = unit
        """What ``total`` counts: examples, or a trace's requests (``--trace``)."""
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.live = enabled and self.stream.isatty()
        self.start = time.perf_counter()
        self.last = 0.0
        self.shrinking = False

    def begin(self) -> None:
        if self.enabled and not self.live:
            print(f"kvoffload: checking {self.label} ...", file=self.stream, flush=True)

    def update(self, counters: Counters) -> None:
        if not self.enabled:
            return
        if counters.failures and not self.shrinking:
            self.shrinking = True
            if not self.live:
                print(f"kvoffload: {self.label}: a property failed after "
                      f"{counters.examples} {self.unit}; shrinking the trace ...",
                      file=self.stream, flush=True)
        now = time.perf_counter()
        if self.live and now - self.last > 0.1:
            self.last = now
            done = f"{counters.examples}/{self.total} {self.unit}"
            state = "shrinking" if self.shrinking else done
            print(f"\r\033[Kkvoffload: {self.label}: {state}, {counters.steps} steps, "
                  f"{now - self.start:.1f} s", end="", file=self.stream, flush=True)

    def end(self, verdict: str) -> None:
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.start
        prefix = "\r\033[K" if self.live else ""
        print(f"{prefix}kvoffload: {self.label}: {verdict} ({elapsed:.1f} s)", file=self.stream,
              flush=True)
