"""vLLM releases for the conformance tests: load from the kvoffload cache (downloading
the wheel, about 250 MB, when it is missing) or skip, saying why; under CI (CI=true)
a release that cannot be loaded fails instead."""

from __future__ import annotations

import os

import pytest

from kvoffload.conformance.vllm_wheels import VllmReleaseUnavailable, load_release

VLLM_ASSUMPTIONS = ("unique-keys", "no-misuse", "no-stale-completions", "no-reset-in-flight")
"""What vLLM's scheduler and workers guarantee its manager (DESIGN.md)."""


def release_or_skip(version: str) -> str:
    """The TARGET for release ``version`` (``vllm==X``), or skip the test."""
    try:
        load_release(version).manager_class()
    except (VllmReleaseUnavailable, ImportError) as missing:
        reason = f"vLLM {version} cannot be loaded here: {missing}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (under CI a green run may not hide a missing install)")
        pytest.skip(reason)
    return f"vllm=={version}"
