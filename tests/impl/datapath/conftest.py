"""The data-path tests need torch; without it they are not collected (the manager's
tests, elsewhere, run without torch). CI installs the CPU build first."""

from __future__ import annotations

import importlib.util

collect_ignore_glob = [] if importlib.util.find_spec("torch") else ["*.py"]
