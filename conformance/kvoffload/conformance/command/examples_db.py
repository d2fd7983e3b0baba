"""Hypothesis's example database for a run: a failure found once replays first next time.

``kvoffload check`` keeps it under ``--report-dir`` (``hypothesis-db``, off with
``--no-database``); the pytest plugin under ``--kvoffload-report-dir``. Hypothesis keys
saved examples by test function, and every run goes through the same one, so each
target and configuration (everything but the seed and the budget) gets a folder of
its own: a failure of one target never replays against another.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from hypothesis import Phase
from hypothesis.database import DirectoryBasedExampleDatabase

from ..config import CheckConfig


def database_settings(config: CheckConfig, target: str) -> dict[str, Any]:
    """Keywords for Hypothesis's ``settings``: ``database`` and ``phases`` (reuse, the
    replay of saved failures, first; then generate)."""
    if config.database is None:
        return {"database": None, "phases": (Phase.generate,)}
    described = config.describe()
    for varying in ("seed", "max_examples", "steps", "call_timeout", "stop_at_first"):
        described.pop(varying, None)
    identity = json.dumps({"target": target, **described}, sort_keys=True)
    folder = Path(config.database) / hashlib.sha256(identity.encode()).hexdigest()[:16]
    return {"database": DirectoryBasedExampleDatabase(folder),
            "phases": (Phase.reuse, Phase.generate)}
