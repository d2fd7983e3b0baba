"""A manager answers every call as the spec does: one contract, for CrossHair.

``python -m proofs.crosshair_check proofs/crosshair/refines.py --manager module:Class``
refutes it with a state of the domain (its shortest trace replayed on the manager) and
two calls after which the manager's answers (or misuse errors, or its state after one),
or its lookups of every key, differ from the spec's: victims exactly, slots up to the
spec's freedom, tickets up to renaming (:func:`proofs.modelcheck.refinement.compare`).
"""

from __future__ import annotations

from kvoffload.spec import CacheState, Call, broken_invariants  # noqa: F401 - pre: names it

from .manager import difference


def manager_answers_as_the_spec(state: CacheState, call: Call, then: Call) -> str:
    """Every two calls of the alphabet, in every state of the domain, then a lookup of
    every key (what a call did behind its answer's back shows there or in the next call).

    pre: not broken_invariants(state)
    post: __return__ == ""
    """
    return difference(state, call, then)
