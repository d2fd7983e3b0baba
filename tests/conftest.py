"""Shared by every test folder: this folder is on ``sys.path`` (pytest's rootdir-relative
conftest import), so helpers such as :mod:`vllm_releases` import by their plain name."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _lmcache_installed(request: pytest.FixtureRequest) -> None:
    """Tests marked ``lmcache`` run on LMCache 0.5.6's real code: without it they skip,
    and under CI (``CI=true``) they fail, so a green run never hides a missing install."""
    if request.node.get_closest_marker("lmcache") is None:
        return
    from kvoffload.conformance.lmcache_loader import installed_version

    have = installed_version()
    if have != "0.5.6":
        reason = f"LMCache 0.5.6 is not installed (found {have}): pip install -e '.[lmcache]'"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (under CI a green run may not hide a missing install)")
        pytest.skip(reason)
