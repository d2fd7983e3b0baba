"""Loading vLLM releases from their wheels in tests: one helper, one CI rule.

The seed releases (:data:`SEED_RELEASES`, the ones the default tier checks) are
downloaded when missing (about 250 MB each, into the kvoffload cache); any other
release is used when its code is already cached, or when the run selects the
``vllm_matrix`` marker (then it is downloaded). A release that cannot be loaded skips
its test, saying why, except a seed release under CI (``CI=true``): that fails, so a
green CI run never hides a missing install. Releases from 0.21 on import torch.
"""

from __future__ import annotations

import inspect
import os
from types import ModuleType
from typing import Any

import pytest

from kvoffload.conformance.target.vllm_wheels import (
    VllmRelease,
    VllmReleaseUnavailable,
    load_release,
    release_tree,
)
from kvoffload.impl.vllm_types import VllmTypes

SEED_RELEASES = ("0.20.2", "0.21.0")
"""Checked in the default tier (tests/conformance/test_vllm_engines.py)."""

VLLM_ASSUMPTIONS = ("unique-keys", "no-misuse", "no-stale-completions", "no-reset-in-flight")
"""What vLLM's scheduler and workers guarantee its manager (DESIGN.md)."""


def _matrix_selected(config: pytest.Config) -> bool:
    selected = str(config.getoption("-m") or "")
    return "vllm_matrix" in selected and "not vllm_matrix" not in selected


def release_or_skip(config: pytest.Config, version: str) -> VllmRelease:
    """vLLM ``version`` loaded from its wheel, or skip (fail: a seed release under CI)."""
    try:
        release_tree(version, download=version in SEED_RELEASES or _matrix_selected(config))
        release = load_release(version)
        release.manager_class()
    except (VllmReleaseUnavailable, ImportError) as missing:
        reason = f"vLLM {version} cannot be loaded here: {missing}"
        if version in SEED_RELEASES and os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (under CI a green run may not hide a missing install)")
        pytest.skip(f"{reason} (run with -m vllm_matrix to fetch it)")
    return release


def vllm_target(config: pytest.Config, version: str) -> str:
    """The TARGET ``vllm==X`` for release ``version``, or skip as above."""
    release_or_skip(config, version)
    return f"vllm=={version}"


def common_module(release: VllmRelease) -> ModuleType:
    """The module holding ``CPULoadStoreSpec`` in this release."""
    name = ("vllm.v1.kv_offload.cpu.common" if release.has("vllm.v1.kv_offload.cpu.common")
            else "vllm.v1.kv_offload.mediums")
    return release.module(name)


def types_of(release: VllmRelease) -> VllmTypes:
    hit = (release.module("vllm.v1.metrics.cache_hit_source")
           if release.version_info >= (0, 34) else None)
    return VllmTypes.from_modules(release.base(), common_module(release), hit,
                                  origin=f"vllm {release.version}")


def req_context(release: VllmRelease) -> Any:
    context = release.base().ReqContext
    return context(req_id="r") if "req_id" in inspect.signature(context).parameters else context()
