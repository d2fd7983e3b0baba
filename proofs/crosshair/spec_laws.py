"""The spec's laws (``kvoffload.spec.laws``: the spec stated a second time) as one PEP 316
contract: every call of the alphabet, in every state of the domain, breaks no law.

The laws never call a transition; this contract calls the transition (``apply``) and
hands the step to ``broken_laws``, so CrossHair checks that the two statements of the
spec agree on every path it explores, exhausting them at a bound that small:
``python -m proofs.crosshair_check proofs/crosshair/spec_laws.py --domains one-slot``.
Needs ``kvoffload.spec.laws`` (issue 24, item 1).
"""

from __future__ import annotations

import importlib
from typing import Any

from kvoffload.spec import (
    CacheState,
    Call,
    MisuseError,
    apply,
    broken_invariants,  # noqa: F401 - named by the contract (pre:)
)

laws: Any = importlib.import_module("kvoffload.spec.laws")


def every_call_keeps_every_law(state: CacheState, call: Call) -> tuple[str, ...]:
    """The names of the laws the call breaks (exact level: LRU and ARC order included).

    pre: not broken_invariants(state)
    post: __return__ == ()
    """
    try:
        after, answer = apply(state, call)
    except MisuseError as error:
        return tuple(laws.broken_laws(state, call, error, None))
    return tuple(laws.broken_laws(state, call, answer, after))
