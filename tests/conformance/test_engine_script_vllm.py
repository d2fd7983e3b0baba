"""vLLM's findings shown by engine-native reproducers, in a fresh process without
kvoffload: PR #41795's bug in 0.20.2 (lookup of a block being stored answers False,
"absent"). A seed release: its wheel's kv_offload is cached by the suite (a few seconds
per case), so this runs in the default tier and skips where the release cannot load."""

from __future__ import annotations

import pytest

from kvoffload.conformance.command.engine_script import engine_reproducer
from kvoffload.conformance.config import CheckConfig
from kvoffload.conformance.errors import PropertyViolation
from kvoffload.conformance.reproduce import reproduce
from kvoffload.spec import Call, Op
from vllm_releases import vllm_target


@pytest.mark.usefixtures("python_hosts")  # the recording host forked, the script run fresh
def test_pr41795_lookup_of_a_block_being_stored_is_reproduced_by_vllm_alone(
    pytestconfig: pytest.Config,
) -> None:
    target = vllm_target(pytestconfig, "0.20.2")
    calls = [Call(Op.PREPARE_STORE, ("a",)), Call(Op.LOOKUP, ("a",))]
    configuration = {"profile": "strict", "capacity": 1}
    with pytest.raises(PropertyViolation) as caught:
        reproduce(target, configuration, calls)
    violation = caught.value
    violation.generated = len(violation.trace)
    script = engine_reproducer(target, CheckConfig.from_options(**configuration, spelling=""),
                               violation)
    assert script is not None
    assert script.reproduced, script.output
    assert "manager.lookup(b'a\\x00\\x00\\x00\\x00', req_context=" in script.source
    assert "from vllm.v1.kv_offload.cpu.manager import CPUOffloadingManager" in script.source
    assert "_kvoffload_vllm_" not in script.source  # the suite's alias never leaks
    assert "load_vllm('0.20.2')" in script.source
    assert "loaded vLLM 0.20.2's vllm/v1/kv_offload from" in script.output
