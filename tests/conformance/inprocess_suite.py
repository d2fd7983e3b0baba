"""Imported by the plugin's tests before pytester's in-process runs: pytester snapshots
``sys.modules`` around each run and drops what the run imported, so a suite module the
first run imported would be imported afresh by the next, and two copies of the suite's
enums would meet (a KeyError on ``Op.TAKE_EVENTS``). Imported once here, they stay.

In-process runs cost a fraction of a subprocess's start-up (pytest, its plugins and
Hypothesis: about 2 s of CPU each on 2 busy cores). xdist's runs are in-process too:
only their workers are processes of their own (their controlling session in a process
of its own cost about 0.5 s of CPU more a run)."""

from __future__ import annotations

import kvoffload.conformance.command.report
import kvoffload.conformance.command.runner
import kvoffload.conformance.target.targets

SUITE = (kvoffload.conformance.command.report, kvoffload.conformance.command.runner,
         kvoffload.conformance.target.targets)
