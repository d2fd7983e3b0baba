"""The committed model-checker traces (corpus_modelcheck.json) are what the model
checker gives now: ``python proofs/corpus_traces.py --check`` (minutes: slow tier)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_committed_traces_are_up_to_date() -> None:
    path = os.pathsep.join(str(ROOT / p) for p in ("spec", "impl", "conformance"))
    env = {**os.environ, "PYTHONPATH": path + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, str(ROOT / "proofs" / "corpus_traces.py"),
                           "--check"], capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "is up to date" in done.stdout
