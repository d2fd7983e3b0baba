"""Make the repository root importable, so ``docs.tools`` (the doc generators) can be tested
with plain ``pytest`` as well as ``python -m pytest``."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
