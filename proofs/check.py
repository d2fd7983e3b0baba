"""Run kvoffload's model checks: ``python proofs/check.py --help`` (from the repo root)."""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    # proofs/ is a plain directory of tools, not an installed package: put the
    # repository root first on the path so that ``proofs.modelcheck`` imports as is.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from proofs.modelcheck.cli import main

    sys.exit(main())
