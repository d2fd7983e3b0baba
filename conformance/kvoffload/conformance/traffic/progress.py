"""The progress display of ``kvoffload traffic`` on stderr.

At a terminal one line is rewritten in place (at most ten times a second); elsewhere
nothing is shown unless asked for (``--progress``), and then a line per run at each
quarter of its requests, so logs stay short.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


class Display:
    """Hands each run a callback that shows how many of its requests are served."""

    def __init__(self, enabled: bool | None = None, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.live = live and enabled is not False
        self.enabled = self.live or bool(enabled)
        self.start = time.perf_counter()
        self.shown = False

    def task(self, label: str, total: int) -> Callable[[int], None] | None:
        """The callback for one run of ``total`` requests, or None when nothing is shown."""
        if not self.enabled:
            return None
        last = [0.0, -1]

        def show(done: int) -> None:
            now = time.perf_counter()
            elapsed = now - self.start
            if self.live:
                if now - last[0] >= 0.1 or done == total:
                    last[0] = now
                    self.shown = True
                    print(f"\r\033[Kkvoffload traffic: {label}: {done:,}/{total:,} requests, "
                          f"{elapsed:.1f} s", end="", file=self.stream, flush=True)
                return
            quarter = 4 * done // total if total else 4
            if quarter > last[1]:
                last[1] = quarter
                print(f"kvoffload traffic: {label}: {done:,}/{total:,} requests, "
                      f"{elapsed:.1f} s", file=self.stream, flush=True)
        return show

    def done(self) -> None:
        """Clear the live line so the report starts on a clean line."""
        if self.live and self.shown:
            print("\r\033[K", end="", file=self.stream, flush=True)
