"""Shrink a failing trace to a short, readable one by replaying plain call lists.

Hypothesis finds the failure; shrinking then works on what a reader sees, the calls,
with replays that cost only the lockstep itself (a replay through Hypothesis costs
about six times more per step). A candidate is kept when it still fails the *same*
property and every call in it is one the configuration allows (the assumptions'
``excludes``, evaluated on the spec's state as the replay reaches it). Passes, repeated
until nothing changes or the time budget is spent:

1. delete chunks of calls (halves, quarters, ... single calls);
2. simplify calls: a lookup of one of its keys instead, fewer keys, a failed store made
   successful, vLLM's completion form instead of a ticket;
3. rename keys to a, b, c ... in order of first use.

The budget is a count of replays (:data:`SHRINK_REPLAYS`), so a seed gives the same
shrunk trace on any machine under any load; the wall clock (:data:`SHRINK_SAFETY_S`) is
only a safety net for a target whose replays hang or crawl, and a shrink it cut says so
(:attr:`Shrunk.stopped`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from kvoffload.spec import Call, Key, Op

from ..adapter_api import Adapter
from ..config import SMALL_TIERS, CheckConfig
from ..errors import PropertyViolation
from .lockstep import Lockstep, assumed_away, construct


def attempt(
    make_adapter: Callable[[int], Adapter],
    config: CheckConfig,
    calls: Sequence[Call],
    drain: bool,
    silenced: frozenset[str] = frozenset(),
) -> PropertyViolation | None:
    """Replay ``calls`` (then the drain) on a tier of ``config.capacity`` slots; the
    violation raised, or None if it passes or a call is one the configuration never
    generates."""
    assumptions = config.assumptions  # made anew at every reading: read once
    try:
        run = Lockstep(construct(make_adapter, config.capacity, config.call_timeout), config,
                       silenced=silenced)
        for call in calls:
            if assumptions and assumed_away(run.state, call, assumptions):
                return None
            run.step(call)
        if drain:
            run.drain(stale_completions=not config.assumes("no-stale-completions"))
        run.settle()
    except PropertyViolation as violation:
        return violation
    return None


SHRINK_REPLAYS = 10_000
"""The shrinker's budget, in replays made (a candidate replayed on one tier). The
self-test's longest shrink makes 4,672 (ArcNoAdaptation, 16 s on 2 cores); an engine's
failures take tens to a few hundred."""

SHRINK_SAFETY_S = 120.0
"""The wall clock's safety net (seconds): only a target whose replays hang or crawl
meets it before :data:`SHRINK_REPLAYS`, and the report then says the shrink was cut."""


@dataclass(frozen=True)
class Shrunk:
    """What a shrink reached, and how it ended."""

    violation: PropertyViolation
    replays: int
    """Replays made (a candidate on one tier; a candidate met before is not replayed)."""
    stopped: str | None = None
    """None: the passes changed nothing more; ``"replays"``: the replay budget ran out
    (the same on every machine); ``"time"``: the wall clock's safety net cut it (another
    machine may shrink further)."""


def shrink(
    make_adapter: Callable[[int], Adapter],
    config: CheckConfig,
    found: PropertyViolation,
    budget_s: float = SHRINK_SAFETY_S,
    silenced: frozenset[str] = frozenset(),
    max_replays: int = SHRINK_REPLAYS,
) -> Shrunk:
    """The shortest violation of ``found.prop`` these passes reach from ``found``, in at
    most ``max_replays`` replays (and ``budget_s`` seconds, the safety net).

    Every candidate is tried on the smallest tier first (1 slot, then 2, 3, 4, then
    about 1.4 times more each try, up to the current one: :func:`_tiers`), so a trace
    may shrink and its tier with it in one move: a bug that reads as one property on a
    large tier and as another on a small one still shrinks.
    """
    deadline = time.perf_counter() + budget_s
    stopped: str | None = None
    drain = found.in_drain
    best = found
    largest = found.capacity or config.capacity
    # Each pass starts again from the best trace, so later passes propose candidates
    # tried before (a one-call liveness failure's trace was replayed 7 times in 15
    # replays, each a timeout and a new host); a replay's outcome is kept and not
    # replayed again.
    replayed: dict[tuple[tuple[Call, ...], int], PropertyViolation | None] = {}

    def fails(calls: Sequence[Call]) -> bool:
        nonlocal best, largest, stopped
        for capacity in _tiers(largest):
            key = (tuple(calls), capacity)
            if key in replayed:
                violation = replayed[key]
            elif stopped is not None:
                return False
            elif len(replayed) >= max_replays:
                stopped = "replays"
                return False
            elif time.perf_counter() > deadline:
                stopped = "time"
                return False
            else:
                violation = replayed[key] = attempt(
                    make_adapter, config.sized(capacity), calls, drain, silenced)
            if violation is not None and violation.prop == found.prop:
                if _size(violation) <= _size(best):
                    best, largest = violation, capacity
                return True
        return False

    changed = True
    while changed and stopped is None:
        before = _size(best)
        fails(_generated(best))
        _delete_chunks(_generated(best), fails)
        _simplify(_generated(best), fails)
        _rename(_generated(best), fails)
        changed = _size(best) < before
    return Shrunk(best, len(replayed), stopped)


def shrink_calls(calls: Sequence[Call], fails: Callable[[Sequence[Call]], bool],
                 rounds: int = 20) -> list[Call]:
    """:func:`shrink`'s passes on a plain predicate, repeated until nothing changes (at
    most ``rounds`` times), with no time budget: the result depends on ``fails`` only
    (the corpus's self-test cases are the same on every machine)."""
    current = list(calls)
    for _ in range(rounds):
        before = current
        current = _rename(_simplify(_delete_chunks(current, fails), fails), fails)
        if current == before:
            break
    return current


def _tiers(largest: int) -> list[int]:
    """The tiers a candidate is tried on, smallest first: every small tier (1 to
    ``SMALL_TIERS``, the ones nine examples in ten draw), then a ladder growing by about
    1.4 (a wide tier's failure, 5 to 64 slots, tries at most 14 tiers per candidate, not
    64), always ending with ``largest``."""
    tiers = list(range(1, min(largest, SMALL_TIERS) + 1))
    while tiers[-1] < largest:
        tiers.append(min(largest, max(tiers[-1] + 1, tiers[-1] * 7 // 5)))
    return tiers


def _generated(violation: PropertyViolation) -> list[Call]:
    return list(violation.trace[:violation.generated])


def _size(violation: PropertyViolation) -> tuple[int, int, bool, int, str]:
    """Smaller tiers first, then shorter traces, a failing call over a failing probe,
    fewer keys, the smaller text."""
    calls = violation.trace
    return (violation.capacity, len(calls), violation.probe, sum(len(c.keys) for c in calls),
            " ".join(map(str, calls)))


def _delete_chunks(calls: list[Call], fails: Callable[[Sequence[Call]], bool]) -> list[Call]:
    size = max(1, len(calls) // 2)
    while size >= 1:
        start = 0
        while start < len(calls):
            candidate = calls[:start] + calls[start + size:]
            if fails(candidate):
                calls = candidate
            else:
                start += size
        size //= 2
    return calls


def _variants(call: Call, earlier: Sequence[Key]) -> list[Call]:
    """Simpler forms of one call, simplest first: without half its keys (then a
    quarter, ...: a call of a wide tier's many keys loses most of them in a few
    tries), then a lookup (of its keys, or of keys named before it), which says most
    with least, then without one key."""
    out: list[Call] = []
    keys, size = call.keys, len(call.keys) // 2
    while size >= 2 and call.op is not Op.LOOKUP:
        out.extend(replace(call, keys=keys[:start] + keys[start + size:])
                   for start in range(0, len(keys) - size + 1, size))
        size //= 2
    if call.op is not Op.LOOKUP:
        out.extend(Call(Op.LOOKUP, (key,)) for key in dict.fromkeys((*call.keys, *earlier)))
    if not call.success:
        out.append(replace(call, success=True))
    if call.ticket is not None:
        out.append(replace(call, ticket=None, job=call.job_ticket))
    if len(call.keys) > 1 and call.op is not Op.LOOKUP:
        out.extend(replace(call, keys=call.keys[:i] + call.keys[i + 1:])
                   for i in range(len(call.keys)))
    return out


def _simplify(calls: list[Call], fails: Callable[[Sequence[Call]], bool]) -> list[Call]:
    index = 0
    while index < len(calls):
        earlier = [k for c in calls[:index] for k in c.keys]
        for simpler in _variants(calls[index], earlier):
            candidate = [*calls[:index], simpler, *calls[index + 1:]]
            if fails(candidate):
                calls = candidate
                break
        else:
            index += 1
    return calls


def _rename(calls: list[Call], fails: Callable[[Sequence[Call]], bool]) -> list[Call]:
    """Keys renamed a, b, c ... in order of first use (opaque keys: same behaviour)."""
    order: dict[Key, None] = {}
    for call in calls:
        order.update(dict.fromkeys(call.keys))
    names = [chr(ord("a") + i) if i < 26 else f"k{i}" for i in range(len(order))]
    mapping = dict(zip(order, names, strict=True))
    if all(k == v for k, v in mapping.items()):
        return calls
    candidate = [replace(c, keys=tuple(mapping[k] for k in c.keys)) for c in calls]
    return candidate if fails(candidate) else calls
