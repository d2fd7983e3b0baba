"""TARGET strings, adapter choice and construction."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from kvoffload.conformance.config import CheckConfig, Profile
from kvoffload.conformance.errors import TargetLoadError, UsageError
from kvoffload.conformance.target.targets import load_object, prepare
from kvoffload.conformance.target.vllm_adapters import era_of
from kvoffload.impl import OffloadManager
from kvoffload.spec import Policy


def test_module_attribute_targets() -> None:
    assert load_object("kvoffload.impl:OffloadManager") is OffloadManager
    assert prepare("kvoffload.impl:OffloadManager", CheckConfig()).adapter == "native"


def test_file_targets(tmp_path: Path) -> None:
    path = tmp_path / "mymanager.py"
    path.write_text("from kvoffload.impl import OffloadManager\n"
                    "def build(capacity):\n    return OffloadManager(capacity)\n")
    prepared = prepare(f"{path}:build", CheckConfig())
    assert prepared.adapter == "native"
    assert prepared.make_adapter(3).capabilities.reset


@pytest.mark.parametrize(("text", "error", "message"), [
    ("no_colon", UsageError, "module:attr"),
    ("no_such_module_xyz:Thing", TargetLoadError, "cannot import"),
    ("kvoffload.impl:NoSuchThing", TargetLoadError, "no attribute"),
    ("/no/such/file.py:X", TargetLoadError, "does not exist"),
    ("kvoffload.spec:Events", TargetLoadError, "lacks"),
])
def test_bad_targets_say_what_is_wrong(text: str, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        prepare(text, CheckConfig())


def test_a_factory_without_policy_cannot_take_arc() -> None:
    def build(capacity: int) -> OffloadManager:
        return OffloadManager(capacity)

    assert prepare("t:build", CheckConfig(), obj=build).adapter == "native"
    with pytest.raises(UsageError, match="takes no policy"):
        prepare("t:build", CheckConfig(policy=Policy.ARC), obj=build)


# Classes with the signatures of vLLM's three eras (behaviour irrelevant here).
class Era018:
    def lookup(self, block_hashes: list[bytes]) -> int:
        return 0


class Era019:
    def lookup(self, key: bytes, req_context: object) -> bool | None:
        return False


class LookupResult:
    pass


class Era025:
    def lookup(self, key: bytes, req_context: object) -> LookupResult:
        return LookupResult()


@pytest.mark.parametrize(("cls", "era"), [
    (Era018, "vllm-int"), (Era019, "vllm-bool"), (Era025, "vllm-enum"),
    (OffloadManager, None),
])
def test_auto_adapter_reads_the_lookup_signature(cls: type, era: str | None) -> None:
    assert era_of(cls) == era, inspect.signature(cls.lookup)


def test_the_two_valued_lookup_era_needs_the_safe_profile() -> None:
    def build(capacity: int, policy: str = "lru") -> Era018:
        return Era018()

    with pytest.raises(UsageError, match="--profile safe"):
        prepare("t:build", CheckConfig(adapter="vllm-int"), obj=build)


def test_a_factory_is_detected_by_its_return_annotation() -> None:
    def build(capacity: int) -> OffloadManager:
        return OffloadManager(capacity)

    prepared = prepare("t:build", CheckConfig(), obj=build)
    assert prepared.adapter == "native"
    assert "annotation" in prepared.why


class ReqContext:
    def __init__(self, req_id: str = "") -> None:
        self.req_id = req_id


class VllmEra019(Era019):
    def prepare_store(self, keys: list[bytes], req_context: ReqContext) -> None:
        return None


def test_a_vllm_factory_gets_the_policy_keyword_it_takes() -> None:
    seen: list[dict[str, object]] = []

    def vllm_spelling(num_blocks: int, cache_policy: str = "lru",
                      enable_events: bool = False) -> VllmEra019:
        seen.append({"cache_policy": cache_policy, "enable_events": enable_events})
        return VllmEra019()

    def our_spelling(capacity: int, policy: str = "lru") -> VllmEra019:
        seen.append({"policy": policy})
        return VllmEra019()

    config = CheckConfig(policy=Policy.ARC, profile=Profile.SAFE)
    assert prepare("t:f", config, obj=vllm_spelling).adapter == "vllm-bool"
    assert seen[-1] == {"cache_policy": "arc", "enable_events": True}
    assert prepare("t:g", config, obj=our_spelling).adapter == "vllm-bool"
    assert seen[-1] == {"policy": "arc"}


def test_empty_and_blank_targets_are_usage_errors() -> None:
    for text in ("", "  "):
        with pytest.raises(UsageError, match="TARGET is empty"):
            load_object(text)
