"""Loading vLLM releases from their wheels in tests, or skipping.

A release is used when its code is already in the kvoffload cache, or when the run
selects the ``vllm_matrix`` marker (then its wheel is downloaded, about 250 MB).
Releases from 0.21 on import torch: without it the tests skip.
"""

from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any

import pytest

from kvoffload.conformance.vllm_wheels import (
    VllmRelease,
    VllmReleaseUnavailable,
    load_release,
    release_tree,
)
from kvoffload.impl.vllm_types import VllmTypes


def release_or_skip(config: pytest.Config, version: str) -> VllmRelease:
    selected = str(config.getoption("-m") or "")
    wanted = "vllm_matrix" in selected and "not vllm_matrix" not in selected
    try:
        release_tree(version, download=wanted)
    except VllmReleaseUnavailable as missing:
        pytest.skip(f"vLLM {version} not cached (run with -m vllm_matrix to fetch): {missing}")
    try:
        release = load_release(version)
        release.base()
    except VllmReleaseUnavailable as missing:
        pytest.skip(str(missing))
    return release


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
