"""Production traffic through the offloading tier: request traces (Mooncake's published
ones are carried), a discrete-event simulation in simulated time through the reference
manager, and the reports of ``kvoffload traffic`` (``docs/traffic.md``).

Imports nothing beyond the standard library and kvoffload; the plot (``[plot]`` extra,
matplotlib) is imported only when asked for.
"""

from .simulator import Counters, Lookup, Run, simulate
from .timing import Timing, TimingError
from .traces import BUILTIN, Request, TraceError, TraceReader, load, read_mooncake

__all__ = ["BUILTIN", "Counters", "Lookup", "Request", "Run", "Timing", "TimingError",
           "TraceError", "TraceReader", "load", "read_mooncake", "simulate"]
