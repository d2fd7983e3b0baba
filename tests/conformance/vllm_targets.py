"""vLLM releases for the conformance tests: load from the kvoffload cache (downloading
the wheel, about 250 MB, when it is missing) or skip, saying why."""

from __future__ import annotations

import pytest

from kvoffload.conformance.vllm_wheels import VllmReleaseUnavailable, load_release

VLLM_ASSUMPTIONS = ("unique-keys", "no-misuse", "no-stale-completions", "no-reset-in-flight")
"""What vLLM's scheduler and workers guarantee its manager (DESIGN.md)."""


def release_or_skip(version: str) -> str:
    """The TARGET for release ``version`` (``vllm==X``), or skip the test."""
    try:
        load_release(version).manager_class()
    except (VllmReleaseUnavailable, ImportError) as missing:
        pytest.skip(f"vLLM {version} cannot be loaded here: {missing}")
    return f"vllm=={version}"
