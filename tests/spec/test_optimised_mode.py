"""Typed errors survive ``python -O`` (asserts would vanish)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import kvoffload.spec as s
state = s.initial_state(2)
checks = 0
for call, error in [
    (lambda: s.prepare_load(state, ["a"]), s.NotReadable),
    (lambda: s.complete_load(state, ["a"]), s.UnmatchedCompleteLoad),
    (lambda: s.Call(s.Op.LOOKUP, ()), s.MalformedCall),
    (lambda: s.initial_state(0), s.BadCapacity),
]:
    try:
        call()
    except error:
        checks += 1
broken = s.CacheState(2, s.Policy.LRU, s.LruOrder(), blocks=frozenset(
    {s.Block("a", s.Phase.STORING, 0, ticket=0, loads=(1,))}), next_ticket=2)
try:
    s.check_invariants(broken)
except s.InvariantViolation as violation:
    checks += violation.invariant == "readers_only_on_ready_blocks"
print(checks)
"""


def test_typed_errors_are_raised_in_optimised_mode() -> None:
    done = subprocess.run([sys.executable, "-O", "-c", SCRIPT], capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == "5"
