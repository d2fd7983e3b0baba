"""The diffbehavior drivers: concrete runs here, the symbolic comparison in the slow tier."""

from __future__ import annotations

import shutil

import pytest
from proofs.diffbehavior.drivers import (
    buggy_manager_outputs,
    decode,
    manager_outputs,
    spec_outputs,
)
from proofs.modelcheck import diffbehavior

from kvoffload.spec.calls import API_OPS

PR41795 = [1, 0, 2, 0]  # prepare_store([0]), lookup(0), complete_store([0]), lookup(0)


def test_codes_decode_to_every_operation() -> None:
    # every call a caller can make; the environment's background eviction is no call
    assert {decode(code).op for code in range(8)} == API_OPS
    assert decode(1 + 8 * 2 + 24).keys == (2,)
    assert decode(2 + 24).success is False


# CrossHair once reported a difference here while symbolic ints reached the manager's
# dicts; replayed concretely the two agree (kept as a regression input).
SYMBOLIC_ARTEFACT = [641521, 2, 8, 7, 6, 237492, 8]


def test_spec_and_manager_agree_on_concrete_sequences() -> None:
    for ops in (PR41795, SYMBOLIC_ARTEFACT, [1, 9, 17, 2, 10, 3, 4, 4], [1, 6, 2, 1, 7, 7],
                list(range(16))):
        assert spec_outputs(ops) == manager_outputs(ops)


def test_the_buggy_control_differs_on_the_pr41795_sequence() -> None:
    assert spec_outputs(PR41795)[1] != buggy_manager_outputs(PR41795)[1]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("crosshair") is None, reason="crosshair-tool not installed")
def test_crosshair_finds_the_control_and_no_difference_with_the_manager() -> None:
    assert diffbehavior.run("buggy-manager").differs
    assert not diffbehavior.run("manager").differs
